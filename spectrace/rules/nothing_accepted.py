"""No draft token accepted at all: every step then costs a target forward and the drafting
for the one token the target would have produced alone, so speculation is slower than none
whatever the step costs measure (issue 49: the demo's broken run was called "gains little"
by the advisor's noisy interval). A fact counted, not an estimate: it needs `FLOOR`
request-steps with draft tokens proposed, none of them accepted. A healthy draft, or a weak
one, accepts something: at 0.2 at the first position the chance of no acceptance in 100
request-steps is 0.8^100, about 2e-10. Pure functions over numbers.
"""
from __future__ import annotations

from ..findings import ERROR, Finding, FindingSpec
from ..messages import Message

FLOOR = 100  # request-steps verified (the verdict's MIN_REQUEST_STEPS) before it is judged
CODE = "acceptance.nothing_accepted"

SPEC = FindingSpec(
    CODE, ERROR,
    "no draft token accepted at all: speculation costs more than it gains, whatever the "
    "step costs (no alert of its own: `SpectraceAcceptanceCollapse` fires on the same run)",
    floor=f"{FLOOR} request-steps with draft tokens proposed, none of them accepted",
    message=Message(
        CODE,
        "no draft token was accepted in {drafts} request-steps ({draft_tokens} draft tokens "
        "proposed): each step costs a target forward and the drafting for the one token the "
        "target makes alone, so speculation is slower than none.",
        "look for the cause among the other findings (fc bypass, aux layers, d2t, dropped "
        "weights, non-finite drafts); if there is none, run `spectrace doctor` on the draft "
        "with this target, and check that the draft was trained for this target."))


def holds(drafts: float, accepted: float) -> bool:
    """`FLOOR` request-steps or more verified and not one of their draft tokens accepted:
    the fact this finding states, and the advisor's "slower" from the counts reads."""
    return drafts >= FLOOR and accepted == 0


def judge(drafts: float, draft_tokens: float, accepted: float) -> Finding | None:
    """The finding, or None: `drafts` request-steps verified, `draft_tokens` proposed in
    them, `accepted` of those accepted (the totals of one view)."""
    if draft_tokens <= 0 or not holds(drafts, accepted):
        return None
    facts = dict(drafts=int(drafts), draft_tokens=int(draft_tokens))
    return SPEC.found({**facts, "floor": FLOOR}, **facts)
