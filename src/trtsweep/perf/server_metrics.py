"""Server-side numbers: a Prometheus `/metrics` endpoint (Triton's, TRT-LLM's batcher and KV-cache gauges,
vLLM's, ...) scraped before and after each level.

Counters (``# TYPE ... counter``) are reported as the level's delta, gauges as their value after the level.
For Triton, per model: ``queue_ms_per_request`` and ``compute_ms_per_request`` derived from the deltas of
``nv_inference_queue_duration_us`` / ``nv_inference_compute_infer_duration_us`` and
``nv_inference_request_success``.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")
MODEL_LABEL = re.compile(r'model="([^"]*)"')
SETTLE_S = 0.5  # wait after a level's last response before the second scrape


def parse(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Prometheus text format -> ({"name{labels}": value}, {name: type})."""
    samples: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
            continue
        match = SAMPLE.match(line)
        if match:
            try:
                samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
            except ValueError:
                continue
    return samples, types


async def scrape(session: aiohttp.ClientSession, url: str) -> tuple[dict[str, float], dict[str, str]] | None:
    """One scrape, or None when the endpoint does not answer (metrics are optional, never fatal)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
            if resp.status != 200:
                return None
            return parse(await resp.text())
    except (aiohttp.ClientError, TimeoutError):
        return None


def _name(key: str) -> str:
    return key.split("{", 1)[0]


def delta(before: tuple[dict[str, float], dict[str, str]], after: tuple[dict[str, float], dict[str, str]]
          ) -> dict[str, Any]:  # fmt: skip
    """Counters' changes (non-zero only) and gauges' values after the level, plus Triton per-model timings."""
    samples0, _ = before
    samples1, types = after
    counters = {k: v - samples0.get(k, 0.0) for k, v in samples1.items() if types.get(_name(k)) == "counter"}
    counters = {k: v for k, v in counters.items() if v}
    gauges = {k: v for k, v in samples1.items() if types.get(_name(k)) == "gauge"}
    per_model: dict[str, dict[str, float]] = {}
    for key, value in counters.items():
        if _name(key) != "nv_inference_request_success" or not value:
            continue
        model = MODEL_LABEL.search(key)
        labels = key[len("nv_inference_request_success") :]
        queue = counters.get(f"nv_inference_queue_duration_us{labels}", 0.0)
        compute = counters.get(f"nv_inference_compute_infer_duration_us{labels}", 0.0)
        per_model[model.group(1) if model else labels] = {
            "requests": value, "queue_ms_per_request": queue / value / 1000.0,
            "compute_ms_per_request": compute / value / 1000.0,
        }  # fmt: skip
    return {"counters": counters, "gauges": gauges, "per_model": per_model}
