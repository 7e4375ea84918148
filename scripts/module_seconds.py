"""Write tests/module_seconds.json from a pytest JUnit XML file: each test module's seconds
(the sum of its tests' times, its module fixtures' included), which tests/schedule.py uses
to hand the longest server modules to the workers first.

    python scripts/module_seconds.py JUNIT_XML     # e.g. after scripts/test.sh --junitxml=F
"""
from __future__ import annotations

import collections
import json
import os
import sys
import xml.etree.ElementTree as ET

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                   "module_seconds.json")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    seconds: dict = collections.Counter()
    for case in ET.parse(sys.argv[1]).iter("testcase"):
        module = case.get("classname", "").split(".")
        if len(module) >= 2 and module[0] == "tests":
            seconds[f"tests/{module[1]}.py"] += float(case.get("time") or 0)
    with open(OUT, "w") as fh:
        json.dump({m: round(s, 1) for m, s in sorted(seconds.items())}, fh, indent=1)
        fh.write("\n")
    print(f"wrote {OUT}: {len(seconds)} modules, {sum(seconds.values()):.0f} s in all")


if __name__ == "__main__":
    main()
