"""`python -m trtsweep.serve.disagg_proxy disaggregated -c CONFIG`: the CPU bed's stand-in for `trtllm-serve
disaggregated`, the proxy in front of a disaggregated point's context and generation workers.

It reads the same config file trtsweep writes for the real proxy (toolchain.llmapi.disagg.proxy_config), with the real
parser's rules (disagg.parse_proxy_config: `hostname`, `port`, `context_servers` / `generation_servers` with
`num_instances` and as many `host:port` urls), listens on hostname:port and forwards as tensorrt_llm/serve/
openai_disagg_server.py does:

- POST /v1/completions and /v1/chat/completions: the request goes to the next context server (round robin over
  `context_servers.urls`) with `disaggregated_params: {request_type: context_only}`, `stream: false` and no
  `stream_options`; an answer that is not one choice with disaggregated_params is an error (500). A context answer
  whose finish_reason is neither length nor not_finished (an EOS first token) is the answer, without its
  disaggregated_params. Otherwise the request goes to the next generation server (round robin) with the context
  answer's disaggregated_params, request_type generation_only, and its prompt_token_ids as the prompt (completions'
  `prompt`, chat's `prompt_token_ids`), and the generation server's answer is relayed, streamed (SSE) or not;
- GET /health: 200 once every worker's /health answers 200, else 500 (the real proxy's is_ready);
- GET /v1/models: the first generation server's (later releases forward it to a worker; 1.0-1.2 have none);
- GET /version.
The workers here are trtsweep.serve.hf_openai processes: there is no KV cache to transfer between them, so a
generation worker recomputes the prompt's prefill (serve/hf_openai.py says how). Options: trtllm-serve disaggregated's
(-c/--config_file, -t/--server_start_timeout and -r/--request_timeout in seconds, -l/--log_level,
--metrics-log-interval accepted); -m/--metadata_server_config_file (etcd discovery) is refused. SIGTERM / SIGINT: it
closes its port and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from trtsweep.toolchain.llmapi.disagg import ProxyConfig, parse_proxy_config

log = logging.getLogger("trtsweep.disagg_proxy")
LOG_LEVELS = {"internal_error": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
              "info": logging.INFO, "verbose": logging.DEBUG, "debug": logging.DEBUG,
              "trace": logging.DEBUG}  # fmt: skip
GOES_ON = ("length", "not_finished")  # a context answer with one of these finish reasons goes to a generation server
VERSION = "trtsweep-disagg-proxy"


def _error(message: str, status: int = 500) -> web.Response:
    kind = "InternalServerError" if status == 500 else "BadRequestError"
    body = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
    return web.json_response(body, status=status)


class Proxy:
    """The endpoints of one proxy over its config's servers."""

    def __init__(self, config: ProxyConfig, request_timeout_s: float) -> None:
        self.config = config
        self.timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        self._next: dict[str, Iterator[str]] = {"context": itertools.cycle(config.context_urls),
                                                "generation": itertools.cycle(config.generation_urls)}  # fmt: skip
        self.session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _: web.Application) -> None:
        self.session = aiohttp.ClientSession(timeout=self.timeout)

    async def _close(self, _: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        assert self.session is not None, "the proxy's client session opens with the app"
        return self.session

    def next_server(self, role: str) -> str:
        return next(self._next[role])

    async def ready(self) -> bool:
        for url in [*self.config.context_urls, *self.config.generation_urls]:
            try:
                async with self.http.get(f"http://{url}/health", timeout=aiohttp.ClientTimeout(total=5)) as resp:
                    if resp.status != 200:
                        return False
            except (aiohttp.ClientError, asyncio.TimeoutError):
                return False
        return True

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200 if await self.ready() else 500)

    async def version(self, _: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def models(self, _: web.Request) -> web.Response:
        url = self.config.generation_urls[0]
        try:
            async with self.http.get(f"http://{url}/v1/models") as resp:
                return web.json_response(await resp.json(), status=resp.status)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return _error(f"generation server {url}: {exc}")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._forward(request, "/v1/completions", "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._forward(request, "/v1/chat/completions", "chat")

    async def _forward(self, request: web.Request, path: str, kind: str) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError as exc:
            return _error(f"the request body is not JSON: {exc}", 400)
        if not isinstance(body, dict):
            return _error("the request body must be a JSON object", 400)
        ctx_url = self.next_server("context")
        ctx_body = {k: v for k, v in body.items() if k != "stream_options"}
        ctx_body.update(disaggregated_params={"request_type": "context_only"}, stream=False)
        try:
            async with self.http.post(f"http://{ctx_url}{path}", json=ctx_body) as resp:
                status, answer = resp.status, await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return _error(f"context server {ctx_url}: {exc}")
        if status != 200:
            return web.json_response(answer, status=status)
        choices = answer.get("choices") or []
        if len(choices) != 1:
            return _error("the context server returned more than one choice (one only in disaggregated serving)")
        params = choices[0].get("disaggregated_params")
        if params is None:
            return _error("Context server did not return disaggregated params")
        if choices[0].get("finish_reason") not in GOES_ON:
            del choices[0]["disaggregated_params"]
            log.info("request: context %s only (finish_reason %s)", ctx_url, choices[0].get("finish_reason"))
            return await self._as_answer(request, body, answer, kind)
        gen_url = self.next_server("generation")
        gen_body = {**body, "disaggregated_params": {**params, "request_type": "generation_only"}}
        if answer.get("prompt_token_ids") is not None:
            gen_body["prompt" if kind == "completions" else "prompt_token_ids"] = answer["prompt_token_ids"]
        log.info("request: context %s, generation %s", ctx_url, gen_url)
        return await self._relay(request, f"http://{gen_url}{path}", gen_body, gen_url)

    async def _relay(self, request: web.Request, url: str, body: dict[str, Any], server: str) -> web.StreamResponse:
        try:
            async with self.http.post(url, json=body) as resp:
                if not body.get("stream") or resp.status != 200:
                    return web.json_response(await resp.json(), status=resp.status)
                out = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
                await out.prepare(request)
                async for chunk in resp.content.iter_any():
                    await out.write(chunk)
                return out
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return _error(f"generation server {server}: {exc}")

    async def _as_answer(self, request: web.Request, body: dict[str, Any], answer: dict[str, Any],
                         kind: str) -> web.StreamResponse:  # fmt: skip
        """The context server's answer as the client asked for it (one SSE chunk and [DONE] when streamed)."""
        if not body.get("stream"):
            return web.json_response(answer)
        choice = dict(answer["choices"][0])
        if kind == "chat":
            choice["delta"] = {"role": "assistant", "content": choice.pop("message", {}).get("content", "")}
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await out.prepare(request)
        await out.write(f"data: {json.dumps({**answer, 'choices': [choice]})}\n\ndata: [DONE]\n\n".encode())
        return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trtsweep.serve.disagg_proxy", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["disaggregated"], help="trtllm-serve's subcommand (the only one)")
    p.add_argument("-c", "--config_file", type=Path, required=True)
    p.add_argument("-m", "--metadata_server_config_file", type=Path)
    p.add_argument("-t", "--server_start_timeout", type=int, default=180)
    p.add_argument("-r", "--request_timeout", type=int, default=180)
    p.add_argument("-l", "--log_level", choices=list(LOG_LEVELS), default="info")
    p.add_argument("--metrics-log-interval", type=int, default=0)
    return p


async def serve(proxy: Proxy, start_timeout_s: float) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(proxy.app())
    await runner.setup()
    deadline = loop.time() + start_timeout_s
    while not await proxy.ready():  # as the real proxy, it waits for its servers before it listens
        if stop.is_set() or loop.time() > deadline:
            log.error("the workers were not ready within %d s", start_timeout_s)
            await runner.cleanup()
            return 0 if stop.is_set() else 1
        await asyncio.sleep(0.5)
    await web.TCPSite(runner, proxy.config.hostname, proxy.config.port).start()
    log.info("proxy on http://%s:%d: context %s, generation %s", proxy.config.hostname, proxy.config.port,
             proxy.config.context_urls, proxy.config.generation_urls)  # fmt: skip
    await stop.wait()
    log.info("stopping")
    await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=LOG_LEVELS[args.log_level],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    if args.metadata_server_config_file is not None:
        log.error("--metadata_server_config_file: the stand-in proxy takes its servers from the config's urls only")
        return 2
    try:
        config = parse_proxy_config(yaml.safe_load(args.config_file.read_text(encoding="utf-8")))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        log.error("%s: %s", args.config_file, exc)
        return 2
    return asyncio.run(serve(Proxy(config, float(args.request_timeout)), float(args.server_start_timeout)))


if __name__ == "__main__":
    sys.exit(main())
