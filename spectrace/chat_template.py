"""A model directory's chat template as transformers loads it, and a short hash of it: what
the doctor compares (the draft's training template against the target's) and what the
server settings record (the template the server applies), so the two can be matched by
hash.

transformers (`PreTrainedTokenizerBase._from_pretrained`, 4.43+) gives `chat_template.jinja`
priority over `tokenizer_config.json`'s `chat_template`, which is a string or a list of
`{"name", "template"}` (the one named "default" is used unless a name is asked for, as
SGLang's `--hf-chat-template-name`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

JINJA_FILE = "chat_template.jinja"
TOKENIZER_CONFIG = "tokenizer_config.json"
MAX_TEMPLATE_BYTES = 4 << 20  # a chat template is a few kB; tokenizer_config.json < 1 MB


class TemplateError(ValueError):
    """A template file that cannot be read as one (the message names the file)."""


@dataclass(frozen=True)
class ChatTemplate:
    text: str
    where: str  # the file (and key) it was read from

    @property
    def hash(self) -> str:
        return short_hash(self.text)


def short_hash(text: str) -> str:
    """sha256 of the template text without its surrounding whitespace (a .jinja file ends
    with a newline, a JSON string usually not), first 12 hex digits: the doctor's and the
    server settings' hash of one template are the same."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def same(a: ChatTemplate, b: ChatTemplate) -> bool:
    """The same template, surrounding whitespace aside."""
    return a.text.strip() == b.text.strip()


def read_template(directory: str | Path, name: str | None = None) -> ChatTemplate | None:
    """The chat template of a model directory as transformers loads it; None when it has
    none. TemplateError for a file that is not readable as one."""
    d = Path(directory)
    jinja = d / JINJA_FILE
    if jinja.is_file() and name in (None, "default"):
        return ChatTemplate(_text(jinja), JINJA_FILE)
    tc = d / TOKENIZER_CONFIG
    if not tc.is_file():
        return None
    try:
        cfg = json.loads(_text(tc))
    except (ValueError, RecursionError) as e:
        raise TemplateError(f"{tc} is not valid JSON ({str(e).splitlines()[0]})") from None
    value = cfg.get("chat_template") if isinstance(cfg, dict) else None
    where = f"{TOKENIZER_CONFIG} chat_template"
    if isinstance(value, str):
        return ChatTemplate(value, where)
    if isinstance(value, list):
        wanted = name or "default"
        for t in value:
            if isinstance(t, dict) and t.get("name") == wanted and isinstance(
                    t.get("template"), str):
                return ChatTemplate(t["template"], f"{where} [{wanted!r}]")
    return None


def _text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_TEMPLATE_BYTES:
            raise TemplateError(f"{path} is {path.stat().st_size} bytes, too large for a "
                                f"chat template or tokenizer config (limit "
                                f"{MAX_TEMPLATE_BYTES})")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TemplateError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") \
            from None


def applied(argument: str | None, tokenizer_dir: str | None,
            name: str | None = None) -> dict:
    """The template a server applies to chat requests, as server settings:
    `chat_template` (its source: "argument FILE" for a `--chat-template` file, hashed as
    the file is; "argument NAME" for a template the runtime registers by name;
    "tokenizer"; or "none") and `chat_template_hash` where the text is known."""
    if argument:
        p = Path(argument)
        if p.is_file():
            return {"chat_template": f"argument {p.name}",
                    "chat_template_hash": short_hash(_text(p))}
        return {"chat_template": f"argument {argument}"}
    if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
        return {}  # a hub id not resolved to a folder here: not recorded
    own = read_template(tokenizer_dir, name)
    if own is None:
        return {"chat_template": "none"}
    return {"chat_template": "tokenizer", "chat_template_hash": own.hash}
