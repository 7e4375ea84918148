"""The chat template the draft was trained with against the target's.

A draft learns from conversations rendered with one template: its role markers, turn ends
and default system prompt are part of every context it saw. The server renders chat
requests with the target's template (or `--chat-template`), so a draft trained with
another sees unfamiliar context and acceptance drops on chat traffic, silently
(sglang#4247, EAGLE#132, ROCm/ATOM#609). What the draft's folder records of its template
differs by trainer (`doctor.files.trained_template`); where nothing is recorded the
report's `chat template:` line says so (information, no finding): it never guesses.

Pure functions over `spectrace.chat_template.ChatTemplate`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ... import messages, signals
from ...chat_template import ChatTemplate, same
from ...findings import WARNING, Finding, FindingSpec


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.CHAT_TEMPLATE_MISMATCH, WARNING,
                "the draft was trained with another chat template than the target's"),
)

# role and turn markers as templates spell them: <|im_start|>, <|start_header_id|>,
# <start_of_turn>, [INST], <<SYS>>, <think>
MARKER = re.compile(r"<\|[^|\s<>]{1,40}\|>|</?(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>"
                    r"|</?think>")
# a default system prompt: `{% set default_system_message = '...' %}` (or any variable
# named *system*), else the first "You are ..." literal
SET_SYSTEM = re.compile(r"set\s+\w*system\w*\s*=\s*(['\"])(.+?)(?<!\\)\1", re.S)
YOU_ARE = re.compile(r"(['\"])(You are .+?)(?<!\\)\1", re.S)
SHOWN = 80  # characters of a line or prompt shown in a message


@dataclass(frozen=True)
class Trained:
    """What the draft's folder says about its training template: the template where one is
    recorded (`label` says where), else why it cannot be known."""

    template: ChatTemplate | None
    label: str = ""
    why: str = ""


@dataclass
class TemplateCheck:
    """The comparison: a finding where the templates differ, and always the report's
    `chat template:` line (`note`) and its facts for --json."""

    findings: list[Finding]
    note: str
    facts: dict


def check_chat_template(trained: Trained, target: ChatTemplate | None) -> TemplateCheck:
    t = trained.template
    facts = {"trained": _facts(t, trained.label), "target": _facts(target, None)}
    if t is None:
        label = (f"{target.where} (sha256 {target.hash})" if target is not None
                 else "none (the server applies only what --chat-template names)")
        return TemplateCheck([], messages.CHAT_TEMPLATE_UNRECORDED.format(
            why=trained.why, target=label), {**facts, "state": "not recorded"})
    if target is None:
        return TemplateCheck([], messages.CHAT_TEMPLATE_TARGET_NONE.format(
            trained=trained.label, trained_hash=t.hash), {**facts, "state": "target has none"})
    if same(t, target):
        return TemplateCheck([], messages.CHAT_TEMPLATE_SAME.format(
            trained=trained.label, target=target.where, hash=target.hash),
            {**facts, "state": "same"})
    diff = differences(t.text, target.text)
    finding = Finding(signals.CHAT_TEMPLATE_MISMATCH, WARNING,
                      messages.CHAT_TEMPLATE_DIFFERS.render(
                          trained=trained.label, trained_hash=t.hash, target=target.where,
                          target_hash=target.hash, differences=describe(diff)),
                      {**facts, **diff})
    return TemplateCheck([finding], f"differs from the target's: {finding.code} below",
                         {**facts, "state": "differs"})


def _facts(t: ChatTemplate | None, label: str | None) -> dict | None:
    return None if t is None else {"from": label or t.where, "sha256_12": t.hash}


def differences(trained: str, target: str) -> dict:
    """Where two templates part: the first differing line (1-based, both sides), the
    markers only one of them has, and each one's default system prompt where it states
    one."""
    a, b = trained.strip().splitlines(), target.strip().splitlines()
    line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    out: dict = {"first_line": line + 1,
                 "trained_line": a[line] if line < len(a) else None,
                 "target_line": b[line] if line < len(b) else None}
    ma, mb = markers(trained), markers(target)
    out["markers_only_trained"] = sorted(ma - mb)
    out["markers_only_target"] = sorted(mb - ma)
    sa, sb = system_prompt(trained), system_prompt(target)
    if sa != sb:
        out["system_prompt_trained"], out["system_prompt_target"] = sa, sb
    return out


def describe(d: dict) -> str:
    def cut(s):
        if s is None:
            return "(none)"
        return repr(s if len(s) <= SHOWN else s[:SHOWN] + "...")
    parts = [f"first difference at line {d['first_line']}: trained {cut(d['trained_line'])}, "
             f"target {cut(d['target_line'])}"]
    if d["markers_only_trained"] or d["markers_only_target"]:
        parts.append(f"role markers only in the trained one: "
                     f"{', '.join(d['markers_only_trained']) or 'none'}; only in the "
                     f"target's: {', '.join(d['markers_only_target']) or 'none'}")
    if "system_prompt_trained" in d:
        parts.append(f"default system prompt: trained {cut(d['system_prompt_trained'])}, "
                     f"target {cut(d['system_prompt_target'])}")
    return "; ".join(parts)


def markers(text: str) -> set[str]:
    return {m.group(0) for m in MARKER.finditer(text)}


def system_prompt(text: str) -> str | None:
    m = SET_SYSTEM.search(text) or YOU_ARE.search(text)
    return m.group(2) if m else None
