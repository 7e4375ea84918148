#!/usr/bin/env python3
"""Fetch the released SGLang and vLLM sources the `sources` tests read (the wrap-point and
loader-fact tests), once, into `$SPECTRACE_WHEEL_CACHE` (default `~/.cache/spectrace-wheels`):
SGLang's wheels (a few MB each) and vLLM's source distributions (10 – 50 MB each), about
0.5 GB downloaded (1.2 GB with the unpacked vLLM files; about 5 minutes). Releases already
there are not fetched again. The list is `tests/release_sources.RELEASES`; scripts/test.sh
runs this before pytest.

    python scripts/fetch_release_sources.py            # fetch what is missing
    python scripts/fetch_release_sources.py --check    # only say what is missing (exit 1)
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests import release_sources as rs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="fetch nothing; exit 1 if a release is missing")
    args = parser.parse_args(argv)
    missing = [(p, v) for p, versions in rs.RELEASES.items() for v in versions
               if not rs.is_cached(p, v)]
    if args.check:
        for p, v in missing:
            print(f"missing: {p} {v}")
        print(f"release sources in {rs.cache_dir()}: "
              + (f"{len(missing)} missing" if missing else "all present"))
        return 1 if missing else 0
    for n, (p, v) in enumerate(missing, 1):
        print(f"fetching {p} {v} ({n}/{len(missing)}) into {rs.cache_dir()}", flush=True)
        try:
            rs.fetch(p, v)
        except Exception as exc:  # noqa: BLE001  (one line, then stop)
            print(f"error: could not fetch {p} {v}: {exc}", file=sys.stderr)
            return 1
    total = sum(len(v) for v in rs.RELEASES.values())
    print(f"release sources ready: {total} releases in {rs.cache_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
