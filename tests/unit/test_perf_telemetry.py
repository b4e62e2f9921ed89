"""GPU telemetry per level (trtsweep.perf.telemetry) and the host facts, read from what a real 4 x H100 host answered
(tests/data/gpu/h100x4, recorded with tools/record_gpu_facts.py on a lent machine: GPUs 0 and 1 multiply matrices
from t = 2 s, GPUs 2 and 3 idle)."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import pytest

from tests.unit.test_perf_search import zero_server
from trtsweep.errors import TrtsweepError
from trtsweep.fleet import hostfacts
from trtsweep.perf import benchmark, cli, telemetry
from trtsweep.report import page, results_table, verdict
from trtsweep.report.answer import Answer
from trtsweep.report.results_table import telemetry_columns

H100 = Path(__file__).resolve().parent.parent / "data" / "gpu" / "h100x4"


def recorded() -> tuple[dict, list[tuple[float, list[dict]]]]:
    """(the host's GPUs and driver, the samples: (seconds, every GPU's NVML answers))."""
    lines = (H100 / "nvml.jsonl").read_text().splitlines()
    return json.loads(lines[0]), [(s["t"], s["gpus"]) for s in map(json.loads, lines[1:])]


def window(gpus: list[int], start: float, end: float) -> list[tuple[float, list[dict]]]:
    _, samples = recorded()
    return [(t, [answers[g] for g in gpus]) for t, answers in samples if start <= t <= end]


def test_a_level_on_two_busy_h100s_reads_their_utilization_power_and_energy():
    host, _ = recorded()
    names = [host["gpus"][g]["name"] for g in (0, 1)]
    level = telemetry.summarize([0, 1], names, window([0, 1], 3.0, 7.9))
    assert level["names"] == ["NVIDIA H100 80GB HBM3"] * 2 and level["samples"] >= 30
    assert level["util_pct"] > 90
    assert 900 < level["power_w"] < 1400  # two H100s at about 620 W each (700 W limit)
    # the energy counter and the mean power over the window agree
    assert level["energy_j"] == pytest.approx(level["power_w"] * level["window_s"], rel=0.1)
    assert 1000 < level["sm_clock_mhz"] < 2000
    assert 1000 < level["memory_used_mb_peak"] < 81559


def test_idle_gpus_read_idle():
    level = telemetry.summarize([2, 3], ["h100"] * 2, window([2, 3], 3.0, 7.9))
    assert level["util_pct"] == 0 and 100 < level["power_w"] < 200 and level["sm_clock_mhz"] < 500


def test_a_value_nvml_does_not_give_is_unknown_never_zero():
    samples = [(t, [{**a, "power_mw": None} for a in per_gpu]) for t, per_gpu in window([0, 1], 3.0, 5.0)]
    level = telemetry.summarize([0, 1], ["h100"] * 2, samples)
    assert level["power_w"] is None
    assert level["energy_j"] > 0  # the energy counter still answers
    no_energy = [(t, [{**a, "energy_mj": None} for a in per_gpu]) for t, per_gpu in samples]
    assert telemetry.summarize([0, 1], ["h100"] * 2, no_energy)["energy_j"] is None
    one = telemetry.summarize([0], ["h100"], window([0], 3.0, 7.9)[:1])
    assert one["samples"] == 1 and one["energy_j"] is None and one["window_s"] == 0.0


def test_tokens_per_joule_and_a_cpu_point_has_empty_columns():
    level = telemetry.summarize([0, 1], ["NVIDIA H100 80GB HBM3"] * 2, window([0, 1], 3.0, 7.9))
    columns = telemetry_columns({"output_token_throughput": 5000.0, "gpu_telemetry": level})
    assert columns["out_tok_per_joule"] == pytest.approx(5000.0 / level["power_w"])
    assert columns["gpu_name"] == "NVIDIA H100 80GB HBM3" and columns["gpu_power_w"] == level["power_w"]
    cpu = telemetry_columns({"output_token_throughput": 50.0})
    assert set(cpu.values()) == {None}


def test_the_sampler_samples_from_its_thread_between_start_and_stop():
    _, samples = recorded()
    replay = iter(per_gpu[:1] for _, per_gpu in samples)
    asked = []
    sampler = telemetry.Sampler([0], ["h100"], lambda energy: asked.append(energy) or next(replay), interval_s=0.01)
    sampler.start()
    time.sleep(0.2)
    level = sampler.stop()
    assert level["samples"] >= 5 and level["window_s"] > 0.1
    assert asked[0] and asked[-1] and not any(asked[1:-1])  # the costly energy counter: first and last sample only


def test_another_process_on_the_gpus_during_a_level_is_named_and_keeps_the_level_from_the_verdict():
    _, samples = recorded()
    replay = itertools.cycle(per_gpu[:1] for _, per_gpu in samples)
    seen = iter([{}, {}, {0: [4242]}])  # a job that takes the GPU mid-level (and ends before the level does)
    sampler = telemetry.Sampler([0], ["h100"], lambda energy: next(replay), interval_s=0.01,
                                foreign=lambda: next(seen, {}))  # fmt: skip
    sampler.start()
    time.sleep(0.1)
    level = sampler.stop()
    assert level["foreign_processes"].startswith("the point's GPUs are also in use: GPU 0 by pid 4242 (")
    quiet = telemetry.Sampler([0], ["h100"], lambda energy: next(replay), interval_s=0.01, foreign=dict)
    quiet.start()
    assert quiet.stop()["foreign_processes"] is None  # looked for, none: said as none
    row = {"point": "p", "concurrency": 1, "point_status": "ok", "gpu_shared": level["foreign_processes"]}
    assert verdict.excluded(row) == f"measured on shared GPUs: {level['foreign_processes']}"
    assert "--gpu-owner-pids" not in cli_argv({"gpu_telemetry": [0]})
    owned = cli_argv({"gpu_telemetry": [0], "gpu_owner_pids": [11, 12]})
    assert owned[owned.index("--gpu-owner-pids") + 1] == "11,12"
    assert cli.parser().parse_args(["--gpu-owner-pids", "11,12", "--url", "x", "-m", "m"]).gpu_owner_pids == [11, 12]


def cli_argv(params: dict) -> list[str]:
    from trtsweep.perf.argv import command

    return command(
        {
            "url": "localhost:8000",
            "concurrency": [1],
            "streaming": True,
            "chat_template": False,
            "extra_inputs": {},
            **params,
        }
    )


def test_without_nvml_there_is_no_sampler_and_it_says_why():
    sampler, why = telemetry.nvml_sampler([0])
    assert sampler is None and why is not None and why.startswith(("no NVML", "no GPU 0"))


@pytest.mark.parametrize("text", ["", "0,x", "1,1", "-1"])
def test_a_bad_gpu_list_is_one_line(text):
    with pytest.raises(TrtsweepError, match="--gpu-telemetry: expected"):
        telemetry.parse_gpus(text)


def test_the_host_facts_read_a_real_h100_hosts_nvidia_smi():
    gpus = hostfacts.parse_nvidia_smi((H100 / "query-gpu.csv").read_text())
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"} and {g["memory_mb"] for g in gpus} == {81559}
    held = hostfacts.parse_nvidia_smi((H100 / "query-gpu-busy.csv").read_text())  # 20 GiB held on GPU 0
    assert hostfacts.busy(held, 1024) == [0] and hostfacts.busy(gpus, 1024) == []


def test_the_page_shows_what_the_gpus_did_beside_throughput_and_nothing_for_a_cpu_sweep():
    data = H100.parent.parent / "report_results" / "smollm2-cpu-demo"
    slo = json.loads((data / "slo.json").read_text())
    cpu_rows = results_table.collect(data, slo)
    level = telemetry.summarize([0, 1], ["NVIDIA H100 80GB HBM3"] * 2, window([0, 1], 3.0, 7.9))
    gpu_rows = [{**r, **telemetry_columns({"output_token_throughput": r["output_token_throughput"],
                                           "gpu_telemetry": level})} for r in cpu_rows]  # fmt: skip

    def html(rows: list[dict]) -> str:
        judged = verdict.judge(rows, slo)
        found = Answer(
            slo=slo, all_rows=rows, rows=rows, screening=[], stale={}, judged=judged, sizing=[], planned=True
        )
        return page.render("s", found, [])

    shown = html(gpu_rows)
    headings = re.findall(r"<th[^>]*>([^<]*)</th>", shown)
    at = headings.index("out tok/s/GPU")
    assert headings[at + 1 : at + 5] == ["GPU util %", "GPU W", "GPU MiB peak", "out tok/J"]
    assert f'data-value="{results_table.cell(gpu_rows[0]["out_tok_per_joule"])}"' in shown
    assert "GPU W" not in html(cpu_rows)


def run_llm_perf(tmp_path: Path, url: str) -> dict:
    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"input": "hi", "output": "hello"}) + "\n")
    rc = cli.main(["-u", url, "-i", "openai", "--endpoint", "completions", "-m", "zero", "--input-data", str(data),
                   "--max-tokens", "6", "--profile-export-file", str(tmp_path / "perf.json"), "--num-requests", "8",
                   "--concurrency", "1,2", "--gpu-telemetry", "0,1", "--gpu-telemetry-interval", "0.02"])  # fmt: skip
    assert rc == 0
    return json.loads((tmp_path / "perf.summary.json").read_text())


def test_llm_perf_samples_the_gpus_it_is_given_during_each_level(tmp_path, monkeypatch):
    """NVML replayed from the real host's recording (this machine has no GPU): each level gets its own samples."""
    _, samples = recorded()
    replay = iter([per_gpu[:2] for _, per_gpu in samples] * 100)
    made = []

    def sampler(gpus: list[int], interval_s: float, owners: list[int]) -> tuple[telemetry.Sampler, None]:
        made.append((gpus, interval_s, owners))
        return telemetry.Sampler(gpus, ["NVIDIA H100 80GB HBM3"] * 2, lambda _: next(replay), interval_s), None

    monkeypatch.setattr(benchmark, "nvml_sampler", sampler)
    with zero_server(slots=4, first_ms=50, gap_ms=10) as url:
        summary = run_llm_perf(tmp_path, url)
    assert made == [([0, 1], 0.02, [])]
    levels = [level["summary"]["gpu_telemetry"] for level in summary["levels"]]
    assert len(levels) == 2 and all(lv["gpus"] == [0, 1] and lv["samples"] >= 3 for lv in levels)
    assert all(lv["power_w"] > 0 and lv["energy_j"] is not None for lv in levels)


def test_without_nvml_llm_perf_says_so_once_and_measures_on(tmp_path, capsys):
    with zero_server(slots=4, first_ms=50, gap_ms=10) as url:
        summary = run_llm_perf(tmp_path, url)
    assert capsys.readouterr().err.count("llm-perf: no GPU telemetry: no NVML") == 1
    assert all("gpu_telemetry" not in level["summary"] for level in summary["levels"])
    assert all(level["summary"]["succeeded"] == 8 for level in summary["levels"])
