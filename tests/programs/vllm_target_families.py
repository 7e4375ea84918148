"""A process for tests/test_vllm_target_families.py (the vLLM environment): every
SupportsEagle3 target class of the installed vLLM built on the meta device
(harness/vllm_families.py), its real `set_aux_hidden_state_layers` called with a draft's
ids, and spectrace's audit asked at each stage; prints `RESULT {json}`.

    python tests/programs/vllm_target_families.py '[3, 1, 2]' ['["LlamaForCausalLM", ...]']
    (the second argument: these architectures only)
"""
import json
import logging
import sys
import time

from harness import vllm_families as vf
from spectrace.adapters import vllm_target
from spectrace.rules.aux import audit_aux_capture

IDS = json.loads(sys.argv[1])
ONLY = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
OTHER = IDS[:-1] + [max(IDS) + 1]  # a draft trained on other layers


def audit(target, draft_ids):
    """What the runner's audit finds for an EAGLE-3 draft with these ids whose fc takes
    len(ids) target layers (`vllm_target.audit_pair` after reading the draft)."""
    hidden = 64
    state = vllm_target.capture_state(target, "eagle3")
    return sorted(f.code for f in audit_aux_capture(state, draft_ids, len(draft_ids) * hidden,
                                                     hidden))


logging.disable(logging.WARNING)
vf.prepare()
targets, unimportable = vf.eagle3_targets(ONLY)
out = {"built": {}, "not_built": {}, "unimportable": unimportable}
for arch in sorted(targets):
    began = time.time()
    try:
        t = vf.build(arch, targets[arch])
    except Exception as exc:  # noqa: BLE001 - recorded with why
        out["not_built"][arch] = f"{type(exc).__name__}: {exc}"[:300]
        continue
    r = out["built"][arch] = {"class": f"{type(t).__module__}.{type(t).__qualname__}"}
    r["never_set"] = audit(t, IDS)
    t.set_aux_hidden_state_layers(tuple(IDS))   # vLLM's runner passes the draft's tuple
    kept = vllm_target.kept_ids(t)
    r["kept"], r["where"] = kept.ids, kept.where
    r["draft_ids"] = audit(t, IDS)
    r["other_ids"] = audit(t, OTHER)
    r["seconds"] = round(time.time() - began, 1)
    print(arch, r, flush=True)
print("RESULT " + json.dumps(out))
