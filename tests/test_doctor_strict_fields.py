"""`config.field_type` (doctor.judge.strict_fields): a draft config whose field the
runtime's transformers refuses on its strict config class (`"use_cache": null`, one of
NVIDIA/Model-Optimizer#1417's failures; a number written as a string) is named by the
doctor with its field, value and declared type, and `--fix` writes a copy the runtime reads.

The runtimes' own config readers decide (tests/programs/strict_config_loaders.py, run with
each environment's python): SGLang 0.5.23's `get_config` (the .venv), transformers 5.19.0's
`AutoConfig` (the version SGLang 0.5.23 pins; the trainers' environment holds it), vLLM's
`get_config` (its environment). The doctor's tables are checked against the real classes
of each environment and against the released runtimes' transformers requirements."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness import checkpoint_formats as cf
from spectrace.doctor import check_checkpoint
from spectrace.doctor.judge import strict_fields as sf
from spectrace.runtimes import parse_version
from tests import release_sources as rs

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "tests" / "programs" / "strict_config_loaders.py"
SG, VL = "sglang==0.5.23", "vllm==0.33.0"
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512,
          "hidden_size": 128, "num_hidden_layers": 8, "intermediate_size": 256,
          "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 2048, "rope_theta": 10000.0}
# the faults: a null where bool is declared, a number as a string where int is
BROKEN = {"use_cache": None, "max_position_embeddings": "2048"}


def program(python: str, *args: str) -> dict:
    run = subprocess.run([python, str(PROGRAM), *args], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                     "HF_HUB_OFFLINE": "1"})
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout[-2000:] + run.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("target") / "config.json"
    p.write_text(json.dumps(TARGET))
    return p


def draft(tmp: Path, name: str, fmt: str = "specforge", **planted) -> Path:
    cfg, sd = cf.WRITERS[fmt]("random")
    layer = cfg.get("transformer_layer_config", cfg)
    layer.update(planted)
    return Path(cf.write_draft(str(tmp / name), cfg, sd))


def doctor_fix(d: Path, target: Path, runtime: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", str(d), "--target",
                           str(target), "--runtime", runtime, "--fix", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def field_findings(report) -> dict[str, object]:
    return {f.details["field"]: f for f in report.findings if f.code == "config.field_type"}


@pytest.fixture(scope="module")
def broken_and_fixed(tmp_path_factory, target) -> tuple[Path, Path]:
    """The broken draft, and the copy `--fix` writes of it for SGLang 0.5.23."""
    tmp = tmp_path_factory.mktemp("strict")
    d = draft(tmp, "broken", **BROKEN)
    out = tmp / "fixed"
    run = doctor_fix(d, target, SG, out)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[config.field_type]" in run.stdout.rsplit("--fix:", 2)[1]
    return d, out


# -- the doctor's answer ------------------------------------------------------------------
@pytest.mark.parametrize("runtime", [SG, VL])
def test_the_doctor_names_field_value_and_type(broken_and_fixed, target, runtime):
    d, fixed = broken_and_fixed
    found = field_findings(check_checkpoint(d, target, runtime))
    assert set(found) == set(BROKEN)
    use_cache, mpe = found["use_cache"], found["max_position_embeddings"]
    assert use_cache.severity == mpe.severity == "error"
    assert "`use_cache` is null where LlamaConfig declares bool" in use_cache.message
    assert "StrictDataclassFieldValidationError" in use_cache.message
    assert use_cache.details["repair"] == {"drop": "use_cache"}
    assert '`max_position_embeddings` is "2048" where LlamaConfig declares int' in mpe.message
    assert mpe.details["repair"] == {"set": {"max_position_embeddings": 2048}}
    # the copy --fix wrote: no null, the number a number, nothing else changed
    cfg = json.loads((fixed / "config.json").read_text())
    orig = json.loads((d / "config.json").read_text())
    assert "use_cache" not in cfg and cfg["max_position_embeddings"] == 2048
    assert {k: v for k, v in cfg.items() if k not in BROKEN} == \
        {k: v for k, v in orig.items() if k not in BROKEN}
    assert not field_findings(check_checkpoint(fixed, target, runtime))


def test_no_finding_where_the_transformers_is_not_strict(broken_and_fixed, target):
    d, _ = broken_and_fixed
    assert not field_findings(check_checkpoint(d, target, "sglang==0.5.8"))  # 4.57.1
    maybe = field_findings(check_checkpoint(d, target, "vllm==0.22.0"))  # 4.x or 5.5.1+
    assert {f.severity for f in maybe.values()} == {"warning"}
    assert "a 4.x transformers reads it as it is" in maybe["use_cache"].message


def test_a_size_without_value_is_refused_not_defaulted(tmp_path, target):
    d = draft(tmp_path, "layers", use_cache=None, num_hidden_layers=None)
    f = field_findings(check_checkpoint(d, target, SG))["num_hidden_layers"]
    assert f.details["repair"] is None and "the value the draft was trained with" in f.message
    run = doctor_fix(d, target, SG, tmp_path / "out")
    assert run.returncode == 1 and "cannot fix: config.field_type" in run.stdout
    assert "`num_hidden_layers` is null" in run.stdout and not (tmp_path / "out").exists()


def test_a_speculators_config_on_vllm_is_not_judged_strict(tmp_path, target):
    """vLLM builds a speculators config as its own SpeculatorsConfig, which sets the layer's
    fields as plain attributes (checked against vLLM itself in the vLLM test below); SGLang
    reads it only through --fix's translation, whose fields its LlamaConfig checks."""
    d = draft(tmp_path, "spec", "speculators", use_cache=None)
    assert not field_findings(check_checkpoint(d, target, VL))
    sg = field_findings(check_checkpoint(d, target, SG))
    assert list(sg) == ["use_cache"]
    run = doctor_fix(d, target, SG, tmp_path / "out")
    assert run.returncode == 0, run.stdout
    assert "use_cache" not in json.loads((tmp_path / "out" / "config.json").read_text())


# -- the runtimes' own config readers ------------------------------------------------------
@pytest.mark.sglang
def test_sglang_get_config_refuses_the_draft_and_reads_the_fixed_copy(broken_and_fixed):
    broken, fixed = broken_and_fixed
    got = program(sys.executable, "load", "sglang", str(broken), str(fixed))
    assert got[str(fixed)] == {"ok": True}
    assert got[str(broken)]["error"] == "StrictDataclassFieldValidationError"
    # transformers stops at the first field it checks; the doctor names every one
    assert got[str(broken)]["message"].split("'")[1] in BROKEN


def _trainers_python() -> str:
    from tests.conftest import trainers_python_or_skip
    return trainers_python_or_skip()


def _vllm_python() -> str:
    from tests.conftest import vllm_python_or_skip
    return vllm_python_or_skip()


@pytest.mark.trainers
def test_sglangs_pinned_transformers_refuses_the_draft_and_reads_the_fixed_copy(
        broken_and_fixed):
    python = _trainers_python()
    assert program(python, "fields")["transformers"] == sf.REQUIRES["sglang"]["0.5.23"][2:]
    broken, fixed = broken_and_fixed
    got = program(python, "load", "transformers", str(broken), str(fixed))
    assert got[str(fixed)] == {"ok": True}
    assert got[str(broken)]["error"] == "StrictDataclassFieldValidationError"


@pytest.mark.vllm
def test_vllm_get_config_refuses_the_draft_reads_the_fix_and_any_speculators_config(
        broken_and_fixed, tmp_path, target):
    python = _vllm_python()
    broken, _ = broken_and_fixed
    out = tmp_path / "fixed-vllm"
    assert doctor_fix(broken, target, VL, out).returncode == 0
    spec = draft(tmp_path, "spec", "speculators", use_cache=None)
    got = program(python, "load", "vllm", str(broken), str(out), str(spec))
    assert got[str(broken)]["error"] == "StrictDataclassFieldValidationError"
    assert got[str(out)] == {"ok": True} and got[str(spec)] == {"ok": True}


# -- the tables against the real classes and releases ---------------------------------------
def _table() -> dict:
    return {mt: {k: list(v) for k, v in fields.items()}
            for mt, (_name, fields) in sf.CLASSES.items()}


def test_the_table_is_the_real_classes_of_this_environment():
    real = program(sys.executable, "fields")
    assert parse_version(real["transformers"]) >= sf.STRICT_FROM
    assert real["classes"] == _table()


@pytest.mark.parametrize("env", [pytest.param(_trainers_python, marks=pytest.mark.trainers,
                                              id="trainers"),
                                 pytest.param(_vllm_python, marks=pytest.mark.vllm, id="vllm")])
def test_the_table_is_the_real_classes_of_the_runtime_environments(env):
    assert program(env(), "fields")["classes"] == _table()


def test_accepts_is_huggingface_hubs_strict_validator():
    """Every declared field, against values a config.json holds: `accepts` says exactly
    what huggingface_hub's validator (the one the strict classes run) lets through."""
    import dataclasses

    import transformers
    from huggingface_hub.dataclasses import type_validator
    values = [None, True, False, 0, 1, 2048, 2048.0, 1e-6, "x", "2048", [1, 2], [1, None],
              ["a"], {}, {"rope_type": "default"}]
    checked = 0
    for model_type, (name, fields) in sf.CLASSES.items():
        for f in dataclasses.fields(getattr(transformers, name)):
            if f.name not in fields:
                continue
            for v in values:
                try:
                    type_validator(f.name, v, f.type)
                    real = True
                except TypeError:
                    real = False
                assert sf.accepts(fields[f.name][0], v) is real, (name, f.name, v)
                checked += 1
    assert checked > 1000


def _released_requirement(package: str, version: str) -> str:
    if package == "sglang":
        meta = rs.source("sglang", version, f"sglang-{version}.dist-info/METADATA")
        [line] = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist: transformers")]
        return line.split("transformers", 1)[1]
    archive = os.path.join(rs.cache_dir(), f"vllm-{version}", f"vllm-{version}.tar.gz")
    with tarfile.open(archive) as t:
        text = t.extractfile(f"vllm-{version}/requirements/common.txt").read().decode()
    [line] = [ln for ln in text.splitlines() if ln.startswith("transformers")]
    return line.split("#")[0].split("transformers", 1)[1]


@pytest.mark.sources
@pytest.mark.parametrize("package", ["sglang", "vllm"])
def test_the_requirements_are_the_released_ones(package):
    assert set(sf.REQUIRES[package]) == set(rs.RELEASES[package])
    for version, req in sf.REQUIRES[package].items():
        released = _released_requirement(package, version).replace(" ", "")
        assert released == req, (package, version, released)


def test_strictness_of_each_requirement():
    s = sf.strictness
    assert s("sglang", "0.5.23").strict is True and s("sglang", "0.5.8").strict is False
    assert s("sglang", "0.5.12").strict is True          # 5.6.0
    assert s("sglang", "0.5.20").release == "0.5.16"     # between releases: the one before
    assert s("vllm", "0.18.0").strict is False           # <5
    assert s("vllm", "0.22.0").strict is None            # 4.x or 5.5.1+
    assert s("vllm", "0.11.0").strict is None            # >=4.55.2: pip's newest is strict
    assert s("vllm", "0.40.0").strict is True and s("vllm", "0.40.0").release == "0.33.0"
    assert s("vllm", "0.9.0").release == "0.11.0"


def test_each_repair_is_the_value_the_type_spells():
    name, bad = sf.mistyped({"model_type": "llama", "rms_norm_eps": 1, "mlp_bias": 0,
                             "max_position_embeddings": 2048.0, "use_cache": "true",
                             "vocab_size": "a lot", "hidden_act": None, "head_dim": None,
                             "eos_token_id": [1, 2]})
    assert name == "LlamaConfig"
    assert {m.field: m.repair for m in bad} == {
        "rms_norm_eps": ("set", 1.0), "mlp_bias": ("set", False),
        "max_position_embeddings": ("set", 2048), "use_cache": ("set", True),
        "vocab_size": None, "hidden_act": ("drop", None)}  # head_dim, eos: as declared
    assert sf.mistyped({"model_type": "mistral", "use_cache": None}) is None
