"""YAML text for the rule and provisioning files, without a YAML library (spectrace installs
none): block mappings and sequences of strings, numbers, booleans and null. A string is
written plain only when it is a bare word no YAML reader takes for anything else; any other
in single quotes (a line of text: nothing inside is special but `'`, written twice), or in
double quotes with escapes when it holds a line break or another unprintable character."""
from __future__ import annotations

import math
import re

INDENT = "  "
# words, paths and URLs (a colon never last), durations
_BARE = re.compile(r"[A-Za-z_/]([A-Za-z0-9_./:-]*[A-Za-z0-9_./-])?|([0-9]+(ms|s|m|h|d|w|y))+")
# words that YAML 1.1 readers (PyYAML, Prometheus' and Grafana's Go readers) turn into a
# boolean or null
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        # YAML 1.1 reads 1e-05 as a string: its floats need the dot
        return text if "." in text or "e" not in text else text.replace("e", ".0e", 1)
    if not isinstance(value, str):
        raise TypeError(f"yamltext: cannot write a {type(value).__name__} ({value!r})")
    if _BARE.fullmatch(value) and value.lower() not in _SPECIAL:
        return value
    if value.isprintable():
        return "'" + value.replace("'", "''") + "'"
    return _double_quoted(value)


def _double_quoted(text: str) -> str:
    """Every character but printable ASCII as a YAML escape (line breaks, control and
    other characters that YAML readers reject or fold)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _lines(value, indent: str) -> list[str]:
    """`value` (a mapping or sequence) as block lines, each starting with `indent`."""
    out = []
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for key, item in items:
        head = f"{indent}{scalar(key)}:" if isinstance(value, dict) else f"{indent}-"
        if isinstance(item, (dict, list)) and item:
            inner = _lines(item, indent + INDENT)
            if isinstance(value, dict):
                out += [head, *inner]
            else:  # a sequence item's first line goes on the dash's line
                out += [f"{head} {inner[0].lstrip()}", *inner[1:]]
        elif isinstance(item, (dict, list)):
            out.append(f"{head} {'{}' if isinstance(item, dict) else '[]'}")
        else:
            out.append(f"{head} {scalar(item)}")
    return out


def dump(value: dict) -> str:
    """`value` as a YAML document (keys in their order)."""
    return "\n".join(_lines(value, "")) + "\n"
