"""GPU telemetry per load level: what the point's GPUs did while llm-perf measured it, sampled on the host through
NVML (`nvidia-ml-py`'s `pynvml`, what nvidia-smi reads).

`llm-perf --gpu-telemetry 0,1` samples those GPUs (nvidia-smi / NVML indices) every `--gpu-telemetry-interval`
seconds from a thread of the client, from just before a level's first request to just after its last response.
The level's summary gains `gpu_telemetry`:

- `gpus`, `names`: the GPUs sampled and their names; `samples`, `window_s`: how many samples over how long;
- `util_pct`: GPU utilization (the share of time a kernel ran), mean over the samples and the GPUs;
- `memory_used_mb_peak`: the most memory any of the GPUs held at a sample (MiB);
- `power_w`: the GPUs' power draw together, mean over the samples (W);
- `energy_j`: the energy the GPUs used over the window (J): NVML's total-energy counter (mJ since the driver
  loaded, read at the first and the last sample only) at the last less at the first, where every GPU has one, else
  the mean power times the window;
- `sm_clock_mhz`: the SM clock, mean over the samples and the GPUs;
- `foreign_processes` (with `--gpu-owner-pids`, the servers' process roots): one line naming every compute process
  seen on the GPUs during the level that is not in those servers' process trees (another user's job, another
  controller's server started mid-run; trtsweep.serve.gpus_seen.foreign_line), None when there was none: a level
  measured on shared GPUs is flagged in results.csv (`gpu_shared`) and on the report, never silently ok.

A value NVML does not give is None, never 0; without NVML (no driver: a CPU host) or without GPUs to sample there
is no `gpu_telemetry` at all, and the report's columns stay empty. results.csv's `out_tok_per_joule` is the level's
output tokens/s over `power_w`.

What sampling costs is in benchmarks/telemetry.py: the sampler's CPU per sample, and the client's TTFT with and
without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trtsweep.common.gpus import Gpu, parse
from trtsweep.common.gpus import handle as nvml_handle
from trtsweep.serve import gpus_seen

# One sample: per GPU, NVML's raw answers (None where NVML has none): gpu_util_pct, memory_used_bytes, power_mw,
# energy_mj, sm_clock_mhz. A reader is asked for the energy counter at a level's first and last sample only: NVML
# answers it in about 5 ms of CPU per GPU (measured on an H100, driver 580), the others in under 0.05 ms.
Answers = dict[str, float | None]
Reader = Callable[[bool], list[Answers]]
MIB = 2**20
DEFAULT_INTERVAL_S = 0.5


def parse_gpus(text: str) -> list[Gpu]:
    """`--gpu-telemetry`'s value: comma-separated GPU indices or UUIDs ("0,1"; common/gpus.py)."""
    return parse(text, "--gpu-telemetry")


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def summarize(gpus: Sequence[Gpu], names: Sequence[str], samples: Sequence[tuple[float, list[Answers]]],
              others: dict[Gpu, set[int]] | None = None) -> dict:  # fmt: skip
    """The level's `gpu_telemetry` from its samples ((monotonic seconds, per GPU answers), in time order) and the
    foreign processes seen on each GPU (`others`: None when not looked for)."""
    every = [answers for _, per_gpu in samples for answers in per_gpu]
    window = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
    totals = [_total(per_gpu, "power_mw") for _, per_gpu in samples]
    power_mw = _mean(totals)
    memory = [a["memory_used_bytes"] for a in every if a.get("memory_used_bytes") is not None]
    seen = None if others is None else {gpu: sorted(pids) for gpu, pids in sorted(others.items()) if pids}
    return {
        "gpus": list(gpus),
        "names": list(names),
        "samples": len(samples),
        "window_s": round(window, 3),
        "util_pct": _mean([a.get("gpu_util_pct") for a in every]),
        "memory_used_mb_peak": max(memory) / MIB if memory else None,
        "power_w": power_mw / 1000 if power_mw is not None else None,
        "energy_j": _energy_j(samples, window, power_mw),
        "sm_clock_mhz": _mean([a.get("sm_clock_mhz") for a in every]),
        **({} if seen is None else {"foreign_processes": gpus_seen.foreign_line(seen)}),
    }


def _total(per_gpu: list[Answers], key: str) -> float | None:
    """The sum over the GPUs of one answer, None when any GPU lacks it (a partial sum would read low)."""
    values = [a.get(key) for a in per_gpu]
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def _energy_j(samples: Sequence[tuple[float, list[Answers]]], window: float, power_mw: float | None) -> float | None:
    if len(samples) < 2:
        return None
    first, last = _total(samples[0][1], "energy_mj"), _total(samples[-1][1], "energy_mj")
    if first is not None and last is not None and last >= first:
        return (last - first) / 1000
    return power_mw / 1000 * window if power_mw is not None else None


@dataclass
class Sampler:
    """Samples `read` every `interval_s` from a thread between `start()` and `stop()`."""

    gpus: list[Gpu]
    names: list[str]
    read: Reader
    interval_s: float = DEFAULT_INTERVAL_S
    # GPU index -> the compute processes on it that are not the servers' (None: not looked for)
    foreign: Callable[[], dict[Gpu, list[int]]] | None = None
    samples: list[tuple[float, list[Answers]]] = field(default_factory=list)
    others: dict[Gpu, set[int]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.samples, self.others, self._stop = [], {}, threading.Event()
        self._sample(energy=True)
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
        self._thread.start()

    def _sample(self, energy: bool = False) -> None:
        self.samples.append((time.monotonic(), self.read(energy)))
        for gpu, pids in (self.foreign() if self.foreign is not None else {}).items():
            self.others.setdefault(gpu, set()).update(pids)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> dict[str, Any]:
        """End the level's sampling (one last sample at its end) and summarize it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample(energy=True)
        return summarize(self.gpus, self.names, self.samples, self.others if self.foreign is not None else None)


def nvml_sampler(gpus: list[Gpu], interval_s: float = DEFAULT_INTERVAL_S,
                 owners: Sequence[int] = ()) -> tuple[Sampler | None, str | None]:  # fmt: skip
    """(a sampler of these GPUs through NVML, None) or (None, why there is none: no pynvml, no driver, no such GPU);
    `owners`: the servers' process roots, whose trees' processes on the GPUs are theirs (the others are foreign)."""
    try:
        import pynvml
    except ImportError:
        return None, "no NVML: the nvidia-ml-py package is not installed"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        missing = [g for g in gpus if isinstance(g, int) and g >= count]
        if missing:
            return None, f"no GPU {missing[0]} on this host (NVML sees {count})"
        handles = [nvml_handle(pynvml, g) for g in gpus]
        names = [str(pynvml.nvmlDeviceGetName(h)) for h in handles]
    except pynvml.NVMLError as exc:
        return None, f"no NVML: {exc}"

    def ask(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except pynvml.NVMLError:
            return None

    def read(energy: bool) -> list[Answers]:
        out = []
        for handle in handles:
            util = ask(pynvml.nvmlDeviceGetUtilizationRates, handle)
            memory = ask(pynvml.nvmlDeviceGetMemoryInfo, handle)
            out.append({
                "gpu_util_pct": util.gpu if util is not None else None,
                "memory_used_bytes": memory.used if memory is not None else None,
                "power_mw": ask(pynvml.nvmlDeviceGetPowerUsage, handle),
                "energy_mj": ask(pynvml.nvmlDeviceGetTotalEnergyConsumption, handle) if energy else None,
                "sm_clock_mhz": ask(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
            })  # fmt: skip
        return out

    def foreign() -> dict[Gpu, list[int]]:
        ours = set().union(*(gpus_seen.tree(root) for root in owners))
        try:
            return gpus_seen.foreign(pynvml, gpus, handles, ours)
        except pynvml.NVMLError:
            return {}

    return Sampler(gpus, names, read, interval_s, foreign if owners else None), None
