"""A process for tests/test_reliability.py: spectrace's real `eagle3.forward` hook on SGLang's
real `LlamaModel.forward`, made to raise (a stand-in model instance without `config`);
prints what SGLang's forward returned, how often it ran and what spectrace counted.

    python tests/programs/sglang_hook_raises.py      (needs SGLang; PYTHONPATH with the repo)
"""
import json
import logging
import types

import sglang.srt.models.llama_eagle3 as m
import torch
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from torch import nn

from spectrace.adapters import sglang_eagle3
from spectrace.patching import Patcher, is_installed
from spectrace.safety import INTERNAL_ERRORS

records = []


class H(logging.Handler):
    def emit(self, r):
        records.append(r.getMessage())


logging.getLogger("spectrace").addHandler(H())

patcher = Patcher()
original = m.LlamaModel.__dict__["forward"]
patcher.apply(m, sglang_eagle3.LLAMA_EAGLE3)  # spectrace's real adapter on SGLang's real class
assert is_installed(m.LlamaModel.__dict__["forward"])

# Stand-in instance (LlamaModel's constructor needs SGLang's distributed groups): built
# without __init__, with real torch modules where SGLang's forward reads them. It has no
# `config`, so spectrace's hook raises AttributeError inside expected_widths().
model = m.LlamaModel.__new__(m.LlamaModel)
nn.Module.__init__(model)
model.embed_tokens = nn.Embedding(16, 8)
model.is_mrope_enabled = False
model.input_norm = None
model.fc_norm = None
model.fc = nn.Linear(24, 8)
model.layers = nn.ModuleList()
fc_calls = []
model.fc.register_forward_hook(lambda *a: fc_calls.append(1))


def batch(rows, width):
    return types.SimpleNamespace(
        mm_input_embeds=None, forward_mode=ForwardMode.DECODE,
        contains_mm_inputs=lambda: False,
        spec_info=types.SimpleNamespace(hidden_states=torch.zeros(rows, width)))


ids = torch.zeros(0, dtype=torch.long)
out1 = model.forward(ids, ids, batch(0, 24))                 # idle batch: SGLang returns early
out2 = model.forward(ids, ids, forward_batch=batch(0, 24))
ref = original(model, ids, ids, batch(0, 24))                # the unwrapped SGLang function
own_exc = None
try:
    model.forward(ids, ids, batch(0, 7))                     # SGLang's own error (bad width)
except Exception as exc:
    own_exc = type(exc).__name__
patcher.restore_all()
print(json.dumps({
    "shapes": [list(out1[0].shape), list(out2[0].shape), list(ref[0].shape)],
    "fc_calls": len(fc_calls), "errors": INTERNAL_ERRORS.counts.get("eagle3.forward", 0),
    "logged": sum("eagle3.forward" in r for r in records), "own_exc": own_exc,
    "restored": m.LlamaModel.__dict__["forward"] is original}))
