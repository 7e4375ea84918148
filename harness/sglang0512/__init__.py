"""A patched SGLang 0.5.12 on the CPU: the last release with the v1 `EAGLEWorker`.

0.5.12 has no CPU path for EAGLE, so `shim/` replaces attention, the draft decode backend,
the spec Triton kernels, tree build / greedy verify and `sgl_kernel` with pure-torch
stand-ins. The eagle workers' control flow (what spectrace wraps) is SGLang's own.
"""
