"""A disaggregated point's handoff: every worker's options and command, the proxy's config and command
(trtsweep.toolchain.llmapi.disagg's, per release), launch scripts that run them, ordered systemd units, Kubernetes
objects valid against the schemas (a Deployment per role with a container per instance, the proxy's Deployment and
Service); every worker's GPUs its own, every port distinct, the proxy's urls the workers'; no token anywhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.test_handoff import OPTIONS, _pytorch_results
from trtsweep.handoff.bundle import write_bundle
from trtsweep.toolchain.llmapi import disagg

SHAPE = {"name": "c1x1-g2x2", "context": {"tp": 1, "pp": 1, "instances": 1},
         "generation": {"tp": 2, "pp": 1, "instances": 2}, "transceiver": {"backend": "UCX"}}  # fmt: skip


def disagg_results(tmp_path: Path, release: str, backend: str = "tensorrtllm") -> tuple[Path, str]:
    results, point_id = _pytorch_results(tmp_path, "trtllm-serve", backend)
    point_file = results / point_id / "point.json"
    point = json.loads(point_file.read_text())
    point.update(disaggregated=SHAPE, llm_api_release=release, tp=2, pp=1, world_size=2,
                 resources={"gpus": 5})  # fmt: skip
    point_file.write_text(json.dumps(point))
    return results, point_id


def recording(tmp_path: Path, name: str) -> Path:
    """A stand-in for a binary this machine lacks: it writes its arguments, one per line, then its GPUs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / f"{name}.args"
    (bin_dir / name).write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" "gpus=${{CUDA_VISIBLE_DEVICES:-}}" > {log}\n')
    (bin_dir / name).chmod(0o755)
    return log


def run(script: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["sh", str(script)], capture_output=True, text=True, env={"PATH": path, **env})


@pytest.mark.parametrize("release", ["1.0", "1.2"])
def test_every_worker_and_the_proxy_are_handed_off_as_the_release_runs_them(tmp_path, monkeypatch, release):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_0123456789")
    results, point_id = disagg_results(tmp_path, release)
    out = tmp_path / "bundle"
    manifest = write_bundle(results, point_id, out, base_dir=tmp_path)
    section = manifest["disaggregated"]
    assert (section["label"], section["gpus"], manifest["gpus"]) == ("c1x1-g2x2", 5, 5)
    servers = {s["name"]: s for s in section["servers"]}
    assert list(servers) == ["context0", "generation0", "generation1", "proxy"]
    workers = [s for name, s in servers.items() if name != "proxy"]
    gpus = [g for w in workers for g in w["gpus"]]
    assert sorted(gpus) == list(range(5)) and len(set(gpus)) == len(gpus)  # disjoint, the point's 5
    assert [w["gpus"] for w in workers] == [[0], [1, 2], [3, 4]]  # the context worker first
    ports = [s["port"] for s in section["servers"]]
    assert len(set(ports)) == len(ports) and servers["proxy"]["port"] == manifest["ports"]["http"] == 8000
    # the proxy's config: its urls are the workers', as the proxy's parser reads them
    proxy = disagg.parse_proxy_config(yaml.safe_load((out / "disagg" / "proxy.yml").read_text()))
    assert proxy.context_urls == [f"127.0.0.1:{servers['context0']['port']}"]
    assert proxy.generation_urls == [f"127.0.0.1:{servers[f'generation{i}']['port']}" for i in range(2)]
    assert (proxy.hostname, proxy.port) == ("0.0.0.0", 8000)
    # every worker's options and command are the generator's for this release
    shape = disagg.Shape.from_point(SHAPE)
    made = disagg.workers(shape, release, OPTIONS, list(range(5)), "127.0.0.1", [8001, 8002, 8003])
    for worker in made:
        options = yaml.safe_load((out / "disagg" / f"{worker.name}.yml").read_text())
        assert options == worker.options
        assert options["cache_transceiver_config"] == {"backend": "UCX"}
        assert options.get("disable_overlap_scheduler") is (True if worker.role == "context" else None)
        args = recording(tmp_path, "trtllm-serve")
        ran = run(out / "launch" / f"{worker.name}.sh", tmp_path, TRTSWEEP_MODEL_DIR="/srv/model")
        assert ran.returncode == 0, ran.stderr
        options_file = f"{out}/disagg/{worker.name}.yml"
        assert args.read_text().splitlines() == [*worker.argv(release, "/srv/model", options_file)[1:],
                                                 f"gpus={','.join(map(str, worker.gpus))}"]  # fmt: skip
    assert run(out / "launch" / "context0.sh", tmp_path).returncode != 0  # TRTSWEEP_MODEL_DIR is required
    args = recording(tmp_path, "trtllm-serve")
    assert run(out / "launch" / "proxy.sh", tmp_path).returncode == 0
    assert args.read_text().splitlines() == [*disagg.proxy_argv(release, out / "disagg" / "proxy.yml")[1:], "gpus="]
    for script in (out / "launch").glob("*.sh"):
        assert os.access(script, os.X_OK) and subprocess.run(["sh", "-n", str(script)]).returncode == 0
    assert not (out / "launch" / "native.sh").exists() and not (out / "systemd" / "native.service").exists()
    assert not [p for p in out.rglob("*") if p.is_file() and b"hf_secret_0123456789" in p.read_bytes()]
    readme = (out / "README.md").read_text()
    assert "A disaggregated configuration `c1x1-g2x2`" in readme and "| generation1 | 8003 | 3,4 |" in readme
    assert "measured with every worker on one host" in readme and "Pin the pods to one node" in readme


def test_the_systemd_units_start_the_workers_before_the_proxy_and_stop_with_it(tmp_path):
    results, point_id = disagg_results(tmp_path, "1.2")
    out = tmp_path / "bundle"
    name = write_bundle(results, point_id, out, base_dir=tmp_path)["name"]
    units = {p.name: p.read_text() for p in (out / "systemd").glob("*.service")}
    workers = [f"{name}-{w}.service" for w in ("context0", "generation0", "generation1")]
    assert sorted(units) == sorted([*workers, f"{name}.service"])
    proxy = units[f"{name}.service"].splitlines()
    assert f"After=network-online.target {' '.join(workers)}" in proxy and f"Requires={' '.join(workers)}" in proxy
    assert any(line.startswith("ExecStart=trtllm-serve disaggregated") for line in proxy)
    for unit in workers:
        lines = units[unit].splitlines()
        assert f"PartOf={name}.service" in lines and f"EnvironmentFile=/etc/trtsweep/{name}.env" in lines
    assert "Environment=CUDA_VISIBLE_DEVICES=1,2" in units[f"{name}-generation0.service"].splitlines()


def test_the_kubernetes_objects_are_valid_and_the_proxy_reaches_every_instance(tmp_path):
    import kubernetes_validate

    results, point_id = disagg_results(tmp_path, "1.2")
    out = tmp_path / "bundle"
    name = write_bundle(results, point_id, out, base_dir=tmp_path)["name"]
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in (out / "k8s").glob("*.yaml")}
    assert set(docs) == {"pvc", "configmap", "context-deployment", "context-service", "generation-deployment",
                         "generation-service", "proxy-deployment", "proxy-service"}  # fmt: skip
    for doc in docs.values():
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    config = docs["configmap"]["data"]
    pods = {role: docs[f"{role}-deployment"]["spec"]["template"]["spec"] for role in ("context", "generation", "proxy")}
    gen = pods["generation"]["containers"]
    assert [c["name"] for c in gen] == ["generation0", "generation1"]
    assert [c["resources"]["limits"]["nvidia.com/gpu"] for c in gen] == [2, 2]
    assert "resources" not in pods["proxy"]["containers"][0]  # the proxy takes no GPU
    for container in gen:
        args = container["args"]
        assert args[0] == "/models/model" and args[args.index("--host") + 1] == "0.0.0.0"
        options = args[args.index("--extra_llm_api_options") + 1]
        assert options == f"/config/{container['name']}.yml" and container["name"] + ".yml" in config
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": container["name"]}
    # the proxy's urls: each instance's port behind its role's Service
    proxy = disagg.parse_proxy_config(yaml.safe_load(config["proxy.yml"]))
    for role, urls in (("context", proxy.context_urls), ("generation", proxy.generation_urls)):
        service = docs[f"{role}-service"]
        ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
        containers = pods[role]["containers"]
        assert urls == [f"{service['metadata']['name']}:{ports[c['name']]}" for c in containers]
        assert [c["ports"][0]["containerPort"] for c in containers] == list(ports.values())
        selector = service["spec"]["selector"]
        assert docs[f"{role}-deployment"]["spec"]["template"]["metadata"]["labels"] == selector
    assert docs["proxy-service"]["metadata"]["name"] == name
    proxy_args = pods["proxy"]["containers"][0]["args"]
    assert proxy_args == disagg.proxy_argv("1.2", Path("/config/proxy.yml"))[1:]


def test_the_cpu_beds_stand_ins_are_handed_off_for_an_hf_point(tmp_path):
    results, point_id = disagg_results(tmp_path, "1.2", backend="hf")
    out = tmp_path / "bundle"
    write_bundle(results, point_id, out, base_dir=tmp_path)
    proxy = " ".join((out / "launch" / "proxy.sh").read_text().replace("\\\n", " ").split())
    assert 'exec python3 -m trtsweep.serve.disagg_proxy disaggregated -c "${TRTSWEEP_BUNDLE}"/disagg/proxy.yml' in proxy
    worker = " ".join((out / "launch" / "generation1.sh").read_text().replace("\\\n", " ").split())
    assert 'exec python3 -m trtsweep.serve.hf_openai "${TRTSWEEP_MODEL_DIR}"' in worker
    assert "CUDA_VISIBLE_DEVICES" not in worker  # a CPU host


def test_a_disaggregated_speculative_points_workers_take_the_draft_model(tmp_path):
    results, point_id = disagg_results(tmp_path, "1.2")
    spec = {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model": "/bench/hub/draft/snapshots/1"}
    point_file = results / point_id / "point.json"
    point = json.loads(point_file.read_text())
    point.update(
        speculative="eagle3",
        draft_model={"repo_id": "org/draft", "revision": None},
        llm_api={**OPTIONS, "speculative_config": {"decoding_type": "Eagle", "max_draft_len": 3}},
    )
    point_file.write_text(json.dumps(point))
    (results / point_id / "llm_api_options.yml").write_text(yaml.safe_dump({**OPTIONS, "speculative_config": spec}))
    out = tmp_path / "bundle"
    write_bundle(results, point_id, out, base_dir=tmp_path)
    for name in ("context0", "generation1"):
        options = yaml.safe_load((out / "disagg" / f"{name}.yml").read_text())
        assert options["speculative_config"]["speculative_model"] == "${TRTSWEEP_DRAFT_DIR}"
        args = recording(tmp_path, "trtllm-serve")
        ran = run(out / "launch" / f"{name}.sh", tmp_path, TRTSWEEP_MODEL_DIR="/m", TRTSWEEP_DRAFT_DIR="/srv/draft")
        assert ran.returncode == 0, ran.stderr
        argv = args.read_text().splitlines()
        rendered = Path(argv[argv.index("--extra_llm_api_options") + 1])
        assert rendered == out / "rendered" / "disagg" / f"{name}.yml"
        assert yaml.safe_load(rendered.read_text())["speculative_config"]["speculative_model"] == "/srv/draft"
    config = yaml.safe_load((out / "k8s" / "configmap.yaml").read_text())["data"]
    assert yaml.safe_load(config["generation0.yml"])["speculative_config"]["speculative_model"] == "/models/draft"
