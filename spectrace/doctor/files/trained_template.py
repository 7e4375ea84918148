"""What a draft's folder records about the chat template it was trained with, by trainer
(read from their sources: docs/doctor.md "Chat template"):

- any trainer: a tokenizer saved with the draft (`chat_template.jinja`, or `chat_template`
  in `tokenizer_config.json`): the template itself;
- speculators: `speculators_config.verifier.name_or_path`, the verifier its data was
  rendered for (with that verifier's own template): read when it is a folder here;
- SpecForge 0.1.x: `training_state.pt` beside each saved draft pickles the training
  `args` (`chat_template`, the registry template's name; `target_model_path`, whose
  tokenizer's template rendered the data): read with the restricted loader (`pickled`);
- SpecForge 0.2.0, Model Optimizer, EAGLE: nothing next to the exported draft.

The judging is `doctor.judge.chat_templates`; here only the reading.
"""
from __future__ import annotations

from pathlib import Path

from ... import messages
from ...chat_template import ChatTemplate, TemplateError, read_template
from ..errors import UnusableInput
from ..judge.chat_templates import Trained
from . import pickled

SPECFORGE_STATE = "training_state.pt"  # SpecForge's (0.1.x: with the training args)


def read(directory: Path) -> ChatTemplate | None:
    """A folder's chat template; an unreadable template file is unusable input."""
    try:
        return read_template(directory)
    except TemplateError as e:
        raise UnusableInput(str(e)) from None


def _other(directory: Path) -> tuple[ChatTemplate | None, str]:
    """The template of a folder a record names (not an input of this run): an unreadable
    one is said, not unusable input."""
    try:
        t = read_template(directory)
    except TemplateError as e:
        return None, f"its template cannot be read ({e})"
    return t, "that folder carries no chat template"


def trained_template(draft_dir: Path, config: dict, fmt: str) -> Trained:
    own = read(draft_dir)
    if own is not None:
        return Trained(own, f"the draft folder's {own.where}")
    if fmt == "speculators":
        return _verifier(config)
    if fmt == "specforge" and (draft_dir / SPECFORGE_STATE).is_file():
        return _specforge_args(draft_dir / SPECFORGE_STATE)
    return Trained(None, why=messages.TEMPLATE_UNRECORDED.get(
        fmt, messages.TEMPLATE_UNRECORDED["other"]))


def _verifier(config: dict) -> Trained:
    spec = config.get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    if isinstance(name, str) and name and Path(name).is_dir():
        t, state = _other(Path(name))
        if t is not None:
            return Trained(t, f"the {t.where} of the verifier it was trained for ({name})")
    elif isinstance(name, str) and name:
        state = "that is not a folder here (a hub id, or another machine's path), so its " \
                "template cannot be read"
    else:
        state = "the config names no verifier"
    return Trained(None, why=messages.TEMPLATE_UNRECORDED["speculators"].format(
        verifier=name, verifier_state=state))


def _specforge_args(state: Path) -> Trained:
    """SpecForge renders the data with the target tokenizer's own template (data/parse.py),
    and takes from its registry template (`--chat-template`) the system prompt it adds
    where a conversation has none and the markers of the loss spans."""
    args, why = pickled.training_args(str(state))
    if args is None:
        return Trained(None, why=f"{state.name} is there, but {why}.")
    name, target = args.get("chat_template"), args.get("target_model_path")
    if isinstance(target, str) and target and Path(target).is_dir():
        t, state_of = _other(Path(target))
        if t is not None:
            return Trained(t, f"the {t.where} of the target it was trained with "
                              f"({state.name} args.target_model_path {target}; "
                              f"--chat-template {name!r})")
    else:
        state_of = "that is not a folder here, so its template cannot be read"
    return Trained(None, why=f"SpecForge's {state.name} records --chat-template {name!r} and "
                             f"target_model_path {target!r}, whose tokenizer's template "
                             f"rendered the training data, but {state_of}. Serve with the "
                             f"system prompt of SpecForge's {name!r} registry template.")
