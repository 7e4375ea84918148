"""The doctor's findings are declared once (`spectrace.doctor.judge.codes`): each code once,
with its highest severity and meaning; docs/doctor.md's table of codes is written from the
declarations; a finding with an unknown code or above its declared severity is caught
(`undeclared`, which the doctor's tests apply to every report they make)."""
from __future__ import annotations

import os
import sys

from spectrace.doctor.judge import codes
from spectrace.findings import ERROR, INFO, WARNING, Finding

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_each_code_is_declared_once_with_its_meaning():
    seen = [s.code for s in codes.DOCTOR_SPECS]
    assert len(seen) == len(set(seen)), sorted(c for c in seen if seen.count(c) > 1)
    assert all(s.what for s in codes.DOCTOR_SPECS)
    assert set(codes.ALSO_AT_RUN_TIME) <= set(codes.BY_CODE)


def test_undeclared_names_unknown_codes_and_higher_severities():
    info_only = next(s.code for s in codes.DOCTOR_SPECS if s.severity == INFO)
    warning = next(s.code for s in codes.DOCTOR_SPECS if s.severity == WARNING)
    assert codes.undeclared([Finding(info_only, INFO, "m"), Finding(warning, INFO, "m")]) == []
    assert codes.undeclared([Finding("doctor.new_check", ERROR, "m"),
                             Finding(info_only, WARNING, "m")]) == [
        "doctor.new_check: not declared", f"{info_only}: raised as warning, declared info"]


def test_the_docs_table_is_written_from_the_declarations():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import doctor_tables
    finally:
        sys.path.remove(os.path.join(ROOT, "scripts"))
    with open(os.path.join(ROOT, "docs", "doctor.md"), encoding="utf-8") as fh:
        doc = fh.read()
    start = doc.index(doctor_tables.CODES_BEGIN) + len(doctor_tables.CODES_BEGIN)
    table = doc[start:doc.index(doctor_tables.CODES_END)]
    assert table == "\n" + doctor_tables.codes_table(), \
        "run: python scripts/doctor_tables.py --write"
    for s in codes.DOCTOR_SPECS:
        assert f"### `{s.code}`" in doc, f"docs/doctor.md has no section for {s.code}"
