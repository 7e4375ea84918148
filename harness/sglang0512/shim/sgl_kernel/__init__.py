"""STAND-IN, not SGLang's code: a pure-torch `sgl_kernel` for the patched SGLang 0.5.12
CPU harness (tests/test_v1_sglang0512.py). The CPU-only ops that SGLang's CPU engine
(SGLANG_USE_CPU_ENGINE=1) imports unconditionally, plus the 0.5.12 names it calls
(`verify_tree_greedy`, a `sgl_kernel.kvcacheio` stub). Semantics ported from
sgl-kernel/csrc/cpu/spec.cpp and kvcache.cpp. Only what a Llama + EAGLE-3
(topk=1, page_size=1, torch_native attention, no AMX) run needs."""
import os
import sys

# --- 0.5.12 additions ------------------------------------------------------
# sglang 0.5.12 imports submodules such as sgl_kernel.kvcacheio unconditionally
# (mem_cache/memory_pool_host.py). Serve any sgl_kernel.<sub> as a stub module whose
# attributes raise NotImplementedError only if they are actually called.
import importlib.abc, importlib.machinery, types


# Only submodules that 0.5.12 imports unconditionally; others must keep raising
# ImportError so SGLang's own try/except fallbacks (e.g. sgl_kernel.scalar_type) work.
_STUB_SUBMODULES = {"sgl_kernel.kvcacheio"}


class _StubSubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in _STUB_SUBMODULES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []

        def _ga(name, _mod=spec.name):
            if name.startswith("__"):
                raise AttributeError(name)

            def _missing(*a, **k):
                raise NotImplementedError(f"sgl_kernel shim: {_mod}.{name} is not implemented")

            _missing.__name__ = name
            return _missing

        m.__getattr__ = _ga
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _StubSubmoduleFinder())


# --- the 0.5.23 stand-in, shared: the same pure-torch ops -------------------
_STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                        os.pardir, "sgl_kernel_standin", "sgl_kernel", "__init__.py")
with open(_STANDIN) as _fh:
    exec(compile(_fh.read(), os.path.normpath(_STANDIN), "exec"), globals())


# 0.5.12 names (CUDA-op names used by sglang.srt.speculative.eagle_utils)
def verify_tree_greedy(**kw):
    return verify_tree_greedy_cpu(**kw)  # noqa: F821 - defined by the stand-in above
