"""`check_checkpoint`: gather a draft's config, safetensors headers and its small `d2t` /
`t2d` maps, plus the target's config, pick the runtime and version to judge against, and
run the doctor's judging (`doctor.judge.checkpoint.judge`) over them.

What is read is `doctor.files`' (an input that cannot be checked is `UnusableInput`, with
a one-line message naming the file); everything wrong with a checkable draft becomes a
`Finding`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..findings import ERROR, Finding
from ..runtimes import RUNTIMES, SGLANG, Runtime, installed_version, parse_version
from .errors import UnusableInput
from .files import pickled
from .files.checkpoint_files import TARGET_INT_KEYS, Checkpoint, read_checkpoint, read_target
from .files.target_files import check_pairing
from .judge.checkpoint import Judgement, NotADraft, judge
from .judge.dtypes import AUTO, parse_dtype_option
from .judge.inputs import Target
from .judge.loaders import NEWEST
from .judge.vllm_runner import runner_option


@dataclass
class DoctorReport:
    findings: list[Finding]
    draft: dict[str, Any]
    target: dict[str, Any]
    runtime: Runtime
    version: str
    version_source: str  # "argument", "installed", "newest known"
    judgement: Judgement
    dtype: dict[str, Any] = field(default_factory=dict)  # saved / run in (files.target_files.check_pairing)
    chat_template: dict[str, Any] = field(default_factory=dict)  # trained / target / note
    runner: str | None = None  # vLLM's model runner --vllm-runner chose (None: the default)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def exit_status(self) -> int:
        return 1 if self.errors else 0

    @property
    def runtime_label(self) -> str:
        return f"{Runtime(self.runtime).label} {self.version}"

    def to_dict(self) -> dict[str, Any]:
        j = self.judgement
        return {"findings": [f.to_dict() for f in self.findings], "draft": self.draft,
                "target": self.target, "format": j.format.to_dict(), "runtime": self.runtime,
                "version": self.version, "version_source": self.version_source,
                "loader": j.loader.to_dict() if j.loader else None,
                "judged_translation": j.translated, "dtype": self.dtype,
                "chat_template": self.chat_template,
                **({"vllm_runner": self.runner} if self.runner else {})}


# -- which runtime --------------------------------------------------------------------------
def resolve_runtime(spec: str | None, sglang_version: str | None = None
                    ) -> tuple[str, str, str]:
    """(runtime, version, where the version came from) for `--runtime sglang[==V] |
    vllm[==V]` (`--sglang-version V` is `--runtime sglang==V`). Default: the runtime that is
    installed when exactly one is, else SGLang; its installed version, else the newest
    this doctor knows."""
    if sglang_version is not None:
        if spec is not None and spec.split("==")[0].strip().lower() != SGLANG:
            raise UnusableInput(f"--sglang-version {sglang_version} contradicts --runtime "
                                f"{spec}; give one of them")
        spec = f"sglang=={sglang_version}"
    if spec is None:
        have = [rt for rt in RUNTIMES.values() if installed_version(rt)]
        runtime = have[0] if len(have) == 1 else SGLANG
        version = installed_version(runtime)
        return (runtime, version, "installed") if version else (
            runtime, NEWEST[runtime], "newest known (no runtime installed)")
    m = re.fullmatch(r"\s*([A-Za-z_-]+)\s*(?:==\s*(\S+))?\s*", spec)
    runtime = RUNTIMES.get(m[1].lower()) if m else None
    if runtime is None:
        raise UnusableInput(f"--runtime {spec!r}: expected sglang, sglang==VERSION, vllm or "
                            f"vllm==VERSION")
    if m[2]:
        try:
            parse_version(m[2])
        except ValueError:
            raise UnusableInput(f"--runtime {spec!r}: {m[2]!r} is not a version like "
                                f"{NEWEST[runtime]}") from None
        return runtime, m[2], "argument"
    version = installed_version(runtime)
    return (runtime, version, "installed") if version else (
        runtime, NEWEST[runtime], f"newest known ({runtime.label} is not installed)")


# -- the check ------------------------------------------------------------------------------
def check_checkpoint(draft_dir: str | os.PathLike, target: str | os.PathLike,
                     runtime: str | None = None, sglang_version: str | None = None,
                     dtype: str | None = None,
                     context_length: int | None = None,
                     vllm_runner: str | None = None) -> DoctorReport:
    """Check the EAGLE-3 draft in `draft_dir` against `target` (a model directory with
    config.json, or a config.json path) for the loader of `runtime` (`sglang[==V]` or
    `vllm[==V]`; a bare version such as "0.5.8" means SGLang), launched with `--dtype
    dtype` (default auto), served at `context_length` tokens (default: the target's
    max_position_embeddings), on vLLM's model runner `vllm_runner` (default, v1 or v2;
    default: the one the release takes for the target)."""
    if runtime is not None and re.match(r"^\s*v?\d", runtime):
        runtime, sglang_version = None, runtime
    rt, version, source = resolve_runtime(runtime, sglang_version)
    run_dtype = resolve_dtype(dtype)
    runner = resolve_runner(vllm_runner, rt, version)
    ck = read_checkpoint(draft_dir)
    tgt = read_target(target, context_length)
    return judge_checkpoint(ck, tgt, rt, version, source, run_dtype, runner)


def resolve_dtype(option: str | None) -> str:
    """`--dtype` as the runtimes read it (auto, half, float16, bfloat16, float, float32)."""
    try:
        return parse_dtype_option(option)
    except ValueError as e:
        raise UnusableInput(str(e)) from None


def resolve_runner(option: str | None, runtime: str, version: str) -> str | None:
    """`--vllm-runner default|v1|v2` (`judge.vllm_runner.runner_option`): V1, V2, or None
    for the release's default for the target."""
    try:
        return runner_option(option, runtime, version)
    except ValueError as e:
        raise UnusableInput(str(e)) from None


def judge_checkpoint(ck: Checkpoint, tgt: tuple[Target, Path], runtime: str, version: str,
                     source: str, dtype: str = AUTO, runner: str | None = None
                     ) -> DoctorReport:
    target, target_file = tgt
    try:
        j = judge(ck.view, target, runtime, version, runner)
    except NotADraft as e:
        raise UnusableInput(f"{ck.path / 'config.json'}: {e}") from None
    cfg = j.view or j.format.flat
    pairing = check_pairing(ck, target_file, runtime, version, j, dtype)
    return DoctorReport(
        findings=j.findings + pairing.findings,
        draft={"path": str(ck.path), "format": j.format.name,
               "architecture": (ck.view.config.get("architectures") or [None])[0],
               "weight_files": [os.path.basename(f) for f in ck.files],
               **({"weights_read_with": pickled.READER} if ck.pickled else {}),
               "num_tensors": len(ck.view.shapes),
               "draft_vocab_size": cfg.get("draft_vocab_size"),
               "hidden_size": cfg.get("hidden_size")},
        target={"config": str(target_file), "architectures": list(target.archs),
                **{k: target.config[k] for k in TARGET_INT_KEYS},
                "quantization": pairing.facts["target_quantization"]},
        dtype=pairing.facts["dtype"], chat_template=pairing.facts["chat_template"],
        runtime=runtime, version=str(version), version_source=source, judgement=j,
        runner=runner)
