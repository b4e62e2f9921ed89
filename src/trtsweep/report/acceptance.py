"""A speculative point's acceptance as the server and the client each measure it, checked against each other.

The server's number is trtllm-serve's iteration stats (specDecodingStats: trtsweep.perf.server_metrics.spec_decoding),
which the PyTorch executor fills for every decoding type only since TensorRT-LLM PR 9855 ("Fix iteration stats for
spec-dec", merged 2025-12): in 1.0 and 1.1 it fills them for NGram alone (the two-model drafter's resource manager),
so an EAGLE-3, MTP or draft-target point of those releases gets none, and NGram's drafts padded to max_draft_len
count as rejected. 1.2 is not in this table: whether a 1.2 build carries the fix is the numbers' to tell, and the
check below compares them.

The client's numbers are llm-perf's (trtsweep.perf.metrics): a server that streams a chunk per decoding step delivers
each step's accepted tokens and one of its own in a chunk, so output tokens less chunks is the drafted tokens accepted
(`accepted_tokens`), the count the server's stats keep too (`server_accepted_tokens`, whatever share of the steps
drafted: an n-gram step that found no match delivers one token and counts nothing on either side); tokens per chunk
(`tokens_per_chunk`) is what a step gained, over every step. `check` says, in one short line per level:
- `server reports none for Eagle at 1.1 (NGram only before PR 9855): client 2.31 tokens a step` where the release does
  not report;
- `client 412 vs server 250 accepted tokens (differ by more than 25%)` where both count and they disagree (a server
  that merges steps into a chunk, a stats field that counts otherwise);
- `agree` where both count and they agree; `client only` / `server only` where just one has a number.
Empty for a point without speculative decoding.
"""

from __future__ import annotations

from typing import Any

# release -> the decoding types whose iteration stats its PyTorch executor fills (releases before PR 9855)
REPORTED = {"1.0": ("NGram",), "1.1": ("NGram",)}
TOLERANCE = 0.25  # relative difference beyond which the two measures are said to disagree


def check(point: dict[str, Any], row: dict[str, Any]) -> str | None:
    """What the client's and the server's accepted tokens (and tokens a step) say together for this level."""
    spec = (point.get("llm_api") or {}).get("speculative_config") or {}
    kind = spec.get("decoding_type")
    if not kind:
        return None
    client, server = row.get("accepted_tokens"), row.get("server_accepted_tokens")
    per_step = row.get("tokens_per_chunk")
    release = str(point.get("llm_api_release") or "")
    reported = REPORTED.get(release)
    seen = f"client {per_step:.2f} tokens a step" if isinstance(per_step, int | float) else (
        "no client measure (not streamed)")  # fmt: skip
    if reported is not None and kind not in reported and server is None:
        return f"server reports none for {kind} at {release} ({', '.join(reported)} only before PR 9855): {seen}"
    if client is None or server is None:
        return "client only" if client is not None else ("server only" if server is not None else None)
    if abs(client - server) > TOLERANCE * max(server, 1):
        return f"client {client} vs server {server} accepted tokens (differ by more than {TOLERANCE:.0%})"
    return "agree"
