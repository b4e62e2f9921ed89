#!/usr/bin/env python3
"""A sleep-bound stand-in for `tritonserver`: Triton's endpoints, no model, almost no CPU (benchmarks/fleet.py).

Takes Triton's command line as trtsweep's `server.build_command` passes it (`--model-repository=`, `--http-port=`,
`--grpc-port=`, `--metrics-port=`, `--http-address=` / `--grpc-address=` / `--metrics-address=`, `--id=`; every
other flag is ignored) and, after a fixed "model load" sleep counted from process start (`--standin-load-s`,
nothing listens before), serves the `ensemble` of the model repository:

* HTTP: `GET /v2` (`{"name": <id>, "version": "standin"}`), `/v2/health/ready|live`, `/v2/models/<m>[/ready|
  /config]`, `POST /v2/models/<m>/generate` and `generate_stream` (SSE: one event per token with `text_output`
  and `num_output_tokens`, as trtsweep's ensembles answer);
* gRPC (Triton's `GRPCInferenceService` from tritonclient): ServerLive / ServerReady / ServerMetadata
  (name = id) / ModelReady / ModelMetadata / ModelConfig / ModelInfer / ModelStreamInfer (one response per
  token, then the empty final response when the client enables it); requests of one stream are answered in
  order, one at a time (llm-perf keeps one request per stream);
* Prometheus `/metrics` on the metrics port (request count and compute time per model).

Every request takes `max_tokens` tokens: the first after `--standin-first-token-ms`, then one every
`--standin-token-ms` (absolute deadlines from arrival, no batching limit). The model configuration is read from
`<repository>/ensemble/config.pbtxt` when present (decoupled when any model of the repository is). The log, on
stdout, uses Triton's line format (`I1123 08:13:12.082324 <pid> file:line] "msg"`) so that the log's first
line and its `Started ...` lines give the start-to-ready time as for the real server. SIGTERM / SIGINT stop it.

The hosts' PATH python is a bare interpreter: start it through the host venv's python, e.g. a wrapper script
`exec <venv>/bin/python standin_tritonserver.py --standin-load-s 3 "$@"` given as `triton_serve_tritonserver`.
"""

from __future__ import annotations

import time

PROCESS_START = time.time()  # before the imports: "load" time counts from here

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ENSEMBLE = "ensemble"


def log(message: str, level: str = "I", when: float | None = None) -> None:
    """One line in Triton's glog format, on stdout (the server log file)."""
    now = dt.datetime.fromtimestamp(time.time() if when is None else when)
    print(f"{level}{now:%m%d %H:%M:%S.%f} {os.getpid()} standin.py:0] {json.dumps(message)}", flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--model-repository", "--model-store", default=".")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument("--http-address", default="0.0.0.0")
    parser.add_argument("--grpc-address", default="0.0.0.0")
    parser.add_argument("--metrics-address", default="0.0.0.0")
    parser.add_argument("--id", default="triton")
    parser.add_argument("--standin-load-s", type=float, default=3.0, help="model load time from process start")
    parser.add_argument("--standin-first-token-ms", type=float, default=200.0)
    parser.add_argument("--standin-token-ms", type=float, default=50.0)
    args, unknown = parser.parse_known_args(argv)
    args.ignored = unknown
    return args


def load_config(repository: Path):  # type: ignore[no-untyped-def]
    """The ensemble's ModelConfig (tritonclient protobuf) from the repository, or a minimal decoupled one."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    config = mc.ModelConfig()
    path = repository / ENSEMBLE / "config.pbtxt"
    try:
        text_format.Parse(path.read_text(), config, allow_unknown_field=True)
    except (OSError, text_format.ParseError) as exc:
        log(f"no usable {path} ({exc}); serving a minimal ensemble", "W")
        config = mc.ModelConfig(
            name=ENSEMBLE,
            platform="ensemble",
            input=[mc.ModelInput(name="text_input", data_type=mc.TYPE_STRING, dims=[1]),
                   mc.ModelInput(name="max_tokens", data_type=mc.TYPE_INT32, dims=[1])],
            output=[mc.ModelOutput(name="text_output", data_type=mc.TYPE_STRING, dims=[-1]),
                    mc.ModelOutput(name="num_output_tokens", data_type=mc.TYPE_INT32, dims=[-1])],
        )  # fmt: skip
    decoupled = config.model_transaction_policy.decoupled
    for other in repository.glob("*/config.pbtxt"):
        try:
            decoupled = decoupled or "decoupled: true" in other.read_text()
        except OSError:
            continue
    if not path.exists():
        decoupled = True
    config.model_transaction_policy.decoupled = decoupled
    config.name = ENSEMBLE
    return config


class Model:
    """The timing and counters shared by both protocols."""

    def __init__(self, first_ms: float, token_ms: float) -> None:
        self.first, self.gap = first_ms / 1000.0, token_ms / 1000.0
        self.success = 0
        self.compute_us = 0.0

    async def tokens(self, max_tokens: int):  # type: ignore[no-untyped-def]
        """Yields token i (0-based) when it is due: arrival + first + i * gap."""
        start = time.monotonic()
        for i in range(max(1, max_tokens)):
            delay = start + self.first + self.gap * i - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield i
        self.success += 1
        self.compute_us += (time.monotonic() - start) * 1e6


def token_text(i: int) -> str:
    return f" tok{i}"


# -- HTTP -------------------------------------------------------------------------------------------------------


def http_app(args: argparse.Namespace, model: Model, config_json: dict):  # type: ignore[no-untyped-def]
    from aiohttp import web

    def known(request: web.Request) -> bool:
        return request.match_info["model"] == ENSEMBLE

    async def metadata(_: web.Request) -> web.Response:
        return web.json_response({"name": args.id, "version": "standin", "extensions": ["generate"]})

    async def ok(_: web.Request) -> web.Response:
        return web.Response(status=200)

    async def model_ready(request: web.Request) -> web.Response:
        return web.Response(status=200 if known(request) else 400)

    async def model_config(request: web.Request) -> web.Response:
        if not known(request):
            return web.json_response({"error": f"unknown model {request.match_info['model']!r}"}, status=400)
        return web.json_response(config_json)

    async def model_metadata(request: web.Request) -> web.Response:
        if not known(request):
            return web.json_response({"error": "unknown model"}, status=400)
        return web.json_response({"name": ENSEMBLE, "versions": ["1"], "platform": "ensemble"})

    async def body_of(request: web.Request) -> tuple[int, dict]:
        body = await request.json()
        return int(body.get("max_tokens") or 16), body

    def event(payload: dict) -> bytes:
        return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

    async def generate(request: web.Request) -> web.Response:
        if not known(request):
            return web.json_response({"error": "unknown model"}, status=400)
        n, _ = await body_of(request)
        text = "".join([token_text(i) async for i in model.tokens(n)])
        return web.json_response({"model_name": ENSEMBLE, "model_version": "1", "text_output": text,
                                  "num_output_tokens": [n]})  # fmt: skip

    async def generate_stream(request: web.Request) -> web.StreamResponse:
        if not known(request):
            return web.json_response({"error": "unknown model"}, status=400)
        n, _ = await body_of(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        async for i in model.tokens(n):
            await resp.write(event({"model_name": ENSEMBLE, "model_version": "1", "text_output": token_text(i),
                                    "num_output_tokens": [1]}))  # fmt: skip
        return resp

    app = web.Application()
    app.router.add_get("/v2", metadata)
    app.router.add_get("/v2/health/ready", ok)
    app.router.add_get("/v2/health/live", ok)
    app.router.add_get("/v2/models/{model}", model_metadata)
    app.router.add_get("/v2/models/{model}/ready", model_ready)
    app.router.add_get("/v2/models/{model}/config", model_config)
    app.router.add_post("/v2/models/{model}/generate", generate)
    app.router.add_post("/v2/models/{model}/generate_stream", generate_stream)
    return app


def metrics_app(model: Model):  # type: ignore[no-untyped-def]
    from aiohttp import web

    async def metrics(_: web.Request) -> web.Response:
        labels = f'{{model="{ENSEMBLE}",version="1"}}'
        lines = [
            "# HELP nv_inference_request_success Number of successful inference requests",
            "# TYPE nv_inference_request_success counter",
            f"nv_inference_request_success{labels} {model.success}",
            "# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds",
            "# TYPE nv_inference_queue_duration_us counter",
            f"nv_inference_queue_duration_us{labels} 0",
            "# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds",
            "# TYPE nv_inference_compute_infer_duration_us counter",
            f"nv_inference_compute_infer_duration_us{labels} {model.compute_us:.0f}",
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


# -- gRPC -------------------------------------------------------------------------------------------------------


def grpc_servicer(args: argparse.Namespace, model: Model, config):  # type: ignore[no-untyped-def]
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc

    def unknown(name: str) -> str | None:
        return None if name == ENSEMBLE else f"Request for unknown model: '{name}' is not found"

    def max_tokens(request) -> int:  # type: ignore[no-untyped-def]
        for index, tensor in enumerate(request.inputs):
            if tensor.name != "max_tokens":
                continue
            if index < len(request.raw_input_contents) and len(request.raw_input_contents[index]) >= 4:
                return struct.unpack_from("<i", request.raw_input_contents[index])[0]
            if tensor.contents.int_contents:
                return int(tensor.contents.int_contents[0])
        return 16

    def response(request, text: str, count: int, final: bool | None):  # type: ignore[no-untyped-def]
        out = pb.ModelInferResponse(model_name=ENSEMBLE, model_version="1", id=request.id)
        if text or count:
            data = text.encode()
            out.outputs.add(name="text_output", datatype="BYTES", shape=[1, 1])
            out.outputs.add(name="num_output_tokens", datatype="INT32", shape=[1, 1])
            out.raw_output_contents.extend([struct.pack("<I", len(data)) + data, struct.pack("<i", count)])
        if final is not None:
            out.parameters["triton_final_response"].bool_param = final
        return out

    class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
        async def ServerLive(self, request, context):  # type: ignore[no-untyped-def]
            return pb.ServerLiveResponse(live=True)

        async def ServerReady(self, request, context):  # type: ignore[no-untyped-def]
            return pb.ServerReadyResponse(ready=True)

        async def ServerMetadata(self, request, context):  # type: ignore[no-untyped-def]
            return pb.ServerMetadataResponse(name=args.id, version="standin", extensions=["standin"])

        async def ModelReady(self, request, context):  # type: ignore[no-untyped-def]
            return pb.ModelReadyResponse(ready=unknown(request.name) is None)

        async def ModelMetadata(self, request, context):  # type: ignore[no-untyped-def]
            if problem := unknown(request.name):
                await context.abort(grpc.StatusCode.NOT_FOUND, problem)
            return pb.ModelMetadataResponse(name=ENSEMBLE, versions=["1"], platform="ensemble")

        async def ModelConfig(self, request, context):  # type: ignore[no-untyped-def]
            if problem := unknown(request.name):
                await context.abort(grpc.StatusCode.NOT_FOUND, problem)
            return pb.ModelConfigResponse(config=config)

        async def ModelInfer(self, request, context):  # type: ignore[no-untyped-def]
            if problem := unknown(request.model_name):
                await context.abort(grpc.StatusCode.NOT_FOUND, problem)
            n = max_tokens(request)
            text = "".join([token_text(i) async for i in model.tokens(n)])
            return response(request, text, n, None)

        async def ModelStreamInfer(self, request_iterator, context):  # type: ignore[no-untyped-def]
            async for request in request_iterator:
                if problem := unknown(request.model_name):
                    yield pb.ModelStreamInferResponse(error_message=problem)
                    continue
                n = max_tokens(request)
                empty_final = request.parameters["triton_enable_empty_final_response"].bool_param
                async for i in model.tokens(n):
                    last = i == max(1, n) - 1
                    out = response(request, token_text(i), 1, False if empty_final else last)
                    yield pb.ModelStreamInferResponse(infer_response=out)
                if empty_final:
                    yield pb.ModelStreamInferResponse(infer_response=response(request, "", 0, True))

    return Servicer()


# -- main -------------------------------------------------------------------------------------------------------


async def serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    import grpc
    from aiohttp import web
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2_grpc

    repository = Path(args.model_repository)
    config = load_config(repository)
    config_json = json_format.MessageToDict(config, preserving_proto_field_name=True)
    model = Model(args.standin_first_token_ms, args.standin_token_ms)
    log(f"loading: {ENSEMBLE}:1 (stand-in: ready {args.standin_load_s:g} s after process start)")
    remaining = PROCESS_START + args.standin_load_s - time.time()
    if remaining > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), remaining)
    if stop.is_set():
        log("signal received before the model was loaded; exiting")
        return 0
    log(f"successfully loaded '{ENSEMBLE}'")

    grpc_server = grpc.aio.server()
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(grpc_servicer(args, model, config), grpc_server)
    if grpc_server.add_insecure_port(f"{args.grpc_address}:{args.grpc_port}") == 0:
        log(f"failed to bind gRPC {args.grpc_address}:{args.grpc_port}", "E")
        return 1
    await grpc_server.start()
    log(f"Started GRPCInferenceService at {args.grpc_address}:{args.grpc_port}")
    runners = []
    try:
        for app, address, port, what in (
            (http_app(args, model, config_json), args.http_address, args.http_port, "HTTPService"),
            (metrics_app(model), args.metrics_address, args.metrics_port, "Metrics Service"),
        ):
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            runners.append(runner)
            await web.TCPSite(runner, address, port).start()
            log(f"Started {what} at {address}:{port}")
        await stop.wait()
        log("signal received; stopping the stand-in server")
    except OSError as exc:
        log(f"failed to start: {exc}", "E")
        return 1
    finally:
        await grpc_server.stop(0)
        for runner in runners:
            await runner.cleanup()
    log(f"stand-in served {model.success} requests; exiting")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log(
        f"stand-in tritonserver pid {os.getpid()} id {args.id!r} repository {args.model_repository}", when=PROCESS_START
    )
    if args.ignored:
        log(f"ignored arguments: {' '.join(args.ignored)}")
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
