"""How exact are llm-perf's timestamps? Measured against a Triton python model whose timing is known.

The `paced` model sends its first chunk FIRST ms after a request arrives, then one every GAP ms. The
table gives measured minus true for TTFT, inter-chunk latency (ICL), TPOT and E2E at p50 and p99, per
protocol and concurrency (the server is not saturated at these levels).
Run: .venv/bin/python benchmarks/timing_error.py [--first-ms 100] [--gap-ms 20] [--tokens 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _triton import paced_triton, prompts

from trtsweep.perf.benchmark import BenchmarkConfig, run
from trtsweep.perf.protocols import Endpoint
from trtsweep.perf.selftest import format_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first-ms", type=float, default=100.0)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    true = {"ttft_ms": args.first_ms, "icl_ms": args.gap_ms, "tpot_ms": args.gap_ms,
            "e2e_ms": args.first_ms + args.gap_ms * (args.tokens - 1)}  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp, paced_triton(args.first_ms, args.gap_ms) as spec:
        data = prompts(Path(tmp) / "p.jsonl", args.tokens)
        for protocol, port in (("grpc", spec.grpc_port), ("http", spec.http_port)):
            for c in (1, 8):
                config = BenchmarkConfig(endpoint=Endpoint(url=f"127.0.0.1:{port}", model="paced"), protocol=protocol,
                                         input_data=data, concurrency=[c], num_requests=args.requests,
                                         warmup_requests=c)  # fmt: skip
                (report,) = run(config)
                s = report.summary
                out = {"protocol": protocol, "concurrency": c}
                for metric, value in true.items():
                    out[f"{metric[:-3]}_err_p50"] = s[metric]["p50"] - value
                    out[f"{metric[:-3]}_err_p99"] = s[metric]["p99"] - value
                rows.append(out)
    print(f"measured - true (ms); true TTFT {args.first_ms:g} ms, gap {args.gap_ms:g} ms, {args.tokens} chunks")
    print(format_rows(rows))


if __name__ == "__main__":
    main()
