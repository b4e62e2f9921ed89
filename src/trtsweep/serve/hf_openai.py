"""`python -m trtsweep.serve.hf_openai`: the hf backend's counterpart of `trtllm-serve` (the PyTorch flow's
OpenAI-compatible server), serving an HF checkpoint with transformers (trtsweep.serve.hf_generate).

Command line: trtllm-serve's option names, so one argv builder serves both (serve/openai_server.py):

    python -m trtsweep.serve.hf_openai MODEL [--host localhost] [--port 8000] [--backend pytorch]
        [--tp_size 1] [--pp_size 1] [--ep_size E] [--max_batch_size B] [--max_num_tokens N] [--max_seq_len S]
        [--extra_llm_api_options FILE] [--log_level info]

The options file holds LLM API fields (YAML) and is merged over the command line's, as trtllm-serve merges it
last; hf_generate.from_llm_args reads the result (model, tokenizer, dtype, max_batch_size: requests generating at
once, the others wait; max_seq_len; enable_iter_perf_stats, iter_stats_max_iterations; speculative_config (NGram,
DraftTarget: drafted and accepted tokens in the iteration stats, trtsweep.serve.drafting); trtsweep_hf: {device,
torch_threads}); every other field is logged once as
ignored. tp/pp/ep are accepted and ignored (the model runs on one device). Logs go to stderr.

Endpoints, as trtllm-serve answers them:
- GET /health: 200. The port opens once the model is loaded, as trtllm-serve's does.
- GET /v1/models: {"object": "list", "data": [{"id": NAME, "object": "model", ...}]}, NAME being trtllm-serve's
  model name: the last path component of a MODEL that is an existing directory (a link to one included), any
  other MODEL as given.
- GET /metrics: the iteration stats kept since the last call (a JSON list, taken: each is handed out once; []
  without enable_iter_perf_stats), as trtllm-serve's; an iteration is one request's forward pass
  (hf_generate.IterationStats).
- POST /v1/completions (prompt: a string or token ids) and /v1/chat/completions (messages with text content, or
  prompt_token_ids; the tokenizer's chat template, or chat_template, with add_generation_prompt, documents and
  chat_template_kwargs), streamed (SSE, `data: [DONE]` last) or not, with `usage` (prompt and
  completion tokens; completion tokens leave the EOS token and a stop string's tokens out). stream_options:
  include_usage adds a last chunk with the usage, continuous_usage_stats the usage so far to every chunk (both
  default to true once stream_options is given, as trtllm-serve's StreamOptions does). Sampling as trtllm-serve
  maps a request: temperature and top_p default to 1 (sampling; temperature 0 is greedy), top_k, seed,
  presence_penalty, frequency_penalty, stop, ignore_eos, max_tokens (max_completion_tokens for chat; default: up to
  max_seq_len); a streamed chunk's text never ends inside a character.
- Errors are JSON {"object": "error", "message", "type", "param", "code"}: 400 for a bad request (not JSON, a
  field of the wrong type, prompt + max_tokens over max_seq_len, a field trtllm-serve does not know, which its
  models forbid, or one it knows that the hf backend cannot honour, at a value that would change the output:
  n > 1, logprobs, tools, response_format, beam search, ...). Unlike trtllm-serve, which serves any `model` name,
  a request naming another model than NAME or MODEL is answered 404: the hf backend never answers a request the
  sweep did not mean for it. A request the server stops for (SIGTERM) is answered 503, unless streamed (its last
  chunk says finish_reason cancelled); a generation that fails, 500.

Disaggregated serving: a request's `disaggregated_params` ({request_type, first_gen_tokens, ctx_request_id,
encoded_opaque_state, draft_tokens, disagg_request_id, ctx_dp_rank, ctx_info_endpoint, schedule_style}, as
tensorrt_llm/serve/openai_protocol.py's DisaggregatedParams has them at 1.2; another key is refused) makes this server a
context or generation worker, as trtllm-serve with a cache_transceiver_config is one behind `trtllm-serve
disaggregated` (trtsweep.serve.disagg_proxy stands in for that proxy):
- request_type context_only (not streamed): the prefill, and the first token; the choice's finish_reason is
  not_finished (length when max_tokens is 1, stop at an EOS token) and its disaggregated_params are {request_type:
  context_only, first_gen_tokens: [the token], ctx_request_id: this server's count, encoded_opaque_state: null,
  draft_tokens: null}; the response carries prompt_token_ids, which the proxy sends on as the generation's prompt;
- request_type generation_only (first_gen_tokens required): the output starts with first_gen_tokens and decoding goes
  on from them, streamed or not, usage counting them. There is no KV cache transfer between these processes: the
  generation worker recomputes the prompt's prefill on its own (one forward pass over the prompt and the first
  tokens) where TensorRT-LLM's receives the context worker's cache over its cache transceiver.

A client that goes away stops its generation (checked every token). SIGTERM / SIGINT: running generations are
cancelled, the server closes its port and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from trtsweep.serve import hf_generate

log = logging.getLogger("trtsweep.hf_openai")

# trtllm-serve's --log_level choices -> logging levels
LOG_LEVELS = {
    "internal_error": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO,
    "verbose": logging.DEBUG, "debug": logging.DEBUG, "trace": logging.DEBUG,
}  # fmt: skip
# fields of both request kinds the hf backend honours (model, stream and stream_options are read on their own)
SAMPLING = ("temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty", "stop", "ignore_eos")
HONOURED = {
    "completions": {"model", "prompt", "max_tokens", "stream", "stream_options", "add_special_tokens", "user",
                    "disaggregated_params", *SAMPLING},
    "chat": {"model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options",
             "add_special_tokens", "add_generation_prompt", "chat_template", "chat_template_kwargs", "documents",
             "prompt_token_ids", "user", "reasoning_effort", "cache_salt", "disaggregated_params", *SAMPLING},
}  # fmt: skip
# DisaggregatedParams' fields (tensorrt_llm/serve/openai_protocol.py at 1.2)
DISAGG_FIELDS = ("request_type", "first_gen_tokens", "ctx_request_id", "encoded_opaque_state", "draft_tokens",
                 "disagg_request_id", "ctx_dp_rank", "ctx_info_endpoint", "schedule_style")  # fmt: skip
CONTEXT_ONLY, GENERATION_ONLY = "context_only", "generation_only"
# fields trtllm-serve knows that change nothing at these values; any other value is refused
NO_OP = {
    "n": (1,), "best_of": (None, 1), "echo": (False,), "logit_bias": (None, {}), "logprobs": (None, 0, False),
    "response_format": (None, {"type": "text"}), "use_beam_search": (False,), "top_p_min": (0, 0.0),
    "min_p": (0, 0.0), "repetition_penalty": (1, 1.0), "length_penalty": (1, 1.0), "early_stopping": (False,),
    "stop_token_ids": (None, []), "include_stop_str_in_output": (False,), "min_tokens": (0,),
    "skip_special_tokens": (True,), "spaces_between_special_tokens": (True,), "truncate_prompt_tokens": (None,),
    "lora_request": (None,),
}  # fmt: skip
NO_OP_ONLY = {
    "completions": {"suffix": (None, ""), "return_context_logits": (False,), "detokenize": (True,)},
    "chat": {"top_logprobs": (None, 0), "tools": (None, []), "tool_choice": (None, "none")},
}


ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError", 503: "ServiceUnavailableError"}


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def error_response(message: str, status: int = 400) -> web.Response:
    body = {"object": "error", "message": message, "type": ERROR_TYPES[status], "param": None, "code": status}
    return web.json_response(body, status=status)


def served_name(model: str) -> str:
    """trtllm-serve's model name: an existing directory's last path component, any other MODEL as given."""
    path = Path(model)
    return path.name if path.is_dir() else model


def _check_fields(kind: str, body: dict[str, Any]) -> None:
    no_op = {**NO_OP, **NO_OP_ONLY[kind]}
    unknown = sorted(set(body) - HONOURED[kind] - set(no_op))
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)} (trtllm-serve forbids fields it does not know)")
    for name, allowed in no_op.items():
        if name in body and body[name] not in allowed:
            raise BadRequest(f"{name}={body[name]!r} is not supported by trtsweep's hf backend (only {allowed[-1]!r})")


def _number(body: dict[str, Any], name: str, cast: type, default: Any = None) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or (cast is int and not isinstance(value, int)):
        raise BadRequest(f"{name}: expected {'an integer' if cast is int else 'a number'}, got {value!r}")
    return cast(value)


def _sampling(body: dict[str, Any], max_tokens: int) -> hf_generate.Sampling:
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest(f"stop: expected a string or a list of strings, got {body.get('stop')!r}")
    return hf_generate.Sampling(
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", float, 1.0),
        top_p=_number(body, "top_p", float, 1.0),
        top_k=_number(body, "top_k", int, 0),
        seed=_number(body, "seed", int),
        presence_penalty=_number(body, "presence_penalty", float, 0.0),
        frequency_penalty=_number(body, "frequency_penalty", float, 0.0),
        stop=tuple(stop),
        ignore_eos=bool(body.get("ignore_eos", False)),
    )


def _token_ids(name: str, value: Any) -> list[int]:
    if isinstance(value, list) and value and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return value
    raise BadRequest(f"{name}: expected a string or a non-empty list of token ids (one prompt per request)")


def _disaggregated(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's disaggregated_params, checked (None without them)."""
    params = body.get("disaggregated_params")
    if params is None:
        return None
    if not isinstance(params, dict):
        raise BadRequest(f"disaggregated_params: expected an object, got {params!r}")
    unknown = sorted(set(params) - set(DISAGG_FIELDS))
    if unknown:
        raise BadRequest(f"disaggregated_params: unknown field(s) {', '.join(unknown)}")
    kind = params.get("request_type")
    if kind not in (CONTEXT_ONLY, GENERATION_ONLY):
        raise BadRequest(
            f"disaggregated_params.request_type: expected {CONTEXT_ONLY} or {GENERATION_ONLY}, got {kind!r}"
        )
    if kind == CONTEXT_ONLY and body.get("stream"):
        raise BadRequest("a context_only request is not streamed (the disaggregated proxy sends it with stream false)")
    if kind == GENERATION_ONLY:
        _token_ids("disaggregated_params.first_gen_tokens", params.get("first_gen_tokens"))
        if not isinstance(params.get("ctx_request_id"), int) or isinstance(params.get("ctx_request_id"), bool):
            raise BadRequest(
                f"disaggregated_params.ctx_request_id: expected an integer, got {params.get('ctx_request_id')!r}"
            )
    return params


def _message(message: Any) -> dict[str, Any]:
    """A chat message with its text content parts joined (by newlines, as trtllm-serve joins them)."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise BadRequest(f"messages: expected objects with a role, got {message!r}")
    content = message.get("content")
    if isinstance(content, list):
        kinds = {part.get("type") if isinstance(part, dict) else None for part in content}
        if kinds - {"text"} or not all(isinstance(part.get("text"), str) for part in content):
            raise BadRequest(f"message content {content!r}: the hf backend takes text parts only")
        content = "\n".join(part["text"] for part in content)
    return {**message, "content": content}


class Server:
    """The endpoints of one loaded model."""

    def __init__(self, engine: hf_generate.Engine, model: str) -> None:
        self.engine = engine
        self.model = model  # the MODEL argument as given
        self.name = served_name(model)
        self.stopping = threading.Event()  # set on SIGTERM / SIGINT: running generations stop
        self.context_requests = itertools.count(1)  # ctx_request_id of the context_only requests served

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, _: web.Request) -> web.Response:
        card = {"id": self.name, "object": "model", "created": int(time.time()), "owned_by": "tensorrt_llm"}
        return web.json_response({"object": "list", "data": [card]})

    async def metrics(self, _: web.Request) -> web.Response:
        stats = self.engine.iteration_stats
        return web.json_response(stats.take() if stats is not None else [])

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "chat")

    # -- one request ----------------------------------------------------------------------------------------------
    async def _serve(self, request: web.Request, kind: str) -> web.StreamResponse:
        try:
            body = await self._body(request)
            disagg = _disaggregated(body)
            gen, budget = await asyncio.to_thread(self._generation, kind, body, disagg)
        except BadRequest as exc:
            return error_response(str(exc), exc.status)
        except Exception as exc:
            log.exception("request failed")
            return error_response(f"the request failed: {exc}", 500)
        transport = request.transport

        def cancelled() -> bool:  # read from the generating thread: the server stops or the client went away
            return self.stopping.is_set() or transport is None or transport.is_closing()

        if body.get("stream"):
            return await self._stream(request, kind, body, gen, cancelled)
        try:
            async for _ in self._deltas(gen, cancelled):
                pass
        except Exception as exc:  # logged where it happened (hf_generate)
            return error_response(f"generation failed: {exc}", 500)
        if gen.finish_reason == "cancelled":
            return error_response("the request was cancelled: the server is stopping or the client went away", 503)
        choice: dict[str, Any] = {"index": 0, "finish_reason": gen.finish_reason, "stop_reason": gen.stop_reason}
        if kind == "chat":
            choice["message"] = {"role": "assistant", "content": gen.text}
        else:
            choice["text"] = gen.text
        extra: dict[str, Any] = {}
        if disagg is not None and disagg["request_type"] == CONTEXT_ONLY:
            choice.update(self._context_phase(gen, budget))
            extra["prompt_token_ids"] = gen.prompt_ids
        return web.json_response({**self._head(kind), "choices": [choice], "usage": _usage(gen), **extra})

    def _context_phase(self, gen: hf_generate.Generation, budget: int) -> dict[str, Any]:
        """A context_only choice's finish_reason and disaggregated_params (what a generation worker goes on from)."""
        if gen.finish_reason == "stop":
            finish = "stop"
        else:
            finish = "length" if budget <= len(gen.output_ids) else "not_finished"
        params = {"request_type": CONTEXT_ONLY, "first_gen_tokens": gen.output_ids[:1],
                  "ctx_request_id": next(self.context_requests), "encoded_opaque_state": None,
                  "draft_tokens": None}  # fmt: skip
        return {"finish_reason": finish, "disaggregated_params": params}

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError as exc:
            raise BadRequest(f"the request body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        if "model" not in body:
            raise BadRequest("model: a required field")
        if body["model"] not in (self.name, self.model):
            raise BadRequest(f"The model `{body.get('model')}` does not exist.", 404)
        if body.get("stream_options") is not None and not body.get("stream"):
            raise BadRequest("stream_options can only be set if stream is true")
        if not isinstance(body.get("stream_options") or {}, dict):
            raise BadRequest(f"stream_options: expected an object, got {body['stream_options']!r}")
        return body

    def _generation(
        self, kind: str, body: dict[str, Any], disagg: dict[str, Any] | None
    ) -> tuple[hf_generate.Generation, int]:
        """The request's generation and its output budget (tokenizes: runs on a worker thread). A context_only
        request generates its first token only; a generation_only one starts from its first_gen_tokens."""
        _check_fields(kind, body)
        if kind == "chat":
            given = body.get("prompt_token_ids")
            prompt_ids = _token_ids("prompt_token_ids", given) if given is not None else self._chat_ids(body)
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        else:
            prompt_ids = self._completion_ids(body)
            max_tokens = body.get("max_tokens")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
            raise BadRequest(f"max_tokens: expected an integer, got {max_tokens!r}")
        try:
            budget = self.engine.budget(len(prompt_ids), max_tokens)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        if disagg is None:
            return hf_generate.Generation(prompt_ids, _sampling(body, budget)), budget
        if disagg["request_type"] == CONTEXT_ONLY:
            return hf_generate.Generation(prompt_ids, _sampling(body, 1)), budget
        first = list(disagg["first_gen_tokens"])
        return hf_generate.Generation(prompt_ids, _sampling(body, budget), first_tokens=first), budget

    def _completion_ids(self, body: dict[str, Any]) -> list[int]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            return self.engine.encode(prompt, add_special_tokens=bool(body.get("add_special_tokens", True)))
        return _token_ids("prompt", prompt)

    def _chat_ids(self, body: dict[str, Any]) -> list[int]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: expected a non-empty list")
        template: dict[str, Any] = {"add_generation_prompt": bool(body.get("add_generation_prompt", True))}
        if body.get("chat_template"):
            template["chat_template"] = body["chat_template"]
        if body.get("documents"):
            template["documents"] = body["documents"]
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise BadRequest(f"chat_template_kwargs: expected an object, got {kwargs!r}")
        template.update(kwargs)
        conversation = [_message(m) for m in messages]
        try:
            text = self.engine.chat_prompt(conversation, **template)
        except Exception as exc:  # the template's own error (a role it does not take, ...)
            raise BadRequest(f"chat template: {exc}") from exc
        return self.engine.encode(text, add_special_tokens=bool(body.get("add_special_tokens", False)))

    async def _deltas(
        self, gen: hf_generate.Generation, cancelled: Callable[[], bool]
    ) -> AsyncIterator[hf_generate.Delta]:
        """The generation's deltas, generated on a thread of its own."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[hf_generate.Delta | Exception] = asyncio.Queue()
        self.engine.submit(gen, cancelled, lambda item: loop.call_soon_threadsafe(items.put_nowait, item))
        while True:
            item = await items.get()
            if isinstance(item, Exception):
                raise item
            yield item
            if item.final:
                return

    async def _stream(
        self, request: web.Request, kind: str, body: dict[str, Any], gen: hf_generate.Generation,
        cancelled: Callable[[], bool],
    ) -> web.StreamResponse:  # fmt: skip
        options = body.get("stream_options")
        include_usage = options is not None and options.get("include_usage", True) is not False
        continuous = options is not None and options.get("continuous_usage_stats", True) is not False
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        head = self._head(kind, chunk=True)

        async def send(choices: list[dict[str, Any]], usage: bool) -> None:
            chunk = {**head, "choices": choices, **({"usage": _usage(gen)} if usage else {})}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        def choice(text: str, final: bool) -> dict[str, Any]:
            done = {"finish_reason": gen.finish_reason, "stop_reason": gen.stop_reason} if final else {}
            part = {"delta": {"content": text}} if kind == "chat" else {"text": text}
            return {"index": 0, **part, "finish_reason": None, "stop_reason": None, **done}

        try:
            if kind == "chat":
                await send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                           continuous)  # fmt: skip
            async for delta in self._deltas(gen, cancelled):
                await send([choice(delta.text, delta.final)], continuous)
            if include_usage:
                await send([], True)
            await response.write(b"data: [DONE]\n\n")
        except ConnectionResetError:
            log.info("client went away: generation cancelled after %d tokens", len(gen.output_ids))
        except Exception as exc:  # logged where it happened (hf_generate); the stream ends without [DONE]
            error = {"error": {"message": f"generation failed: {exc}", "type": ERROR_TYPES[500], "code": 500}}
            await response.write(f"data: {json.dumps(error)}\n\n".encode())
        return response

    def _head(self, kind: str, chunk: bool = False) -> dict[str, Any]:
        if kind == "chat":
            rid, obj = f"chatcmpl-{uuid.uuid4().hex}", "chat.completion.chunk" if chunk else "chat.completion"
        else:
            rid, obj = f"cmpl-{uuid.uuid4().hex}", "text_completion"
        return {"id": rid, "object": obj, "created": int(time.time()), "model": self.name}


def _usage(gen: hf_generate.Generation) -> dict[str, int]:
    prompt, completion = len(gen.prompt_ids), len(gen.output_ids)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trtsweep.serve.hf_openai", description=__doc__.splitlines()[0])
    p.add_argument("model", help="HF checkpoint directory")
    p.add_argument("--host", default="localhost")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--backend", choices=["pytorch"], default="pytorch", help="the PyTorch flow (the only one)")
    p.add_argument("--tp_size", "--tensor_parallel_size", dest="tensor_parallel_size", type=int, default=1)
    p.add_argument("--pp_size", "--pipeline_parallel_size", dest="pipeline_parallel_size", type=int, default=1)
    p.add_argument("--ep_size", "--moe_expert_parallel_size", dest="moe_expert_parallel_size", type=int)
    p.add_argument("--max_batch_size", type=int, help="requests generating at once")
    p.add_argument(
        "--max_num_tokens", type=int, help="accepted as trtllm-serve's (an LLM API option the hf backend ignores)"
    )
    p.add_argument("--max_seq_len", type=int, help="prompt + output tokens of a request")
    p.add_argument("--extra_llm_api_options", type=Path, help="YAML of LLM API options, merged over these")
    p.add_argument("--log_level", choices=list(LOG_LEVELS), default="info")
    return p


def llm_args(args: argparse.Namespace) -> dict[str, Any]:
    """The LLM API arguments: the command line's, the options file merged over them."""
    merged = {name: getattr(args, name) for name in ("model", "backend", "tensor_parallel_size",
              "pipeline_parallel_size", "moe_expert_parallel_size", "max_batch_size", "max_num_tokens",
              "max_seq_len")}  # fmt: skip
    merged = {k: v for k, v in merged.items() if v is not None}
    if args.extra_llm_api_options is not None:
        options = yaml.safe_load(args.extra_llm_api_options.read_text(encoding="utf-8"))
        if not isinstance(options, dict):
            raise ValueError(f"{args.extra_llm_api_options}: expected a mapping of LLM API options")
        merged.update(options)
    return merged


async def serve(server: Server, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(server.app())
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    log.info("serving %s as %r on http://%s:%d", server.model, server.name, host, port)
    await stop.wait()
    log.info("stopping: cancelling running generations")
    server.stopping.set()
    await runner.cleanup()
    log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=LOG_LEVELS[args.log_level],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    try:
        settings, ignored = hf_generate.from_llm_args(llm_args(args))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        log.error("%s", exc)
        return 2
    if ignored:
        log.info("LLM API options the hf backend ignores: %s", ", ".join(ignored))
    engine = hf_generate.Engine(settings)
    asyncio.run(serve(Server(engine, args.model), args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
