"""A process for tests/test_target_families.py: every target family of the installed SGLang
built on the meta device, its real `set_eagle3_layers_to_capture` called with the draft's
ids (and others), and `spectrace.check_pair` asked about each; prints `RESULT {json}`.

    python tests/programs/target_families.py '[0, 1, 2]'    (needs SGLang; PYTHONPATH with the repo)
"""
import json
import sys

from harness import sglang_families as fams
from spectrace import check_pair

IDS = json.loads(sys.argv[1])


def codes(target, draft):
    return sorted(f.code for f in check_pair(target, draft))


fams.prepare()
draft, no_ids = fams.build_draft(IDS), fams.build_draft(None)
out = {}
for name in fams.FAMILIES:
    r = out[name] = {"present": fams.present(name)}
    if not r["present"]:
        continue
    t = fams.build(name)
    r["never_switched_on"] = codes(t, draft)
    t.set_eagle3_layers_to_capture(IDS)
    r["draft_ids"] = codes(t, draft)
    t = fams.build(name)
    t.set_eagle3_layers_to_capture(None)          # SGLang's call for a draft without ids
    r["defaults"] = codes(t, no_ids)
    t = fams.build(name)
    t.set_eagle3_layers_to_capture(IDS[:2] + [IDS[2] + 1])
    r["other_ids"] = codes(t, draft)
    t = fams.build(name)
    t.set_eagle3_layers_to_capture([IDS[0], IDS[0], IDS[1]])   # two distinct layers
    r["repeated_id"] = codes(t, draft)
    try:
        with fams.pipeline_rank(0, 2):
            t = fams.build(name)
            t.set_eagle3_layers_to_capture(IDS)
            r["pp_rank_0_of_2"] = codes(t, draft)
    except Exception as exc:
        r["pp_refused"] = f"{type(exc).__name__}: {exc}"[:200]
print("RESULT " + json.dumps(out))
