"""Adapters: the only code that knows a runtime's module, class, method and field names.
Each states its wrap points as data (`patching.WrapPoint`) and turns the runtime's calls
into plain observations for the run-time rules and the families.

`ADAPTERS` maps each runtime module spectrace wraps to the table of wrap points applied
when that module is imported (`adapter module:TABLE`; adapter modules are imported only
then, so `import spectrace` stays cheap).
"""

ADAPTERS = {
    "sglang.srt.models.llama_eagle3": "spectrace.adapters.sglang_eagle3:LLAMA_EAGLE3",
    "sglang.srt.models.kimi_k25_eagle3": "spectrace.adapters.sglang_eagle3:KIMI_K25_EAGLE3",
    "sglang.srt.speculative.eagle_worker_v2": "spectrace.adapters.sglang_v2:WORKER_POINTS",
    "sglang.srt.speculative.eagle_worker_common": "spectrace.adapters.sglang_v2:VERIFY_COMMON",
    "sglang.srt.managers.scheduler_output_processor_mixin":
        "spectrace.adapters.sglang_v2:SCHEDULER",
    "sglang.srt.managers.scheduler_components.batch_result_processor":
        "spectrace.adapters.sglang_v2:RESULT_PROCESSOR",
    "sglang.srt.speculative.eagle_worker": "spectrace.adapters.sglang_v1:WORKER_POINTS",
    # SGLang's other speculative algorithms (one row each: sglang_algorithms.ALGORITHMS)
    "sglang.srt.speculative.base_spec_worker":
        "spectrace.adapters.sglang_algorithms:BASE_SPEC_WORKER",
    "sglang.srt.speculative.standalone_worker_v2":
        "spectrace.adapters.sglang_algorithms:STANDALONE",
    "sglang.srt.speculative.frozen_kv_mtp_worker_v2":
        "spectrace.adapters.sglang_algorithms:FROZEN_KV_MTP",
    "sglang.srt.speculative.multi_layer_eagle_worker_v2":
        "spectrace.adapters.sglang_algorithms:MULTI_LAYER_EAGLE",
    "sglang.srt.speculative.dflash_worker_v2": "spectrace.adapters.sglang_algorithms:DFLASH",
    "sglang.srt.speculative.dspark_components.dspark_worker_v2":
        "spectrace.adapters.sglang_algorithms:DSPARK",
    "sglang.srt.speculative.uno_worker_v2": "spectrace.adapters.sglang_algorithms:UNO",
    "sglang.srt.speculative.ngram_worker": "spectrace.adapters.sglang_algorithms:NGRAM",
    # SGLang's DFlash / DSpark drafts (DSpark's inherit DFlashDraftModel's method)
    "sglang.srt.models.dflash": "spectrace.adapters.sglang_dflash:WIDTH_POINTS",
    # vLLM (V1 engine): the EngineCore's scheduler, the worker's runners and draft classes
    "vllm.v1.core.sched.scheduler": "spectrace.adapters.vllm_engine:SCHEDULER",
    "vllm.v1.engine.core": "spectrace.adapters.vllm_engine:ENGINE_CORE",
    "vllm.v1.worker.gpu_model_runner": "spectrace.adapters.vllm_runner:GPU_RUNNER",
    "vllm.v1.worker.cpu_model_runner": "spectrace.adapters.vllm_runner:CPU_RUNNER",
    # vLLM's V2 model runner (MRV2): its runner, rejection sampler and speculators
    "vllm.v1.worker.gpu.model_runner": "spectrace.adapters.vllm_mrv2:RUNNER",
    "vllm.v1.worker.gpu.spec_decode.rejection_sampler":
        "spectrace.adapters.vllm_mrv2:REJECTION_SAMPLER",
    # ... the `draft` phase: `propose` of each speculator class that defines it, by release
    **{"vllm.v1.worker.gpu.spec_decode." + module: "spectrace.adapters.vllm_mrv2:" + table
       for module, table in (
           ("autoregressive.speculator", "AUTOREGRESSIVE"),            # 0.26 - 0.31
           ("target_dependent_ar.speculator", "TARGET_DEPENDENT_AR"),  # 0.32+
           ("dflash.speculator", "DFLASH"),                            # 0.26+
           ("multi_module_mtp.speculator", "MULTI_MODULE_MTP"),        # 0.27+
           ("extract_hidden_states", "EXTRACT_HIDDEN_STATES"),         # 0.29+
           ("draft_model.speculator", "PLAIN_DRAFT_MODEL"),            # 0.31
           ("standalone_ar.speculator", "STANDALONE_AR"),              # 0.32+
           ("ngram.speculator", "NGRAM"))},                            # 0.32+
    "vllm.model_executor.models.llama_eagle3": "spectrace.adapters.vllm_eagle3:LLAMA_EAGLE3",
    "vllm.model_executor.models.deepseek_eagle3":
        "spectrace.adapters.vllm_eagle3:DEEPSEEK_EAGLE3",
    "vllm.model_executor.models.qwen3_eagle3": "spectrace.adapters.vllm_eagle3:QWEN3_EAGLE3",
    # DFlash / DSpark drafts (read the target's aux hidden states as EAGLE-3 does)
    "vllm.model_executor.models.qwen3_dflash": "spectrace.adapters.vllm_dflash:QWEN3_DFLASH",
    "vllm.model_executor.models.laguna_dflash": "spectrace.adapters.vllm_dflash:LAGUNA_DFLASH",
}
