"""A speculative point's acceptance as the server and the client each measure it, checked against each other.

The server's number is trtllm-serve's iteration stats (specDecodingStats: trtsweep.perf.server_metrics.spec_decoding),
which the PyTorch executor fills for every decoding type only since TensorRT-LLM PR 9855 ("Fix iteration stats for
spec-dec", merged 2025-12): in 1.0 and 1.1 it fills them for NGram alone (the two-model drafter's resource manager),
so an EAGLE-3, MTP or draft-target point of those releases gets none, and NGram's drafts padded to max_draft_len
count as rejected. 1.2 is not in this table: whether a 1.2 build carries the fix is the numbers' to tell, and the
check below compares them.

The client's number is llm-perf's `tokens_per_chunk` (trtsweep.perf.metrics): a server that streams a chunk per
decoding step delivers the acceptance length per chunk after the first. `check` says, in one short line per level:
- `server reports none for Eagle at 1.1 (NGram only before PR 9855): client 2.31` where the release does not report;
- `client 2.31 vs server 1.62 (differ by more than 25%)` where both do and they disagree;
- `agree` where both do and they agree; `client only` / `server only` where just one has a number.
Empty for a point without speculative decoding.
"""

from __future__ import annotations

from typing import Any

# release -> the decoding types whose iteration stats its PyTorch executor fills (releases before PR 9855)
REPORTED = {"1.0": ("NGram",), "1.1": ("NGram",)}
TOLERANCE = 0.25  # relative difference beyond which the two measures are said to disagree


def check(point: dict[str, Any], row: dict[str, Any]) -> str | None:
    """What the server's acceptance length and the client's tokens per chunk say together for this level."""
    spec = (point.get("llm_api") or {}).get("speculative_config") or {}
    kind = spec.get("decoding_type")
    if not kind:
        return None
    client, server = row.get("tokens_per_chunk"), row.get("acceptance_length")
    release = str(point.get("llm_api_release") or "")
    reported = REPORTED.get(release)
    seen = f"client {client:.2f}" if isinstance(client, int | float) else "no client measure (not streamed)"
    if reported is not None and kind not in reported and server is None:
        return f"server reports none for {kind} at {release} ({', '.join(reported)} only before PR 9855): {seen}"
    if client is None or server is None:
        return "client only" if server is None and client is not None else ("server only" if server is not None
                                                                             else None)  # fmt: skip
    if abs(client - server) > TOLERANCE * server:
        return f"client {client:.2f} vs server {server:.2f} (differ by more than {TOLERANCE:.0%})"
    return "agree"
