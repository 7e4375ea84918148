"""What the harness's weightless programs tell SGLang and vLLM about the CPU.

Both runtimes pick AMX-only CPU kernels when `torch.cpu._is_amx_tile_supported()` is true:
SGLang's layers call `sgl_kernel.*_cpu` ops (which the weightless programs stub), vLLM's
CPU build asks for low-precision weights (its MTP draft then fails to build in float32).
CI's machines have no AMX; a program that calls `without_amx()` before it imports either
runtime takes that same path on every machine.
"""
import torch


def without_amx() -> None:
    """Report no AMX tiles to torch's CPU capability check (call before importing SGLang
    or vLLM: both read it at import)."""
    torch._C._cpu._is_amx_tile_supported = torch.cpu._is_amx_tile_supported = lambda: False
