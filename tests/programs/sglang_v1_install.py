"""A process for tests/test_v1_sglang0512.py, in the SGLang 0.5.12 environment: spectrace's
v1 wrap-point table applied to the real `EAGLEWorker` module, then again with one method
removed (as in a release that lacks it); prints what was wrapped and what was missing.

    SGLANG_0512_PYTHON tests/programs/sglang_v1_install.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import sglang.srt.speculative.eagle_worker as m  # noqa: E402

from spectrace.adapters import sglang_v1  # noqa: E402
from spectrace.patching import Patcher  # noqa: E402

full = Patcher()
full.apply(m, sglang_v1.WORKER_POINTS)
wrapped = sorted(p.attr for p in full.patches)
full.restore_all()
del m.EAGLEWorker.forward_draft_extend_after_decode  # as if an older SGLang lacked it
partial = Patcher()
partial.apply(m, sglang_v1.WORKER_POINTS)
print(json.dumps({"wrapped": wrapped, "missing": full.missing,
                  "partial": sorted(p.attr for p in partial.patches),
                  "partial_missing": partial.missing}))
