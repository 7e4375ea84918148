"""What a draft's folder records about the chat template it was trained with, by trainer
(read from their sources: docs/doctor.md "Chat template"):

- any trainer: a tokenizer saved with the draft (`chat_template.jinja`, or `chat_template`
  in `tokenizer_config.json`): the template itself;
- speculators: `speculators_config.verifier.name_or_path`, the verifier its data was
  rendered for (with that verifier's own template): read when it is a folder here;
- SpecForge, Model Optimizer, EAGLE: nothing next to the exported draft.

The judging is `doctor.judge.chat_templates`; here only the reading.
"""
from __future__ import annotations

from pathlib import Path

from ... import messages
from ...chat_template import ChatTemplate, TemplateError, read_template
from ..errors import UnusableInput
from ..judge.chat_templates import Trained


def read(directory: Path) -> ChatTemplate | None:
    """A folder's chat template; an unreadable template file is unusable input."""
    try:
        return read_template(directory)
    except TemplateError as e:
        raise UnusableInput(str(e)) from None


def trained_template(draft_dir: Path, config: dict, fmt: str) -> Trained:
    own = read(draft_dir)
    if own is not None:
        return Trained(own, f"the draft folder's {own.where}")
    if fmt == "speculators":
        return _verifier(config)
    return Trained(None, why=messages.TEMPLATE_UNRECORDED.get(
        fmt, messages.TEMPLATE_UNRECORDED["other"]))


def _verifier(config: dict) -> Trained:
    spec = config.get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    if isinstance(name, str) and name and Path(name).is_dir():
        t = read(Path(name))
        if t is not None:
            return Trained(t, f"the {t.where} of the verifier it was trained for ({name})")
        state = "that verifier's folder carries no chat template"
    elif isinstance(name, str) and name:
        state = "that is not a folder here (a hub id, or another machine's path), so its " \
                "template cannot be read"
    else:
        state = "the config names no verifier"
    return Trained(None, why=messages.TEMPLATE_UNRECORDED["speculators"].format(
        verifier=name, verifier_state=state))
