"""A finding's words: `Message`, its code, its text and its fix, as `str.format` templates
over named facts."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    code: str
    text: str      # what is wrong and what it does, with {named} facts
    fix: str = ""  # how to fix it (rendered after "Fix: ")

    def render(self, **facts) -> str:
        text = self.text.format(**facts)
        if not self.fix:
            return text
        fix = f"Fix: {self.fix.format(**facts)}"
        return f"{text} {fix}" if text else fix
