"""`spectrace doctor DRAFT_DIR --target TARGET [--runtime sglang[==V]|vllm[==V]]
[--vllm-runner default|v1|v2] [--dtype DTYPE] [--context-length TOKENS] [--json]
[--fix OUT_DIR]`.

Exit status: 0 no errors (warnings allowed; with --fix: the copy was written and has no
errors), 1 errors found (with --fix: refused, nothing written, or the copy still has
errors), 2 unusable input (one line on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..findings import ERROR, WARNING
from .check import (DoctorReport, judge_checkpoint, resolve_dtype, resolve_runner,
                    resolve_runtime)
from .errors import UnusableInput
from .files.checkpoint_files import read_checkpoint, read_target

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("draft_dir", metavar="DRAFT_DIR",
                        help="EAGLE-3 draft directory (config.json + *.safetensors)")
    parser.add_argument("--target", required=True, metavar="TARGET",
                        help="target model directory with config.json, or a config.json path")
    parser.add_argument("--runtime", default=None, metavar="RUNTIME[==VERSION]",
                        help="judge for this runtime's loader: sglang, sglang==0.5.8, vllm, "
                             "vllm==0.33.0 (default: the installed runtime when exactly one "
                             "is installed, else SGLang; its installed version, else the "
                             "newest known)")
    parser.add_argument("--sglang-version", default=None, metavar="VERSION",
                        help="same as --runtime sglang==VERSION")
    parser.add_argument("--vllm-runner", default=None, metavar="RUNNER",
                        help="vLLM's model runner the pair will run on: default (the one the "
                             "release takes for the target), v1 (VLLM_USE_V2_MODEL_RUNNER=0) "
                             "or v2 (VLLM_USE_V2_MODEL_RUNNER=1); vLLM only")
    parser.add_argument("--dtype", default=None, metavar="DTYPE",
                        help="the runtime's --dtype: auto (default), half, float16, bfloat16, "
                             "float, float32; SGLang runs the draft in it (auto: the draft "
                             "config's dtype, float32 as float16), vLLM in the target's")
    parser.add_argument("--context-length", type=int, default=None, metavar="TOKENS",
                        help="the context length the pair will be served at (default: the "
                             "target's max_position_embeddings, what both runtimes default to)")
    parser.add_argument("--fix", default=None, metavar="OUT_DIR",
                        help="write a corrected copy for that runtime into OUT_DIR (new or "
                             "empty; never in place), then check the copy")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        runtime, version, source = resolve_runtime(args.runtime, args.sglang_version)
        dtype = resolve_dtype(args.dtype)
        runner = resolve_runner(args.vllm_runner, runtime, version)
        ck = read_checkpoint(args.draft_dir)
        tgt = read_target(args.target, args.context_length)
        report = judge_checkpoint(ck, tgt, runtime, version, source, dtype, runner)
        result = None
        if args.fix is not None:
            from .write_copy import fix_checkpoint
            result = fix_checkpoint(ck, tgt, runtime, version, source, args.fix, dtype=dtype,
                                    runner=runner)
    except UnusableInput as e:
        print(f"spectrace doctor: {' '.join(str(e).splitlines())}", file=sys.stderr)
        return EXIT_UNUSABLE
    if args.json:
        out = report.to_dict()
        if result is not None:
            out["fix"] = fix_dict(result)
        print(json.dumps(out, indent=2))
    else:
        print(format_text(report))
        if result is not None:
            print(format_fix(result))
    return result.exit_status if result is not None else report.exit_status


def format_text(report: DoctorReport) -> str:
    j = report.judgement
    lines = [f"spectrace doctor: {report.draft['path']} against {report.target['config']}",
             f"  format: {j.format.title} ({j.format.evidence})",
             f"  judged for {report.runtime_label} (version: {report.version_source})"
             + (f" on the {report.runner} model runner (--vllm-runner)" if report.runner else "")
             + (f"; note: {j.loader.assumed}" if j.loader and j.loader.assumed else ""),
             f"  dtype: saved in {report.dtype.get('weights') or '?'}"
             f" (config: {report.dtype.get('config') or 'not stated'}), runs in "
             f"{report.dtype.get('runtime')}: {report.dtype.get('how')}"]
    if report.chat_template.get("note"):
        lines.append(f"  chat template: {report.chat_template['note']}")
    if report.draft.get("weights_read_with"):
        lines.append(f"  weights: {', '.join(report.draft['weight_files'])} (pickled) read with "
                     f"PyTorch's restricted loader {report.draft['weights_read_with']}: tensors "
                     f"and plain containers only, nothing in the file run")
    if j.translated:
        lines.append(f"  {report.runtime_label} cannot read this config as it is; the findings "
                     f"after config.unsupported are for the translation --fix writes")
    for f in report.findings:
        lines.append(f"{f.severity.upper():7} {f.code}: {f.message}")
    lines.append(summary(report))
    return "\n".join(lines)


def summary(report: DoctorReport) -> str:
    n_err = sum(f.severity == ERROR for f in report.findings)
    n_warn = sum(f.severity == WARNING for f in report.findings)
    return ("no problems found" if not report.findings else
            f"{n_err} error(s), {n_warn} warning(s), "
            f"{len(report.findings) - n_err - n_warn} note(s)")


def format_fix(result) -> str:
    plan = result.plan
    if plan.refusals:
        return "\n".join([f"--fix: refused, nothing written to {result.out_dir}:"]
                         + [f"  cannot fix: {r}" for r in plan.refusals])
    if not result.written:
        return f"--fix: nothing to change for this runtime; nothing written to {result.out_dir}"
    lines = [f"--fix: wrote {result.out_dir} ({len(plan.changes)} change(s), "
             f"{result.bytes_copied} bytes copied unchanged, {result.seconds:.2f} s):"]
    lines += [f"  {c.kind:6} {c.text}  [{c.addresses}]" for c in plan.changes]
    if result.converted:
        lines.append("  weights written as safetensors: " + ", ".join(
            f"{a} -> {b}" for a, b in result.converted.items()))
    check = result.check
    lines.append(f"--fix: the copy checked again for {check.runtime_label}"
                 + (f" on the {check.runner} model runner" if check.runner else "")
                 + f": {summary(check)}")
    lines += [f"{f.severity.upper():7} {f.code}: {f.message}" for f in check.findings]
    left = [f for f in check.findings if f.severity != ERROR]
    if left:
        lines.append("--fix: not changed in the copy (a launch option, the serving context or "
                     "the training decides them; each finding's Fix says what to do): "
                     + ", ".join(sorted({f.code for f in left})))
    return "\n".join(lines)


def fix_dict(result) -> dict:
    plan = result.plan
    return {"out_dir": str(result.out_dir), "written": result.written,
            "changes": [c.to_dict() for c in plan.changes], "refusals": plan.refusals,
            "renames": plan.renames, "dropped_keys": plan.drops,
            "d2t_rewritten": plan.d2t_offsets, "bytes_copied": result.bytes_copied,
            **({"converted": result.converted} if result.converted else {}),
            "seconds": round(result.seconds, 3),
            "check": result.check.to_dict() if result.check else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spectrace doctor", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
