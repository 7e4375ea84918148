"""`spectrace-run [--exporters ...] -- COMMAND ...`: run a command with spectrace on in
every Python process it starts (in the style of `opentelemetry-instrument`).

It only sets `SPECTRACE_ENABLED=1` (plus the options given) and execs the command; the
installed start-up hook does the rest in each process, SGLang's and vLLM's spawned ones
included.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

from . import config


def build_env(opts: dict, environ: dict) -> dict:
    env = dict(environ)
    env["SPECTRACE_ENABLED"] = "1"
    cfg = config.from_env(env, **{k: v for k, v in opts.items() if v is not None})
    env.update(config.to_env(cfg))
    env["SPECTRACE_ENABLED"] = "1"
    return env


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="spectrace-run", description=__doc__.splitlines()[0])
    p.add_argument("--exporters", help="comma list of file, otlp, prometheus, console")
    p.add_argument("--output-dir")
    p.add_argument("--strict", action="store_true", default=None)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no command given: spectrace-run -- python -m sglang.launch_server ...")
    try:
        env = build_env({"exporters": a.exporters, "output_dir": a.output_dir,
                         "strict": a.strict}, os.environ)
    except config.ConfigError as exc:
        print(f"spectrace-run: {exc}", file=sys.stderr)
        return 2
    exe = shutil.which(cmd[0], path=env.get("PATH"))
    if exe is None:
        print(f"spectrace-run: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    os.execvpe(exe, cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
