"""Pickled PyTorch weights (`pytorch_model.bin`, how the EAGLE authors publish their
EAGLE-3 drafts; SGLang and vLLM load them too), read with PyTorch's restricted unpickler
only: `torch.load(path, weights_only=True)` builds tensors, numbers, strings and plain
containers and refuses any other global before it is called, so nothing in the file runs.
Anything but a flat state dict (tensor name -> tensor) is unusable input.

Needs torch (the safetensors path reads headers by hand and does not); without it the
message says so. Zip-format files (what `torch.save` writes since PyTorch 1.6) are mapped
(`mmap=True`), so reading the names, shapes and dtypes does not read the weights.
"""
from __future__ import annotations

import re
import warnings
import zipfile
from typing import Any

from ..errors import UnusableInput

READER = "torch.load(weights_only=True)"  # named in the report
# torch dtype -> the safetensors name the checks use
DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "float64": "F64",
          "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
          "bool": "BOOL", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}


def safetensors_name(bin_name: str) -> str:
    """The file `--fix` writes for a pickled one: `pytorch_model-00001-of-00002.bin` ->
    `model-00001-of-00002.safetensors` (the names transformers gives either format)."""
    stem = bin_name[:-len(".bin")] if bin_name.endswith(".bin") else bin_name
    if stem.startswith("pytorch_model"):
        stem = "model" + stem[len("pytorch_model"):]
    return stem + ".safetensors"


def dtype_name(tensor) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    return DTYPES.get(name, name.upper())


def read_state_dict(path: str) -> dict[str, Any]:
    """name -> tensor of one pickled weights file, through PyTorch's restricted loader."""
    torch = _torch(path)
    mapped = zipfile.is_zipfile(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # protocol notes; the outcome is what counts
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=mapped)
    except OSError as e:
        raise UnusableInput(f"{path}: cannot read ({e.strerror or e})") from None
    except Exception as e:  # noqa: BLE001 (whatever the restricted loader refuses)
        raise UnusableInput(_refused(path, e)) from None
    if not isinstance(obj, dict):
        raise UnusableInput(f"{path}: holds a pickled {type(obj).__name__}, not a state dict; "
                            f"expected a mapping of tensor names to tensors, as "
                            f"torch.save(model.state_dict(), ...) writes it")
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise UnusableInput(
                f"{path}: not a flat state dict: key {key!r} holds a {type(value).__name__}, "
                f"expected tensors only (a training state that wraps the weights, e.g. "
                f"{{'draft_state_dict': {{...}}}}, is not a checkpoint the runtimes load)")
    return obj


def _torch(path: str):
    try:
        import torch
    except ImportError:
        raise UnusableInput(
            f"{path}: pickled weights are read only with PyTorch's restricted loader "
            f"({READER}), and torch is not installed in this environment: install torch "
            f"(the CPU build is enough), or check a safetensors copy of the draft") from None
    return torch


def _refused(path: str, error: Exception) -> str:
    """The restricted loader's refusal in one line: what it would not build."""
    text = str(error)
    detail = next((ln.strip() for ln in text.splitlines()
                   if "GLOBAL" in ln or "Unsupported" in ln), None)
    if detail is None and "Weights only load failed" not in text:
        first = text.splitlines()[0] if text else type(error).__name__
        return (f"{path}: not a PyTorch weights file PyTorch can read ({type(error).__name__}: "
                f"{first[:200]})")
    detail = detail or "an object of an unsupported type"
    return (f"{path}: refused by PyTorch's restricted loader ({READER}): the pickle holds "
            f"objects other than tensors and plain containers ({detail}). Nothing in it was "
            f"run. Use a checkpoint of tensors only (a state dict or safetensors) from a source "
            f"you trust")




def training_args(path: str) -> tuple[dict | None, str]:
    """The argparse `args` SpecForge 0.1.x pickles into the `training_state.pt` beside each
    saved draft (scripts/train_eagle3.py `save_checkpoints`: epoch, global_step, args, the
    optimizer's state), read with the same restricted loader, `argparse.Namespace` the only
    global it may build besides tensors (a plain attribute holder: nothing in it runs).
    (args as a dict, "") or (None, why it could not be read)."""
    try:
        import argparse

        import torch
    except ImportError:
        return None, "torch is not installed here to read it with the restricted loader"
    try:
        with warnings.catch_warnings(), torch.serialization.safe_globals([argparse.Namespace]):
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True,
                             mmap=zipfile.is_zipfile(path))
    except OSError as e:
        return None, f"cannot read it ({e.strerror or e})"
    except Exception as e:  # noqa: BLE001 (a global the loader refuses, or no pickle)
        what = re.search(r"GLOBAL [\w.]+", str(e))
        return None, (f"PyTorch's restricted loader ({READER}) refused it "
                      f"({what[0] if what else type(e).__name__}); nothing in it was run")
    args = obj.get("args") if isinstance(obj, dict) else None
    if not isinstance(args, argparse.Namespace):
        return None, "it holds no argparse `args` (not SpecForge 0.1.x's training state)"
    return vars(args), ""
