"""CPU-only patches for the harness, applied in every SGLang process (the scheduler is a
spawned child, so they must come from a start-up hook on PYTHONPATH). A no-op wherever
CUDA is available. Not SGLang code: a stand-in for a driver this machine lacks.

- `torch.cuda.synchronize`: SGLang's MLA EAGLE-3 draft (`kimi_k25_eagle3`
  `set_embed` / `set_embed_and_head`) and DeepSeek-V3's `set_embed_and_head` call it
  unconditionally; on a CUDA build of torch with no driver it raises "Found no NVIDIA
  driver".
"""
import wrapt


@wrapt.when_imported("torch")
def _no_driver_synchronize(torch):
    if not torch.cuda.is_available():
        torch.cuda.synchronize = lambda *args, **kwargs: None
