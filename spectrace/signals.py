"""Every name spectrace emits: the contract that the dashboards, alert rules and
`docs/metrics.md` follow (they are generated from it, and tests check them against it).
Nothing else in spectrace spells a metric, span, attribute or scope name.

Two parts: the vocabulary (`spectrace.names`: the `MetricSpec` type, attribute, span and
resource names, finding codes, healthy ranges), re-exported whole; and every metric, each
declared by its signal family (`spectrace.families`), re-exported by name, with their union
`ALL_METRICS` and `METRICS_BY_NAME`.
"""
from __future__ import annotations

from .families import ALL_METRICS, METRICS_BY_NAME
from .families.steps import (  # noqa: F401
    SPEC_STEPS, SPEC_TOPK,
)
from .families.acceptance import (  # noqa: F401
    SPEC_ACCEPTED_PER_POSITION, SPEC_ACCEPTED_TOKENS, SPEC_ACCEPT_LENGTH, SPEC_DRAFTS,
    SPEC_DRAFTS_PER_POSITION, SPEC_DRAFT_TOKENS, SPEC_NO_DRAFT_STEPS,
    SPEC_REFERENCE_ACCEPT_LENGTH,
)
from .families.breakdowns import (  # noqa: F401
    SPEC_ACCEPTED_TOKENS_BY_CONTEXT, SPEC_ACCEPT_LENGTH_BY_CONTEXT,
    SPEC_ACCEPT_LENGTH_BY_SAMPLING,
)
from .families.requests import (  # noqa: F401
    SPEC_REQUESTS, SPEC_REQUEST_ACCEPTANCE, SPEC_REQUEST_INVALID_TRACEPARENT,
    SPEC_REQUEST_LABEL_OVERFLOW,
)
from .families.agreement import (  # noqa: F401
    SPEC_AGREEMENT_DRAFTS, SPEC_AGREEMENT_PER_POSITION,
)
from .families.step_cost import (  # noqa: F401
    SPEC_PHASE_REQUESTS, SPEC_PHASE_SAMPLES, SPEC_PHASE_TIME, SPEC_PHASE_TIME_SQUARES,
    SPEC_PHASE_TIME_TOKENS, SPEC_PHASE_TOKENS, SPEC_PHASE_TOKENS_SQUARES,
)
from .families.draft_passes import (  # noqa: F401
    EAGLE3_DRAFT_CONTEXT, EAGLE3_EXPECTED_WIDTH, EAGLE3_FC_BYPASS, EAGLE3_PASSES,
    EAGLE3_UNLOADED_PARAMS, EAGLE3_UNUSED_KEYS, EAGLE3_WIDTH_MISMATCH,
)
from .families.findings import (  # noqa: F401
    FINDINGS, INTERNAL_ERRORS, TELEMETRY_DROPPED,
)
from .names import *  # noqa: F401,F403 - the vocabulary, whole
