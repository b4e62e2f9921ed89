"""A disaggregated point's worker options files, worker commands, proxy config and proxy command, per release: each
accepted by that release's tables (LLM API fields, `trtllm-serve serve` and `disaggregated` options) and by the proxy
config's parser rules; 1.0/1.1 pass the build_config keys as flags, 1.2 keeps them in the options file."""

from __future__ import annotations

import pytest

from trtsweep.errors import TrtsweepError
from trtsweep.toolchain.llmapi import args, disagg, options

RELEASES = ("1.0", "1.1", "1.2")
C1G2 = {
    "name": "c1x1-g2x1",
    "context": {"tp": 1, "pp": 1, "instances": 1},
    "generation": {"tp": 1, "pp": 1, "instances": 2},
    "transceiver": {"backend": "UCX", "max_tokens_in_buffer": 4096},
}


def _point_options(release: str) -> dict:
    return options.build(
        release,
        options.PointOptions(
            max_batch_size=8,
            max_input_len=1024,
            max_output_len=128,
            max_num_tokens=2048,
            kv_cache_free_gpu_memory_fraction=0.8,
        ),
    )


def _check_flags(release: str, flags: list[str]) -> None:
    """Every flag is one of the release's `trtllm-serve serve` options, with its value."""
    table = args.table(release)["serve"]["options"]
    names = flags[0::2]
    assert all(name in table for name in names), names
    assert all(table[name]["type"] != "flag" for name in names)


def test_a_shape_from_the_point_dict_has_its_label_and_gpus():
    shape = disagg.Shape.from_point({"context": {"tp": 2, "pp": 2}, "generation": {"tp": 1, "instances": 3}})
    assert shape.label() == "c1x2p2-g3x1" and shape.name == "c1x2p2-g3x1"
    assert shape.gpus() == 4 + 3 and shape.instances() == 4
    assert shape.transceiver == {"backend": "DEFAULT"}
    assert disagg.Shape.from_point(C1G2).name == "c1x1-g2x1"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"context": {"tp": 0}, "generation": {"tp": 1}}, "disaggregated context.tp: expected an integer >= 1, got 0"),
        ({"context": {"tp": 1, "dp": 2}, "generation": {"tp": 1}}, "disaggregated context.dp: unknown key"),
        ({"context": {"tp": 1}}, "disaggregated generation: expected a mapping"),
    ],
)
def test_a_bad_shape_is_refused_in_one_line(value, message):
    with pytest.raises(TrtsweepError, match=message.replace(".", r"\.")):
        disagg.Shape.from_point(value)


@pytest.mark.parametrize("release", RELEASES)
def test_every_worker_options_file_and_command_are_the_releases(release):
    shape = disagg.Shape.from_point(C1G2)
    base = _point_options(release)
    workers = disagg.workers(shape, release, base, [4, 5, 6], "127.0.0.1", [9001, 9002, 9003])
    assert [(w.name, w.gpus, w.port) for w in workers] == [
        ("context0", (4,), 9001),
        ("generation0", (5,), 9002),
        ("generation1", (6,), 9003),
    ]
    for worker in workers:
        args.check_options(release, worker.options)
        assert worker.options["cache_transceiver_config"] == {"backend": "UCX", "max_tokens_in_buffer": 4096}
        _check_flags(release, worker.flags)
        argv = worker.argv(release, "/models/m", f"/run/{worker.name}.yml")
        assert argv[:2] == ["trtllm-serve", "/models/m"]
        assert argv[-2:] == ["--extra_llm_api_options", f"/run/{worker.name}.yml"]
        assert argv[2:8] == ["--backend", "pytorch", "--host", "127.0.0.1", "--port", str(worker.port)]
    assert workers[0].options["disable_overlap_scheduler"] is True
    assert "disable_overlap_scheduler" not in workers[1].options
    assert base == _point_options(release)  # the point's options are left as they were


@pytest.mark.parametrize("release", ("1.0", "1.1"))
def test_before_1_2_the_build_config_keys_are_flags(release):
    worker = disagg.workers(disagg.Shape.from_point(C1G2), release, _point_options(release), [], "h", [1, 2, 3])[0]
    assert {"max_batch_size", "max_num_tokens", "max_seq_len"}.isdisjoint(worker.options)
    flags = dict(zip(worker.flags[0::2], worker.flags[1::2], strict=True))
    assert (flags["--max_batch_size"], flags["--max_num_tokens"], flags["--max_seq_len"]) == ("8", "2048", "1152")
    assert worker.options["max_input_len"] == 1024


def test_in_1_2_the_build_config_keys_stay_in_the_options_file():
    worker = disagg.workers(disagg.Shape.from_point(C1G2), "1.2", _point_options("1.2"), [], "h", [1, 2, 3])[1]
    assert (worker.options["max_batch_size"], worker.options["max_num_tokens"], worker.options["max_seq_len"]) == (
        8,
        2048,
        1152,
    )
    assert "--max_batch_size" not in worker.flags


def test_each_role_gets_its_own_parallelism_and_gpus_in_order():
    shape = disagg.Shape.from_point({"context": {"tp": 2, "instances": 2}, "generation": {"tp": 4, "pp": 1}})
    workers = disagg.workers(shape, "1.2", _point_options("1.2"), list(range(8)), "h", [1, 2, 3])
    assert [w.gpus for w in workers] == [(0, 1), (2, 3), (4, 5, 6, 7)]
    assert [w.options["tensor_parallel_size"] for w in workers] == [2, 2, 4]
    assert workers[0].flags[6:10] == ["--tp_size", "2", "--pp_size", "1"]
    with pytest.raises(TrtsweepError, match="needs 8 GPUs, the point has 4"):
        disagg.workers(shape, "1.2", _point_options("1.2"), [0, 1, 2, 3], "h", [1, 2, 3])
    with pytest.raises(TrtsweepError, match="3 workers, got 2 ports"):
        disagg.workers(shape, "1.2", _point_options("1.2"), [], "h", [1, 2])


def test_a_transceiver_backend_the_release_lacks_is_refused():
    shape = disagg.Shape.from_point({**C1G2, "transceiver": {"backend": "MOONCAKE"}})
    with pytest.raises(
        TrtsweepError, match=r"cache_transceiver_config\.backend: expected one of DEFAULT, UCX, NIXL, MPI"
    ):
        disagg.workers(shape, "1.1", _point_options("1.1"), [], "h", [1, 2, 3])
    assert disagg.workers(shape, "1.2", _point_options("1.2"), [], "h", [1, 2, 3])


@pytest.mark.parametrize("release", RELEASES)
def test_the_proxy_config_and_command_are_what_the_release_reads(release):
    shape = disagg.Shape.from_point(C1G2)
    workers = disagg.workers(shape, release, _point_options(release), [], "0.0.0.0", [9001, 9002, 9003])
    config = disagg.proxy_config(shape, workers, "0.0.0.0", 9000)
    assert config == {
        "hostname": "0.0.0.0",
        "port": 9000,
        "backend": "pytorch",
        "context_servers": {"num_instances": 1, "urls": ["127.0.0.1:9001"]},
        "generation_servers": {"num_instances": 2, "urls": ["127.0.0.1:9002", "127.0.0.1:9003"]},
    }
    table = args.table(release)["disaggregated"]["config"]
    assert set(config) <= set(table["keys"])
    assert all(set(config[s]) <= set(table["servers"]) for s in ("context_servers", "generation_servers"))
    parsed = disagg.parse_proxy_config(config)
    assert (parsed.port, parsed.context_urls, parsed.generation_urls) == (
        9000,
        ["127.0.0.1:9001"],
        ["127.0.0.1:9002", "127.0.0.1:9003"],
    )
    argv = disagg.proxy_argv(release, "/run/proxy.yml")
    assert argv == ["trtllm-serve", "disaggregated", "-c", "/run/proxy.yml"]
    assert "-c" in args.table(release)["disaggregated"]["options"]


def test_the_metrics_log_interval_option_came_with_1_1():
    assert "--metrics-log-interval" not in args.table("1.0")["disaggregated"]["options"]
    assert "--metrics-log-interval" in args.table("1.1")["disaggregated"]["options"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"context_servers": {"num_instances": 2, "urls": ["h:1"]}, "generation_servers": {"urls": ["h:2"]}},
            r"Number of hostnames \(1\) should be equal to the number of instances \(2\)",
        ),
        ({"context_servers": {"urls": ["h:1"]}, "generation_servers": {"urls": ["[::1]:2"]}}, "expected host:port"),
        ({"context_servers": {"urls": ["h:1"]}}, "generation_servers.urls: expected a list"),
        (
            {
                "max_batch_size": 8,
                "context_servers": {"urls": ["h:1"], "max_batch_size": 4},
                "generation_servers": {"urls": ["h:2"]},
            },
            "Parameter max_batch_size is specified both in the top-level and in the context_servers section",
        ),
    ],
)
def test_a_proxy_config_the_parser_refuses(config, message):
    with pytest.raises(ValueError, match=message):
        disagg.parse_proxy_config(config)


def test_ipv6_workers_cannot_be_named_in_the_proxy_config():
    shape = disagg.Shape.from_point(C1G2)
    workers = disagg.workers(shape, "1.2", _point_options("1.2"), [], "::1", [1, 2, 3])
    with pytest.raises(TrtsweepError, match="no IPv6 address"):
        disagg.proxy_config(shape, workers, "::1", 9000)
