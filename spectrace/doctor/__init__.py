"""`spectrace doctor`: static checks of an EAGLE-3 draft checkpoint and its target.

Reads config.json files and safetensors headers only (plus the small `d2t` map), so a
training pipeline or CI can reject a broken draft in seconds, without a GPU or a server.
Library use: `check_checkpoint(draft_dir, target, runtime=None) -> DoctorReport` (runtime
"sglang", "sglang==0.5.8", "vllm==0.33.0"; a bare version means SGLang).
"""
from __future__ import annotations


class UnusableInput(Exception):
    """The input cannot be checked at all (exit status 2): a missing directory, an
    unreadable or truncated file, invalid JSON, a pickle, not an EAGLE-3 draft. The
    message is one line naming the file and what was expected."""


from .check import DoctorReport, check_checkpoint  # noqa: E402  (needs UnusableInput)

__all__ = ["DoctorReport", "UnusableInput", "check_checkpoint"]
