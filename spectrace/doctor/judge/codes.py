"""Every finding `spectrace doctor` raises, declared once: its own, beside the check that
raises each (`SPECS` in `checkpoint`, `strict_fields`, `checkpoint_aux`, `dtypes`,
`tokenizers`, `quantization`, `positions`, `chat_templates`), and the run-time rules' it
raises on a checkpoint too, with the same code and words as at run time (the weights, the vocabulary
map, the aux capture: `spectrace.rules`). docs/doctor.md's table of codes is written from
`DOCTOR_SPECS` (`codes_table`); its "Codes" section has an example of each."""
from __future__ import annotations

from ... import names
from ...findings import SEVERITIES, Finding, FindingSpec
from ...rules import aux, vocab, weights
from . import chat_templates, checkpoint, checkpoint_aux, dtypes, positions, quantization, \
    strict_fields, tokenizers

# the run-time rules' findings the doctor raises on a checkpoint (their declarations are the
# rules'; at run time they are raised on what the server really loaded)
ALSO_AT_RUN_TIME = (names.WEIGHTS_UNUSED_KEYS, names.WEIGHTS_MISSING_PARAMS,
                    names.VOCAB_D2T_MISSING, names.VOCAB_D2T_ABSOLUTE,
                    names.VOCAB_D2T_OUT_OF_RANGE, names.VOCAB_D2T_DUPLICATES,
                    names.AUX_CAPTURE_DISABLED, names.AUX_COUNT_MISMATCH)
_RUN_TIME = {s.code: s for s in weights.SPECS + vocab.SPECS + aux.SPECS}

DOCTOR_SPECS: tuple[FindingSpec, ...] = (
    checkpoint.SPECS + strict_fields.SPECS + checkpoint_aux.SPECS
    + tuple(_RUN_TIME[c] for c in ALSO_AT_RUN_TIME) + dtypes.SPECS + quantization.SPECS
    + tokenizers.SPECS + positions.SPECS + chat_templates.SPECS)
BY_CODE: dict[str, FindingSpec] = {s.code: s for s in DOCTOR_SPECS}


def undeclared(findings: list[Finding]) -> list[str]:
    """The findings of a doctor report that no declaration covers: an unknown code, or a
    severity above the one its code is declared with (for the tests: a check that raises
    something new declares it here first)."""
    rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}  # info 0 .. error 2
    out = []
    for f in findings:
        spec = BY_CODE.get(f.code)
        if spec is None:
            out.append(f"{f.code}: not declared")
        elif rank[f.severity] > rank[spec.severity]:
            out.append(f"{f.code}: raised as {f.severity}, declared {spec.severity}")
    return out


def codes_table() -> list[str]:
    """docs/doctor.md's table of codes: one row per declaration."""
    rows = ["| code | severity (at most) | meaning | also at run time |", "|---|---|---|---|"]
    for s in DOCTOR_SPECS:
        cells = [f"[`{s.code}`](#{s.code.replace('.', '')})", s.severity, s.what,
                 "yes" if s.code in ALSO_AT_RUN_TIME else "-"]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return rows
