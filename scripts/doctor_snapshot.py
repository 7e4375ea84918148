"""Run `spectrace doctor` over every checkpoint the doctor's tests build and write what it
says, in one canonical file: text and `--json` reports, and with `--fix` the plan's output
(text and JSON) and the copy it writes (config.json, file list, each tensor's header entry
and a hash of its bytes). Run it before and after a change to the doctor: the two files
must be identical (issue 19: behaviour unchanged).

    PYTHONPATH=. python scripts/doctor_snapshot.py OUT_FILE

The checkpoints come from the same tables and writers as the tests: every trainer format
(`harness.checkpoint_formats`), fault and runtime version of tests/test_doctor_formats.py,
the planted faults and bad inputs of tests/test_doctor.py, and the `partial` drafts of
tests/test_doctor_fix_e2e.py. Paths are written as `<TMP>`, timings as `<s>`.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from harness import checkpoint_formats as cf
from harness.tiny_models import DV, H, L, V, draft_config
from spectrace.cli import main as spectrace_main
from spectrace.doctor.files.safetensors_header import parse_header
from tests import test_doctor as td
from tests import test_doctor_formats as tf

SG, SG8, SG16, VL, VL22 = tf.SG, tf.SG8, tf.SG16, tf.VL, tf.VL22
SG_VERSIONS = ("sglang==0.5.5", "sglang==0.5.8", "sglang==0.5.11", "sglang==0.5.12",
               "sglang==0.5.16", SG, None)


# -- the faults of tests/test_doctor.py (written there inline, one per test) ----------------
def _set(key, value):
    def f(cfg, sd):
        sd[key] = value() if callable(value) else value
    return f


def _delete(key):
    def f(cfg, sd):
        del sd[key]
    return f


def _ids(ids):
    def f(cfg, sd):
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(ids)
    return f


def _d2t_at(index, value, dtype=torch.int64):
    def f(cfg, sd):
        d2t = torch.zeros(DV, dtype=dtype)
        d2t[index] = value
        sd["d2t"] = d2t
    return f


def _renamed_post_norm(cfg, sd):
    sd["midlayer.post_attn_layernorm.weight"] = sd.pop("midlayer.post_attention_layernorm.weight")


def _shared_lm_head(cfg, sd):
    cfg["draft_vocab_size"] = None
    del sd["lm_head.weight"]
    sd["d2t"] = torch.zeros(V, dtype=torch.int64)


def _target_hidden_64(cfg, sd):
    cfg["target_hidden_size"] = 64


def _two_aux(cfg, sd):
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 1]
    sd["fc.weight"] = torch.zeros(H, 2 * H, dtype=torch.bfloat16)


def _two_layers(cfg, sd):
    cfg["num_hidden_layers"] = 2
    for k in [k for k in sd if k.startswith("midlayer.")]:
        v = sd[k]
        if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
            v = v[:, :H]
        sd["layers.1." + k.removeprefix("midlayer.")] = v.clone()


def _leftover(cfg, sd):
    sd["optimizer.step"] = torch.zeros(1)


def _fc_norm_input_norm(cfg, sd):
    cfg.update(fc_norm=True, num_aux_hidden_states=3)
    cfg["eagle_config"]["norm_before_fc"] = True
    for j in range(3):
        sd[f"fc_norm.{j}.weight"] = torch.ones(H, dtype=torch.bfloat16)
    sd["input_norm.weight"] = torch.ones(3 * H, dtype=torch.bfloat16)


SPECFORGE_FAULTS = {
    "inv-freq": _set("midlayer.self_attn.rotary_emb.inv_freq", lambda: torch.ones(16)),
    "renamed-post-norm": _renamed_post_norm,
    "no-k-proj": _delete("midlayer.self_attn.k_proj.weight"),
    "shared-lm-head": _shared_lm_head,
    "no-d2t": _delete("d2t"),
    "d2t-arange": _set("d2t", lambda: torch.arange(DV, dtype=torch.int64)),
    "d2t-permuted": _set("d2t", lambda: torch.randperm(
        V, generator=torch.Generator().manual_seed(3))[:DV].to(torch.int64)),
    "d2t-past-vocab": _d2t_at(DV - 1, V),
    "d2t-negative": _d2t_at(3, -10),
    "d2t-duplicates": _d2t_at(1, -1),
    "d2t-int32": _d2t_at(5, 1000, torch.int32),
    "d2t-float": _set("d2t", lambda: torch.zeros(DV, dtype=torch.float32)),
    "d2t-short": _set("d2t", lambda: torch.zeros(DV - 1, dtype=torch.int64)),
    "target-hidden-64": _target_hidden_64,
    "fc-not-whole-layers": _set("fc.weight", lambda: torch.zeros(H, 3 * H + 8,
                                                                  dtype=torch.bfloat16)),
    "two-aux": _two_aux,
    "ids-past-target": _ids([0, 1, L - 1]),
    "ids-two": _ids([0, 1]),
    "lm-head-rows": _set("lm_head.weight", lambda: torch.zeros(DV - 56, H,
                                                                dtype=torch.bfloat16)),
    "two-layers": _two_layers,
    "leftover": _leftover,
    "fc-norm-input-norm": _fc_norm_input_norm,
    "extra-big-name": _set("extra.big", lambda: torch.zeros(4)),
}


# -- the extra cases of tests/test_doctor_formats.py -------------------------------------------
def _mistral(cfg, sd):
    cfg["transformer_layer_config"]["model_type"] = "mistral"


def _ascending(cfg, sd):
    sd["d2t"] = torch.arange(1, 2 * DV, 2, dtype=torch.int64)
    del sd["t2d"]


def _contradicted(cfg, sd):
    sd["d2t"] = torch.arange(2 * DV - 1, 0, -2, dtype=torch.int64)


def _past_the_vocab(cfg, sd):
    sd["d2t"] = torch.arange(300, 300 + DV, dtype=torch.int64)
    sd["t2d"] = (torch.arange(2 * V) >= 300) & (torch.arange(2 * V) < 300 + DV)


def _descending_short_t2d(cfg, sd):
    sd["d2t"] = torch.arange(2 * DV - 1, 0, -2, dtype=torch.int64)
    sd["t2d"] = torch.arange(V) < DV - 1


EXTRA = [  # (name, format, fault, target, runtimes)
    ("speculators-leftover", "speculators", _leftover, "llama", (VL, SG)),
    ("speculators-qwen3", "speculators", tf.qwen3_layer, "llama",
     (VL, VL22, tf.VL13, SG, SG8)),
    ("speculators-mistral", "speculators", _mistral, "llama", (VL, VL22, SG)),
    ("specforge-d2t-ascending-no-t2d", "specforge", _ascending, "llama", (SG, VL)),
    ("specforge-d2t-contradicted", "specforge", _contradicted, "llama", (SG,)),
    ("specforge-d2t-past-the-vocab", "specforge", _past_the_vocab, "llama", (SG,)),
    ("specforge-d2t-short-t2d", "specforge", _descending_short_t2d, "llama", (SG,)),
    ("speculators-dsv3", "speculators", None, "dsv3", (SG, VL)),
    ("specforge-on-dsv3", "specforge", None, "dsv3", (SG, SG16, VL)),
]
for _ids_, _target in (([1, 2, 3], "kimi"), ([0, 2, 3], "kimi"), ([0, 2, 3], "llama")):
    EXTRA.append((f"mla-ids-{_ids_}-{_target}", "mla", _ids(_ids_), _target, (SG, SG16, VL)))


# -- running the doctor ----------------------------------------------------------------------
class Snapshot:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.lines: list[str] = []
        self.n_fix = 0

    def canon(self, text: str) -> str:
        text = text.replace(str(self.tmp), "<TMP>")
        text = re.sub(r"bytes copied unchanged, \d+\.\d+ s\)", "bytes copied unchanged, <s> s)",
                      text)
        return re.sub(r'"seconds": [0-9.e-]+', '"seconds": "<s>"', text)

    def doctor(self, *args: str) -> None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = spectrace_main(["doctor", *map(str, args)])
            except SystemExit as e:  # argparse
                rc = e.code
        shown = [a if not a.startswith(str(self.tmp)) else self.canon(a) for a in map(str, args)]
        self.lines.append(f"$ spectrace doctor {' '.join(shown)}")
        self.lines.append(f"exit {rc}")
        if out.getvalue():
            self.lines.append(self.canon(out.getvalue().rstrip("\n")))
        if err.getvalue():
            self.lines.append("stderr: " + self.canon(err.getvalue().rstrip("\n")))

    def copy(self, out_dir: Path) -> None:
        """What --fix wrote: the files, config.json, each tensor's entry and bytes' hash."""
        if not out_dir.exists():
            self.lines.append("(nothing written)")
            return
        for f in sorted(out_dir.iterdir()):
            self.lines.append(f"written: {f.name}")
            if f.name.endswith(".json"):
                self.lines.append(f.read_text(encoding="utf-8").rstrip("\n"))
            elif f.suffix == ".safetensors":
                h = parse_header(f)
                with open(f, "rb") as fh:
                    for k, info in sorted(h.tensors.items()):
                        fh.seek(h.data_start + info.begin)
                        digest = hashlib.sha256(fh.read(info.end - info.begin)).hexdigest()[:16]
                        self.lines.append(f"  {k} {info.dtype} {list(info.shape)} {digest}")
                self.lines.append(f"  metadata {json.dumps(h.metadata, sort_keys=True)}")

    def all_outputs(self, name: str, draft: Path, target: Path, runtime: str | None) -> None:
        self.lines.append(f"=== {name} [{runtime or 'default'}]")
        rt = ["--runtime", runtime] if runtime else []
        self.doctor(draft, "--target", target, *rt)
        self.doctor(draft, "--target", target, *rt, "--json")
        for fmt in ((), ("--json",)):
            self.n_fix += 1
            out = self.tmp / f"fixed-{self.n_fix}"
            self.doctor(draft, "--target", target, *rt, "--fix", out, *fmt)
            self.copy(out)
            shutil.rmtree(out, ignore_errors=True)


def case_dir(tmp: Path, name: str, runtime: str | None) -> Path:
    d = tmp / re.sub(r"[^\w.=-]+", "_", f"{name}-{runtime or 'default'}")
    d.mkdir(parents=True)
    return d


def write_target(d: Path, cfg: dict) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def run(out_file: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="doctor-snapshot-") as t:
        tmp = Path(t).resolve()
        snap = Snapshot(tmp)

        def formats_case(name, fmt, fault, target, runtime, mode="random"):
            d = case_dir(tmp, name, runtime)
            draft, tgt = tf.write(d, fmt, fault, mode=mode, target=target)
            snap.all_outputs(name, draft, tgt, runtime)

        for fmt, target, runtime in tf.HEALTHY:
            formats_case(f"healthy-{fmt}-{target}", fmt, None, target, runtime)
        for fmt in cf.FORMATS:  # every format on every runtime
            target = {"mla": "kimi", "eagle": "deep"}.get(fmt, "llama")
            for runtime in (SG, SG8, "sglang==0.5.12", "sglang==0.5.16", VL, VL22, tf.VL13,
                            tf.VL11, "sglang==0.6.1", "vllm==0.40.0", "sglang==0.4.10"):
                formats_case(f"format-{fmt}-{target}", fmt, None, target, runtime)
        for case, fmt, fault, target, runtime, _codes, _fixable in tf.FAULTS:
            for rt in dict.fromkeys((runtime, SG, VL)):
                formats_case(case, fmt, fault, target, rt)
        for name, fmt, fault, target, runtimes in EXTRA:
            for runtime in runtimes:
                formats_case(name, fmt, fault, target, runtime)
        # tests/test_doctor_fix_e2e.py: the partial drafts it serves
        for name, fmt, fault in (("e2e-d2t-absolute", "specforge", tf.d2t_arange),
                                 ("e2e-capture-off", "specforge", tf.capture_off),
                                 ("e2e-speculators", "speculators", None),
                                 ("e2e-modelopt-0.41", "modelopt-0.41", None),
                                 ("e2e-eagle", "eagle", None)):
            formats_case(name, fmt, fault, "deep" if fmt == "eagle" else "llama", SG, "partial")

        def both_faults(cfg, sd):
            tf.capture_off(cfg, sd)
            tf.d2t_arange(cfg, sd)
        for name, fault in (("e2e-mla-prefixed", tf.mla_hf_prefix),
                            ("e2e-mla-d2t-capture-off", both_faults)):
            formats_case(name, "mla", fault, "dsv3", SG, "partial")

        # tests/test_doctor.py: the generator's drafts, its modes and planted faults
        for mode in ("random", "partial", "full", "bypass"):
            for layout in ("midlayer", "layers"):
                for runtime in SG_VERSIONS:
                    d = case_dir(tmp, f"tiny-{mode}-{layout}", runtime)
                    draft = td.write_draft(d / "draft", draft_config(mode),
                                           td.state_dict(mode, layout))
                    snap.all_outputs(f"tiny-{mode}-{layout}", draft,
                                     write_target(d / "target", td.TARGET), runtime)
        for name, fault in SPECFORGE_FAULTS.items():
            for runtime in SG_VERSIONS + (VL, VL22, tf.VL11):
                d = case_dir(tmp, f"fault-{name}", runtime)
                cfg, sd = draft_config("random"), td.state_dict()
                fault(cfg, sd)
                draft = td.write_draft(d / "draft", cfg, sd)
                snap.all_outputs(f"fault-{name}", draft, write_target(d / "target", td.TARGET),
                                 runtime)
        # a sharded checkpoint with an index (test_fix_keeps_shards_and_rewrites_the_index)
        d = case_dir(tmp, "sharded-modelopt", SG8)
        cfg, sd = cf.modelopt("random")
        (d / "draft").mkdir()
        (d / "draft" / "config.json").write_text(json.dumps(cfg))
        from safetensors.torch import save_file
        keys = sorted(sd)
        parts = {"model-00001-of-00002.safetensors": keys[::2],
                 "model-00002-of-00002.safetensors": keys[1::2]}
        for fname, ks in parts.items():
            save_file({k: sd[k].contiguous() for k in ks}, str(d / "draft" / fname))
        (d / "draft" / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": 0}, "weight_map": {k: n for n, ks in parts.items()
                                                            for k in ks}}))
        (d / "draft" / "tokenizer.json").write_text("{}")
        tgt = write_target(d / "target", tf.LLAMA)
        for runtime in (SG8, SG, VL):
            snap.all_outputs("sharded-modelopt", d / "draft", tgt, runtime)
        # issue 33: a tied config, pickled .bin twins, the published drafts (check only: at
        # full size --fix would copy gigabytes)
        for runtime in (SG, SG8, VL, VL22):
            d = case_dir(tmp, "tied", runtime)
            draft = td.write_draft(d / "draft", td._tied(), td.state_dict())
            snap.all_outputs("tied", draft, write_target(d / "target", td.TARGET), runtime)
        for name, fault in (("healthy", None), ("d2t-arange", td._absolute_d2t)):
            for runtime in (SG, VL):
                d = case_dir(tmp, f"bin-{name}", runtime)
                cfg, sd = draft_config("random"), td.state_dict()
                if fault:
                    fault(cfg, sd)
                draft = td._bin_twin(d, cfg, sd, "draft")
                snap.all_outputs(f"bin-{name}", draft, write_target(d / "target", td.TARGET),
                                 runtime)
        from tests import test_doctor_published as tp
        from tests.published_drafts import PUBLISHED
        for i, p in enumerate(PUBLISHED):
            d = case_dir(tmp, f"published-{i}", None)
            draft, tgt = tp.write(d, p)
            for runtime in p.errors:
                snap.lines.append(f"=== published: {p.name} [{runtime}]")
                snap.doctor(draft, "--target", tgt, "--runtime", runtime)
            shutil.rmtree(d)
        # unusable input (tests/test_doctor.py BAD_INPUTS) and bad arguments
        for case in sorted(td.BAD_INPUTS):
            d = case_dir(tmp, f"bad-{case}", None)
            draft, target = td._healthy(d)
            bd, bt, _needle = td.BAD_INPUTS[case](draft, target)
            snap.lines.append(f"=== bad input: {case}")
            snap.doctor(bd, "--target", bt)
            snap.doctor(bd, "--target", bt, "--json")
        d = case_dir(tmp, "bad-args", None)
        draft, target = td._healthy(d)
        for args in (("--sglang-version", "banana"), ("--runtime", "tgi"),
                     ("--runtime", "vllm==x"), ("--runtime", "sglang>=0.5"),
                     ("--runtime", "vllm", "--sglang-version", "0.5.8"),
                     ("--fix", draft), ("--fix", draft / "sub"), ("--fix", d)):
            snap.lines.append(snap.canon(f"=== bad arguments: {' '.join(map(str, args))}"))
            snap.doctor(draft, "--target", target, *args)
        out_file.write_text("\n".join(snap.lines) + "\n", encoding="utf-8")
        import spectrace
        print(f"{out_file}: {len(snap.lines)} lines, "
              f"{sum(1 for x in snap.lines if x.startswith('$ '))} doctor runs, spectrace from "
              f"{Path(spectrace.__file__).parent}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/doctor_snapshot.py OUT_FILE")
    run(Path(sys.argv[1]))
