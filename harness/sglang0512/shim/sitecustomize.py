"""Installs the 0.5.12 CPU stand-ins (`sgl512_cpu_spec`) in every process of a patched
SGLang 0.5.12 server, through wrapt post-import hooks, when SGL512_CPU_SPEC=1. On
PYTHONPATH, so the spawned scheduler picks it up too. Not SGLang's code."""
import os

if os.environ.get("SGL512_CPU_SPEC") == "1":
    import wrapt

    def _hook(fn_name):
        def h(mod):
            import sgl512_cpu_spec as p
            getattr(p, fn_name)(mod)
        return h

    for _m, _f in {
        "sglang.srt.layers.attention.attention_registry": "on_attention_registry",
        "sglang.srt.speculative.draft_utils": "on_draft_utils",
        "sglang.srt.speculative.eagle_utils": "on_eagle_utils",
        "sglang.srt.speculative.spec_utils": "on_spec_module",
        "sglang.srt.mem_cache.memory_pool": "on_spec_module",
        "sglang.srt.models.llama": "on_llama",
        "sglang.srt.speculative.eagle_info": "on_spec_module",
        "sglang.srt.speculative.eagle_info_v2": "on_eagle_info_v2",
        "sglang.srt.managers.overlap_utils": "on_overlap_utils",
        "sglang.srt.speculative.eagle_worker": "on_worker",
        "sglang.srt.speculative.eagle_worker_v2": "on_worker",
    }.items():
        wrapt.register_post_import_hook(_hook(_f), _m)
