"""`check_checkpoint`: gather a draft's config, safetensors headers and `d2t`, plus the
target's config, and run the pure detectors over them.

Everything that makes the input uncheckable becomes `UnusableInput` here, with a one-line
message naming the file and what was expected; everything wrong with a checkable draft
becomes a `Finding`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..detectors.checkpoint import NEWEST_KNOWN, Layout, check_draft, resolve_layout, route_key, \
    expected_draft_params
from ..detectors.vocab import check_vocab_map
from .. import signals
from ..findings import ERROR, Finding
from . import UnusableInput
from .safetensors_header import INT_FORMATS, parse_header, read_int_tensor

VOCAB_D2T_DTYPE = signals.VOCAB_D2T_DTYPE
EAGLE3_ARCH = "LlamaForCausalLMEagle3"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
DRAFT_INT_KEYS = ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
TARGET_INT_KEYS = ("hidden_size", "num_hidden_layers", "vocab_size")


@dataclass
class DoctorReport:
    findings: list[Finding]
    draft: dict[str, Any]
    target: dict[str, Any]
    sglang_version: str
    sglang_version_source: str  # "argument", "installed" or "newest known"
    layout: Layout

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def exit_status(self) -> int:
        return 1 if self.errors else 0

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings], "draft": self.draft,
                "target": self.target, "sglang_version": self.sglang_version,
                "sglang_version_source": self.sglang_version_source,
                "layout": self.layout.to_dict()}


def default_sglang_version() -> tuple[str, str]:
    """The installed SGLang's version, else the newest layout this module knows."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("sglang"), "installed"
    except PackageNotFoundError:
        return NEWEST_KNOWN, "newest known"


def check_checkpoint(draft_dir: str | os.PathLike, target: str | os.PathLike,
                     sglang_version: str | None = None) -> DoctorReport:
    """Check the EAGLE-3 draft in `draft_dir` against `target` (a model directory with
    config.json, or a config.json path) for the loader of `sglang_version`."""
    if sglang_version is None:
        sglang_version, source = default_sglang_version()
    else:
        source = "argument"
    try:
        layout = resolve_layout(sglang_version)
    except ValueError as e:
        raise UnusableInput(str(e)) from None
    draft_path = Path(draft_dir)
    if not draft_path.is_dir():
        raise UnusableInput(f"draft directory {draft_path} does not exist or is not a directory")
    draft_cfg = read_json(draft_path / "config.json", "draft config")
    _check_draft_config(draft_cfg, draft_path / "config.json")
    target_cfg, target_file = read_target_config(target)

    files = weight_files(draft_path)
    headers = [parse_header(f) for f in files]
    tensors, where = {}, {}
    for h in headers:  # a later file wins, as in SGLang's loading order
        for name, info in h.tensors.items():
            tensors[name], where[name] = info, h
    shapes = {name: info.shape for name, info in tensors.items()}

    findings = check_draft(draft_cfg, shapes, target_cfg, layout)
    findings += _vocab_findings(draft_cfg, target_cfg, tensors, where, layout)
    return DoctorReport(
        findings=findings,
        draft={"path": str(draft_path), "architecture": EAGLE3_ARCH,
               "weight_files": [os.path.basename(f) for f in files], "num_tensors": len(tensors),
               "draft_vocab_size": draft_cfg.get("draft_vocab_size"),
               "hidden_size": draft_cfg["hidden_size"]},
        target={"config": str(target_file), **{k: target_cfg[k] for k in TARGET_INT_KEYS}},
        sglang_version=str(sglang_version), sglang_version_source=source, layout=layout)


def _vocab_findings(draft_cfg: dict, target_cfg: dict, tensors: dict, where: dict,
                    layout: Layout) -> list[Finding]:
    params = expected_draft_params(draft_cfg, layout)
    d2t_keys = [k for k in tensors if route_key(k, params, layout).kind == "d2t"]
    target_vocab = int(target_cfg["vocab_size"])
    draft_vocab = draft_cfg.get("draft_vocab_size")
    if not d2t_keys:
        return check_vocab_map(None, draft_vocab, target_vocab)
    key = d2t_keys[-1]  # SGLang keeps the last one it sees
    info = tensors[key]
    if info.dtype not in INT_FORMATS:
        return [Finding(VOCAB_D2T_DTYPE, ERROR, (
            f"`{key}` has dtype {info.dtype}; SGLang adds it to an int64 arange and indexes "
            f"with the result, which fails (or rounds ids) unless it holds integers. Fix: save "
            f"d2t as int64 (d2t[i] = target_id - i)."),
            {"key": key, "dtype": info.dtype, "expected": sorted(INT_FORMATS)})]
    if len(info.shape) != 1:
        return []  # reported as shape.mismatch; values are not a map
    return check_vocab_map(read_int_tensor(where[key], key), draft_vocab, target_vocab)


# -- input reading ------------------------------------------------------------------------
def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`, or UnusableInput saying what is wrong with it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnusableInput(f"{what} {path} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UnusableInput(f"cannot read {what} {path}: {getattr(e, 'strerror', None) or e}") \
            from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UnusableInput(f"{what} {path} is not valid JSON (line {e.lineno}, column "
                            f"{e.colno}: {e.msg})") from None
    except RecursionError:
        raise UnusableInput(f"{what} {path} is nested too deeply to parse") from None
    if not isinstance(obj, dict):
        raise UnusableInput(f"{what} {path} is JSON but not an object")
    return obj


def _positive_ints(cfg: dict, keys: tuple[str, ...], path: Path, what: str) -> None:
    for k in keys:
        v = cfg.get(k)
        if type(v) is not int or v <= 0:
            raise UnusableInput(f"{what} {path}: `{k}` is {v!r}, expected a positive integer")


def _check_draft_config(cfg: dict, path: Path) -> None:
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    if EAGLE3_ARCH not in archs:
        other = [a for a in archs if isinstance(a, str) and "eagle3" in a.lower()]
        if other:
            raise UnusableInput(f"{path}: architecture {other[0]} is an EAGLE-3 draft the "
                                f"doctor does not model; it checks {EAGLE3_ARCH} only")
        raise UnusableInput(f"{path}: not an EAGLE-3 draft (architectures is {archs!r}, "
                            f"expected [\"{EAGLE3_ARCH}\"])")
    _positive_ints(cfg, DRAFT_INT_KEYS, path, "draft config")
    ec = cfg.get("eagle_config")
    if ec is not None and not isinstance(ec, dict):
        raise UnusableInput(f"{path}: eagle_config is {type(ec).__name__}, expected an object")
    ids = (ec or {}).get("eagle_aux_hidden_state_layer_ids")
    if ids is not None and not (isinstance(ids, list)
                                and all(type(i) is int for i in ids)):
        raise UnusableInput(f"{path}: eagle_config.eagle_aux_hidden_state_layer_ids is "
                            f"{ids!r}, expected a list of integers")
    for k in ("num_hidden_layers", "num_key_value_heads", "head_dim", "draft_vocab_size",
              "target_hidden_size", "num_aux_hidden_states"):
        v = cfg.get(k)
        if v is not None and (type(v) is not int or v <= 0):
            raise UnusableInput(f"draft config {path}: `{k}` is {v!r}, expected a positive "
                                f"integer or absent")


def read_target_config(target: str | os.PathLike) -> tuple[dict[str, Any], Path]:
    """(hidden_size, num_hidden_layers, vocab_size ...) of the target; a multimodal config's
    `text_config` fills what the top level lacks."""
    p = Path(target)
    if p.is_dir():
        p = p / "config.json"
    elif not p.exists():
        raise UnusableInput(f"target {p} not found (give --target a model directory with "
                            f"config.json, or a config.json file)")
    cfg = read_json(p, "target config")
    text = cfg.get("text_config")
    if isinstance(text, dict):
        cfg = {**text, **{k: v for k, v in cfg.items() if k in TARGET_INT_KEYS}}
    _positive_ints(cfg, TARGET_INT_KEYS, p, "target config")
    return cfg, p


def weight_files(draft_dir: Path) -> list[str]:
    """The safetensors files SGLang would read (the index's, if there is one). A directory
    with only pickles is unusable: unpickling can run arbitrary code, so we never do it."""
    index = sorted(draft_dir.glob("*.safetensors.index.json"))
    if index:
        wm = read_json(index[0], "safetensors index").get("weight_map")
        if not isinstance(wm, dict):
            raise UnusableInput(f"{index[0]}: no weight_map object")
        files = [str(draft_dir / f) for f in sorted(set(map(str, wm.values())))]
        for f in files:
            if not os.path.isfile(f):
                raise UnusableInput(f"{index[0]} lists {os.path.basename(f)}, which is missing")
        return files
    files = sorted(str(p) for p in draft_dir.glob("*.safetensors") if p.is_file())
    if files:
        return files
    pickles = sorted(p.name for p in draft_dir.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise UnusableInput(
            f"{draft_dir} has only pickled weights ({', '.join(pickles)}); the doctor never "
            f"unpickles (it can run arbitrary code) and SGLang prefers safetensors anyway. "
            f"Convert in a trusted environment: python -c \"import torch; from safetensors.torch "
            f"import save_file; sd = torch.load('{draft_dir / pickles[0]}', weights_only=True); "
            f"save_file({{k: v.contiguous() for k, v in sd.items()}}, "
            f"'{draft_dir / 'model.safetensors'}')\"")
    raise UnusableInput(f"{draft_dir} has no *.safetensors weight files")
