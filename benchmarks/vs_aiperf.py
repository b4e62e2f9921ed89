"""llm-perf next to NVIDIA AIPerf on the same server, data and load (the comparison the seed asks for).

Both clients stream OpenAI chat completions from the built-in server (trtsweep.perf.zeroserver, its own
process): once with zero delay (client capacity: requests/s each client sustains) and once with known
timing (first chunk after 50 ms, then every 10 ms: both should report TTFT ~50 ms and ICL ~10 ms).
AIPerf is not a dependency of trtsweep; install it in its own environment and point --aiperf at it:
  python3 -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install aiperf
  .venv/bin/python benchmarks/vs_aiperf.py --aiperf /tmp/aiperf-venv/bin/aiperf --tokenizer <hf dir>
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _triton import prompts

from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.selftest import format_rows, zero_server

CHUNKS = 20


def aiperf(binary: str, url: str, tokenizer: str, concurrency: int, count: int, workdir: Path) -> dict:
    out = workdir / f"aiperf-{concurrency}-{url.rsplit(':', 1)[1]}"
    cmd = [binary, "profile", "-m", "zero", "--url", f"http://{url}", "--endpoint-type", "chat", "--streaming",
           "--concurrency", str(concurrency), "--request-count", str(count), "--warmup-request-count",
           str(concurrency), "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", str(CHUNKS),
           "--tokenizer", tokenizer, "--artifact-dir", str(out), "--ui-type", "none"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=1200)
    d = json.loads((out / "profile_export_aiperf.json").read_text())
    return {"req_s": d["request_throughput"]["avg"], "ttft_p50": d["time_to_first_token"]["p50"],
            "icl_p50": d["inter_chunk_latency"]["p50"] if "inter_chunk_latency" in d else None}  # fmt: skip


def llm_perf(url: str, tokenizer: str, concurrency: int, count: int, data: Path) -> dict:
    config = BenchmarkConfig(endpoint=Endpoint(url=url, model="zero", openai_endpoint="chat"), protocol="openai",
                             input_data=data, concurrency=[concurrency], num_requests=count,
                             warmup_requests=concurrency, tokenizer_path=tokenizer)  # fmt: skip
    (report,) = run(config)
    s = report.summary
    return {"req_s": s["request_throughput"], "ttft_p50": s["ttft_ms"]["p50"], "icl_p50": s["icl_ms"]["p50"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aiperf", required=True, help="the aiperf executable")
    parser.add_argument("--tokenizer", required=True, help="HF tokenizer directory (both clients count with it)")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = prompts(Path(tmp) / "p.jsonl", CHUNKS)
        for label, first, gap in (("zero-cost", 0.0, 0.0), ("50ms+10ms", 50.0, 10.0)):
            with zero_server(CHUNKS, first, gap) as url:
                for c in (int(v) for v in args.concurrency.split(",")):
                    count = args.requests if first == 0 else min(args.requests, 20 * c)
                    a = aiperf(args.aiperf, url, args.tokenizer, c, count, Path(tmp))
                    m = llm_perf(url, args.tokenizer, c, count, data)
                    rows.append({"server": label, "concurrency": c, "llm_perf_req_s": m["req_s"],
                                 "aiperf_req_s": a["req_s"], "llm_perf_ttft_p50": m["ttft_p50"],
                                 "aiperf_ttft_p50": a["ttft_p50"], "llm_perf_icl_p50": m["icl_p50"],
                                 "aiperf_icl_p50": a["icl_p50"] if a["icl_p50"] is not None else "-"})  # fmt: skip
    print(format_rows(rows))


if __name__ == "__main__":
    main()
