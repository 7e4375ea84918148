"""`spectrace doctor`: static checks of an EAGLE-3 draft checkpoint and its target.

Reads config.json files and safetensors headers only (plus the small `d2t` map), so a
training pipeline or CI can reject a broken draft in seconds, without a GPU or a server.
Library use: `check_checkpoint(draft_dir, target, runtime=None) -> DoctorReport` (runtime
"sglang", "sglang==0.5.8", "vllm==0.33.0"; a bare version means SGLang).
"""
from __future__ import annotations

from .check import DoctorReport, check_checkpoint
from .errors import UnusableInput

__all__ = ["DoctorReport", "UnusableInput", "check_checkpoint"]
