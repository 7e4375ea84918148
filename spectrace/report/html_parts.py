"""The pieces every table of the HTML page is made of (`html`, `html_speculation`): JSON-safe
numbers, escaped text, cells that carry the figure's `--json` key and exact value."""
from __future__ import annotations

import html
import math
import time


def _finite(v, digits: int | None = None):
    """A JSON-safe number (None for non-finite), rounded for the page's chart data."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return round(v, digits) if digits is not None and isinstance(v, float) else v


def _utc(t) -> str:
    t = _finite(t)
    if t is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + " UTC"
    except (OverflowError, OSError, ValueError):
        return "-"


def _ratio(v) -> str:
    return "-" if _finite(v) is None else f"{v:.2f}"


def _e(v) -> str:
    return html.escape("-" if v is None else str(v))


def _cell(value, key: str | None, text: str | None = None) -> str:
    """A table cell; `data-key` names the figure in `spectrace report --json`, `data-value`
    holds it exactly (the text may be rounded)."""
    attrs = ""
    if key is not None:
        attrs = f' data-key="{_e(key)}"'
        if _finite(value) is not None:
            attrs += f' data-value="{_e(repr(value))}"'
    return f"<td{attrs}>{_e(text if text is not None else value)}</td>"


def _table(caption: str, head: list[str], rows: list[str], cls: str = "") -> str:
    if not rows:
        return ""
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (f'<div class="table {cls}"><table><caption>{_e(caption)}</caption>'
            f"<thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
