"""Record what a real GPU host answers, as test data: nvidia-smi's outputs (the host facts' query, with and without
memory held) and NVML's answers sampled while the GPUs idle and while some of them multiply matrices.

Run on a GPU host with torch and nvidia-ml-py (pynvml): `python tools/record_gpu_facts.py OUT_DIR`. Writes
OUT_DIR/query-gpu.csv, query-gpu-busy.csv (GPU 0 holding memory), nvml.jsonl (one sample per line: the time, then per
GPU its raw NVML answers) and nvml-cost.json (what one sample of every GPU costs the sampling process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pynvml
import torch

QUERY = ["nvidia-smi", "--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader,nounits"]


def answers(handle: object) -> dict[str, object]:
    """One GPU's raw NVML answers (None where NVML does not support one)."""

    def ask(call, *args):
        try:
            return call(handle, *args)
        except pynvml.NVMLError as exc:
            return f"NVMLError: {exc}"

    util = ask(pynvml.nvmlDeviceGetUtilizationRates)
    memory = ask(pynvml.nvmlDeviceGetMemoryInfo)
    return {
        "gpu_util_pct": getattr(util, "gpu", util),
        "mem_util_pct": getattr(util, "memory", util),
        "memory_used_bytes": getattr(memory, "used", memory),
        "memory_total_bytes": getattr(memory, "total", memory),
        "power_mw": ask(pynvml.nvmlDeviceGetPowerUsage),
        "energy_mj": ask(pynvml.nvmlDeviceGetTotalEnergyConsumption),
        "sm_clock_mhz": ask(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM),
        "temperature_c": ask(pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU),
        "power_limit_mw": ask(pynvml.nvmlDeviceGetEnforcedPowerLimit),
    }


def load(device: int, stop: threading.Event) -> None:
    a = torch.randn(8192, 8192, device=f"cuda:{device}", dtype=torch.float16)
    while not stop.is_set():
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize(device)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "query-gpu.csv").write_text(subprocess.run(QUERY, capture_output=True, text=True, check=True).stdout)
    held = torch.empty(20 * 2**30, dtype=torch.uint8, device="cuda:0")
    (out / "query-gpu-busy.csv").write_text(subprocess.run(QUERY, capture_output=True, text=True, check=True).stdout)
    del held
    torch.cuda.empty_cache()
    pynvml.nvmlInit()
    count = pynvml.nvmlDeviceGetCount()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    static = {
        "driver": pynvml.nvmlSystemGetDriverVersion(),
        "nvml": pynvml.nvmlSystemGetNVMLVersion(),
        "gpus": [
            {"index": i, "name": pynvml.nvmlDeviceGetName(h), "uuid": pynvml.nvmlDeviceGetUUID(h)}
            for i, h in enumerate(handles)
        ],
    }
    stop = threading.Event()
    workers = [threading.Thread(target=load, args=(d, stop)) for d in (0, 1)]
    cost: list[float] = []
    with (out / "nvml.jsonl").open("w") as sink:
        sink.write(json.dumps(static) + "\n")
        start = time.monotonic()
        while time.monotonic() - start < 8.0:
            if not workers[0].is_alive() and time.monotonic() - start > 2.0 and not stop.is_set():
                for w in workers:
                    w.start()
            cpu = time.thread_time()
            sample = {"t": round(time.monotonic() - start, 3), "gpus": [answers(h) for h in handles]}
            cost.append(time.thread_time() - cpu)
            sink.write(json.dumps(sample) + "\n")
            time.sleep(0.1)
    stop.set()
    for w in workers:
        w.join()
    cost.sort()
    (out / "nvml-cost.json").write_text(
        json.dumps(
            {
                "gpus": count,
                "samples": len(cost),
                "cpu_s_per_sample_p50": cost[len(cost) // 2],
                "cpu_s_per_sample_max": cost[-1],
            },
            indent=1,
        )
        + "\n"
    )
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
