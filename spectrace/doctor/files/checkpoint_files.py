"""A draft checkpoint and its target as the doctor reads them: the draft's config,
safetensors headers (or `.bin` weights through the restricted loader) and small `d2t` /
`t2d` maps (`Checkpoint`, with the `CheckpointView` the judging sees), and the target's
config. Everything that makes the input uncheckable becomes `UnusableInput` here, with a
one-line message naming the file and what was expected."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UnusableInput
from ..judge.formats import MLA_ARCHS, is_speculators
from ..judge.inputs import CheckpointView, Target
from . import pickled
from .safetensors_header import INT_FORMATS, SafetensorsHeader, TensorInfo, parse_header, \
    read_int_tensor, read_marked_ids


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


# what both runtimes leave out of `*.bin` (`filter_files_not_needed_for_inference`)
NOT_WEIGHTS = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")


DRAFT_INT_KEYS = ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")


TARGET_INT_KEYS = ("hidden_size", "num_hidden_layers", "vocab_size")


@dataclass
class Checkpoint:
    """A draft directory as read: the view the checks see, and where each tensor lies."""

    path: Path
    view: CheckpointView
    files: list[str]
    where: dict[str, tuple[SafetensorsHeader, TensorInfo]] = field(default_factory=dict)
    # pickled weights (`*.bin`), read with torch.load(weights_only=True): name -> (file,
    # tensor); `where` is empty then
    tensors: dict[str, tuple[str, Any]] = field(default_factory=dict)

    @property
    def pickled(self) -> bool:
        return bool(self.tensors) or any(f.endswith(".bin") for f in self.files)


# -- input reading ------------------------------------------------------------------------
def read_checkpoint(draft_dir: str | os.PathLike) -> Checkpoint:
    draft_path = Path(draft_dir)
    if not draft_path.is_dir():
        raise UnusableInput(f"draft directory {draft_path} does not exist or is not a directory")
    cfg = read_json(draft_path / "config.json", "draft config")
    _check_draft_config(cfg, draft_path / "config.json")
    files = weight_files(draft_path)
    if files[0].endswith(".bin"):
        return _read_pickled(draft_path, cfg, files)
    where: dict[str, tuple[SafetensorsHeader, TensorInfo]] = {}
    for h in (parse_header(f) for f in files):  # a later file wins, as in the loaders
        for name, info in h.tensors.items():
            where[name] = (h, info)
    view = CheckpointView(cfg, {k: info.shape for k, (_, info) in where.items()},
                          {k: info.dtype for k, (_, info) in where.items()})
    for name, (h, info) in where.items():
        if "d2t" in name and info.dtype in INT_FORMATS and len(info.shape) == 1:
            view.d2t[name] = read_int_tensor(h, name)
        elif "t2d" in name and info.dtype in ("BOOL", "U8") and len(info.shape) == 1:
            view.t2d_hot = read_marked_ids(h, name)
    return Checkpoint(draft_path, view, files, where)


def _read_pickled(draft_path: Path, cfg: dict, files: list[str]) -> Checkpoint:
    """The same view from pickled weights, read with PyTorch's restricted loader only; each
    file's names in sorted order, as a safetensors header holds them (so the findings are
    word for word those of its safetensors twin)."""
    tensors: dict[str, tuple[str, Any]] = {}
    for f in files:  # a later file wins, as in the loaders
        state = pickled.read_state_dict(f)
        tensors.update({k: (f, state[k]) for k in sorted(state)})
    view = CheckpointView(cfg, {k: tuple(t.shape) for k, (_, t) in tensors.items()},
                          {k: pickled.dtype_name(t) for k, (_, t) in tensors.items()})
    for name, (_, t) in tensors.items():
        dtype = view.dtypes[name]
        if "d2t" in name and dtype in INT_FORMATS and t.dim() == 1:
            view.d2t[name] = [int(x) for x in t.tolist()]
        elif "t2d" in name and dtype in ("BOOL", "U8") and t.dim() == 1:
            view.t2d_hot = [int(i) for i in t.nonzero().flatten().tolist()]
    return Checkpoint(draft_path, view, files, tensors=tensors)


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
    """The fields every check reads, in the place the config's format keeps them."""
    layer = cfg
    if is_speculators(cfg):
        layer = cfg.get("transformer_layer_config")
        if not isinstance(layer, dict):
            raise UnusableInput(f"draft config {path}: a speculators config needs a "
                                f"transformer_layer_config object, got {type(layer).__name__}")
        path = Path(f"{path} (transformer_layer_config)")
    _positive_ints(layer, DRAFT_INT_KEYS, path, "draft config")
    ec = cfg.get("eagle_config")
    if ec is not None and not isinstance(ec, dict):
        raise UnusableInput(f"{path}: eagle_config is {type(ec).__name__}, expected an object")
    for where, ids in (("eagle_config.", (ec or {}).get("eagle_aux_hidden_state_layer_ids")),
                       ("", cfg.get("eagle_aux_hidden_state_layer_ids"))):
        if ids is not None and not (isinstance(ids, list) and all(type(i) is int for i in ids)):
            raise UnusableInput(f"{path}: {where}eagle_aux_hidden_state_layer_ids is {ids!r}, "
                                f"expected a list of integers")
    for k in ("num_hidden_layers", "num_key_value_heads", "head_dim", "draft_vocab_size",
              "target_hidden_size", "num_aux_hidden_states", "kv_lora_rank",
              "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        v = cfg.get(k, layer.get(k))
        if v is not None and (type(v) is not int or v <= 0):
            raise UnusableInput(f"draft config {path}: `{k}` is {v!r}, expected a positive "
                                f"integer or absent")
    if any(a in MLA_ARCHS for a in (cfg.get("architectures") or [])):
        for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if cfg.get(k) is None:
                raise UnusableInput(f"draft config {path}: the MLA draft needs `{k}` (a positive "
                                    f"integer)")


def read_target(target: str | os.PathLike, context_length: int | None = None
                ) -> tuple[Target, Path]:
    """The target as the runtime reads it: a multimodal config's `text_config` (Kimi-K2.5:
    `KimiK25ForConditionalGeneration` around a DeepSeek-V3 text model) fills what the top
    level lacks; architectures of both levels decide how aux layer ids are read."""
    p = Path(target)
    if p.is_dir():
        p = p / "config.json"
    elif not p.exists():
        raise UnusableInput(f"target {p} not found (give --target a model directory with "
                            f"config.json, or a config.json file)")
    raw = read_json(p, "target config")
    cfg, archs = raw, list(raw.get("architectures") or [])
    text = raw.get("text_config")
    if isinstance(text, dict):
        cfg = {**text, **{k: v for k, v in raw.items() if k in TARGET_INT_KEYS}}
        archs += list(text.get("architectures") or [])
    _positive_ints(cfg, TARGET_INT_KEYS, p, "target config")
    if context_length is not None and (type(context_length) is not int or context_length <= 0):
        raise UnusableInput(f"--context-length {context_length!r}: expected a positive number "
                            f"of tokens")
    return Target(cfg, tuple(a for a in archs if isinstance(a, str)), context_length), p


def weight_files(draft_dir: Path) -> list[str]:
    """The weight files the runtime would read, as both runtimes pick them: safetensors
    (the index's, if there is one), else PyTorch's `*.bin` (`pytorch_model.bin.index.json`'s,
    if there is one), which only PyTorch's restricted loader reads (`pickled`). Other
    pickles (`.pt`, `.pth`, ...) are training states the runtimes do not load."""
    for suffix in (".safetensors", ".bin"):
        index = sorted(draft_dir.glob(f"*{suffix}.index.json"))
        if index:
            return _indexed(draft_dir, index[0], suffix)
        files = sorted(str(p) for p in draft_dir.glob(f"*{suffix}")
                       if p.is_file() and p.name not in NOT_WEIGHTS)
        if files:
            return files
    pickles = sorted(p.name for p in draft_dir.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise UnusableInput(
            f"{draft_dir} has no weights a runtime loads (*.safetensors or pytorch_model*.bin), "
            f"only {', '.join(pickles)}: a training state, not a draft checkpoint. Export the "
            f"draft with its trainer (its weights as safetensors or a state dict in "
            f"pytorch_model.bin)")
    raise UnusableInput(f"{draft_dir} has no *.safetensors or pytorch_model*.bin weight files")


def _indexed(draft_dir: Path, index: Path, suffix: str) -> list[str]:
    wm = read_json(index, f"{suffix.lstrip('.')} index").get("weight_map")
    if not isinstance(wm, dict):
        raise UnusableInput(f"{index}: no weight_map object")
    files = [str(draft_dir / f) for f in sorted(set(map(str, wm.values())))]
    for f in files:
        if not os.path.isfile(f):
            raise UnusableInput(f"{index} lists {os.path.basename(f)}, which is missing")
    return files
