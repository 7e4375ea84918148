"""The generated tables of docs/doctor.md: the config fields, from
`spectrace.doctor.judge.config_fields` (every row there is checked against the runtimes'
real draft classes by tests/test_doctor_config_fields.py, and the docs against this output
by the same module), and the codes, from their declarations
(`spectrace.doctor.judge.codes.DOCTOR_SPECS`; checked by tests/test_doctor_formats.py).

    python scripts/doctor_tables.py           # print the tables
    python scripts/doctor_tables.py --write   # rewrite them in docs/doctor.md
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from spectrace.doctor.judge import codes  # noqa: E402
from spectrace.doctor.judge import config_fields as cf  # noqa: E402
from spectrace.doctor.judge.loaders import DraftClass  # noqa: E402
from spectrace.runtimes import SGLANG, VLLM, Runtime  # noqa: E402

DOC = os.path.join(ROOT, "docs", "doctor.md")
BEGIN, END = "<!-- config-fields:begin -->", "<!-- config-fields:end -->"
CODES_BEGIN, CODES_END = "<!-- doctor-codes:begin -->", "<!-- doctor-codes:end -->"
TITLES = {DraftClass.LLAMA: "Llama draft", DraftClass.MLA: "MLA draft (Kimi-K2.x / DeepSeek)",
          DraftClass.QWEN3: "Qwen3 draft"}


def _value(fact: cf.FieldFact) -> str:
    sets = dict(fact.sets)
    if fact.field.startswith("eagle_config."):  # the one eagle_config field the row is about
        key = fact.field.split(".", 1)[1]
        sets = {fact.field: sets["eagle_config"][key]}
    return ", ".join(f"`{k}: {v!r}`".replace("None", "null").replace("True", "true")
                     .replace("False", "false").replace("'", '"') for k, v in sets.items())


def _cell(fact: cf.FieldFact | None) -> str:
    if fact is None:
        return "–"
    shown = [c.replace("model.layers.", "layers.").replace("model.", "") for c in fact.changes]
    if len(shown) > 4:
        shown = shown[:3] + [f"+{len(shown) - 3} more"]
    real = f" <sub>{', '.join(shown)}</sub>" if shown and fact.part != cf.Part.REFUSED else ""
    return f"**{fact.part}**: {fact.effect}{real}".replace("|", "\\|")


def table() -> str:
    lines = []
    for draft in (DraftClass.LLAMA, DraftClass.MLA, DraftClass.QWEN3):
        runtimes = [rt for rt in (SGLANG, VLLM) if (rt, draft) in cf.CLASSES]
        head = " | ".join(f"{Runtime(rt).label} {cf.VERIFIED[rt]} `{cf.CLASSES[rt, draft]}`"
                          for rt in runtimes)
        lines += [f"{TITLES[draft]}:", "",
                  f"| field | set to | {head} | the doctor |",
                  "|---" * (3 + len(runtimes)) + "|"]
        fields: dict[str, dict] = {}
        for f in cf.FACTS:
            if f.draft == draft:
                fields.setdefault(f.field, {})[f.runtime] = f
        for name, by_rt in fields.items():
            any_fact = next(iter(by_rt.values()))
            doctor = next((f.doctor for f in by_rt.values() if f.doctor), "") or "–"
            cells = " | ".join(_cell(by_rt.get(rt)) for rt in runtimes)
            lines.append(f"| `{name}` | {_value(any_fact)} | {cells} | {doctor} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def codes_table() -> str:
    return "\n".join(codes.codes_table()) + "\n"


def _between(doc: str, begin: str, end: str, text: str) -> str:
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    return doc[:start] + "\n" + text + doc[stop:]


def replaced(doc: str) -> str:
    """`doc` with both generated tables written anew."""
    doc = _between(doc, BEGIN, END, table())
    return _between(doc, CODES_BEGIN, CODES_END, codes_table())


def main() -> None:
    if "--write" in sys.argv[1:]:
        with open(DOC, encoding="utf-8") as f:
            new = replaced(f.read())
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"wrote the config-field and code tables into {DOC}")
    else:
        print(table() + "\n" + codes_table(), end="")


if __name__ == "__main__":
    main()
