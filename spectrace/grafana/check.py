"""`spectrace grafana --check DIR`: what differs between a folder that `spectrace grafana`
wrote (maybe by an older version) and what this version writes with the same options, by
panel and by alert rule, so an upgrade says what it changes before it is deployed."""
from __future__ import annotations

import json
import os
import re
import shlex

from .files import DASHBOARD, RULES, WRITTEN_WITH

_RULE_START = re.compile(r"\s*- alert: *(.+?)\s*$")


def _panels_by_title(dashboard: dict) -> dict[str, dict]:
    return {p.get("title", f"id {p.get('id')}"): p for p in dashboard.get("panels", [])}


def _dashboard(path: str, have: str, want: str) -> list[str]:
    try:
        old = json.loads(have)
    except ValueError as exc:
        return [f"{path}: not valid JSON ({exc})"]
    if not isinstance(old, dict):
        return [f"{path}: not a Grafana dashboard (a JSON object)"]
    new = json.loads(want)
    out = []
    settings = sorted(k for k in old.keys() | new.keys()
                      if k != "panels" and old.get(k) != new.get(k))
    if settings:
        out.append(f"{path}: dashboard settings differ: {', '.join(settings)}")
    old_panels, new_panels = _panels_by_title(old), _panels_by_title(new)
    for title, panel in new_panels.items():
        if title not in old_panels:
            out.append(f"{path}: panel {title!r} is new in this version")
        elif old_panels[title] != panel:
            keys = sorted(k for k in old_panels[title].keys() | panel.keys()
                          if old_panels[title].get(k) != panel.get(k))
            out.append(f"{path}: panel {title!r} differs: {', '.join(keys)}")
    out += [f"{path}: panel {title!r} is not in this version" for title in old_panels
            if title not in new_panels]
    return out


def _rule_blocks(text: str) -> tuple[str, dict[str, str]]:
    """(the lines before the first rule, rule name -> its lines), read as this version
    writes the file (one `- alert: NAME` line opens each rule)."""
    head: list[str] = []
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = _RULE_START.match(line)
        if m:
            current = blocks.setdefault(m.group(1).strip("'\""), [])
        (head if current is None else current).append(line.rstrip())
    return "\n".join(head), {name: "\n".join(lines) for name, lines in blocks.items()}


def _rules(path: str, have: str, want: str) -> list[str]:
    old_head, old = _rule_blocks(have)
    new_head, new = _rule_blocks(want)
    out = []
    if old_head != new_head:
        out.append(f"{path}: the lines before the first rule differ (comments, group settings)")
    for name, block in new.items():
        if name not in old:
            out.append(f"{path}: rule {name} is new in this version")
        elif old[name] != block:
            out.append(f"{path}: rule {name} differs")
    out += [f"{path}: rule {name} is not in this version" for name in old if name not in new]
    return out


def written_with(folder: str) -> list[str] | None:
    """The options the folder's rule file says it was written with ([]: the defaults;
    None: no readable rule file)."""
    try:
        with open(os.path.join(folder, RULES), encoding="utf-8") as fh:
            head = _rule_blocks(fh.read())[0]
    except (OSError, UnicodeDecodeError):
        return None
    for line in head.splitlines():
        if line.startswith("# " + WRITTEN_WITH):
            try:
                return shlex.split(line[len("# " + WRITTEN_WITH):])
            except ValueError:
                return None
    return []


def differences(folder: str, expected: dict[str, str]) -> list[str]:
    """One line per difference between `folder` and `expected` (path -> text); [] when
    every file is as this version writes it. Files it does not write are not looked at."""
    out = []
    for path, want in expected.items():
        try:
            with open(os.path.join(folder, path), encoding="utf-8") as fh:
                have = fh.read()
        except FileNotFoundError:
            out.append(f"{path}: missing")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            out.append(f"{path}: cannot be read ({exc})")
            continue
        if have == want:
            continue
        if path in (DASHBOARD, RULES):
            found = (_dashboard if path == DASHBOARD else _rules)(path, have, want)
            out += found or [f"{path}: differs in layout or white space only"]
        else:
            out.append(f"{path}: differs")
    return out
