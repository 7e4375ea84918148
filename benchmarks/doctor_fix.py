"""What `spectrace doctor` and `--fix` cost on a large draft: check time (target: under a
second, independent of the checkpoint's size) and the peak RSS of `--fix` (target: a
small constant, not the checkpoint's size), for a ~2 GB and a tiny checkpoint.

The large checkpoint is a Llama-3-8B-shaped EAGLE-3 draft in SpecForge's layout (hidden
4096, intermediate 14336, vocab 128256 with its embeddings, draft vocab 64000), 2.16 GB
of bf16 tensors plus `d2t` stored as absolute ids and `t2d` (so `--fix` has something to
do: it rewrites `d2t` and copies every other tensor). It is written as a *sparse* file:
the header, `d2t` and `t2d` are real bytes, the weights are holes that read as zeros. The
doctor reads exactly what it reads on a real file (header, d2t, t2d); `--fix` reads every
byte of every tensor and writes a non-sparse 2.16 GB copy, as it would for real weights
(reads from holes are faster than from a disk, so the copy time is a lower bound; the
memory figure is what this measures). Everything is deleted afterwards.

    python benchmarks/doctor_fix.py [--dir DIR] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = dict(hidden=4096, inter=14336, vocab=128256, draft_vocab=64000, heads=32, kv_heads=8)
SMALL = dict(hidden=128, inter=256, vocab=512, draft_vocab=256, heads=4, kv_heads=2)


def draft_tensors(hidden, inter, vocab, draft_vocab, heads, kv_heads):
    hd = hidden // heads
    t = {"embed_tokens.weight": ("BF16", [vocab, hidden]),
         "fc.weight": ("BF16", [hidden, 3 * hidden]), "norm.weight": ("BF16", [hidden]),
         "lm_head.weight": ("BF16", [draft_vocab, hidden]),
         "d2t": ("I64", [draft_vocab]), "t2d": ("BOOL", [vocab])}
    for k, shape in (("self_attn.q_proj.weight", [heads * hd, 2 * hidden]),
                     ("self_attn.k_proj.weight", [kv_heads * hd, 2 * hidden]),
                     ("self_attn.v_proj.weight", [kv_heads * hd, 2 * hidden]),
                     ("self_attn.o_proj.weight", [hidden, heads * hd]),
                     ("mlp.gate_proj.weight", [inter, hidden]),
                     ("mlp.up_proj.weight", [inter, hidden]),
                     ("mlp.down_proj.weight", [hidden, inter]),
                     ("hidden_norm.weight", [hidden]), ("input_layernorm.weight", [hidden]),
                     ("post_attention_layernorm.weight", [hidden])):
        t["midlayer." + k] = ("BF16", shape)
    return t


def write_checkpoint(d: str, dims: dict) -> tuple[str, str, int]:
    """(draft dir, target dir, bytes of tensor data): a sparse safetensors file."""
    size = {"BF16": 2, "I64": 8, "BOOL": 1}
    tensors = draft_tensors(**dims)
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = size[dtype]
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    draft, target = os.path.join(d, "draft"), os.path.join(d, "target")
    os.makedirs(draft)
    os.makedirs(target)
    start = 8 + len(raw)
    with open(os.path.join(draft, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(start + offset)  # holes: the weights read as zeros
        dv = dims["draft_vocab"]
        f.seek(start + header["d2t"]["data_offsets"][0])
        f.write(struct.pack(f"<{dv}q", *range(dv)))  # absolute ids: what --fix rewrites
        f.seek(start + header["t2d"]["data_offsets"][0])
        f.write(b"\x01" * dv)
    h = dims["hidden"]
    common = dict(hidden_size=h, intermediate_size=dims["inter"], vocab_size=dims["vocab"],
                  num_attention_heads=dims["heads"], num_key_value_heads=dims["kv_heads"],
                  model_type="llama", rms_norm_eps=1e-5, tie_word_embeddings=False)
    with open(os.path.join(draft, "config.json"), "w") as f:
        json.dump(dict(common, architectures=["LlamaForCausalLMEagle3"], num_hidden_layers=1,
                       draft_vocab_size=dims["draft_vocab"], eagle_config={
                           "eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                           "use_aux_hidden_state": True}), f)
    with open(os.path.join(target, "config.json"), "w") as f:
        json.dump(dict(common, architectures=["LlamaForCausalLM"], num_hidden_layers=32), f)
    return draft, target, offset


PROBE = """
import json, resource, sys, time
t0 = time.perf_counter()
from spectrace.doctor import cli
rc = cli.main(sys.argv[1:])
print(json.dumps({"rc": rc, "wall_s": time.perf_counter() - t0,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
      file=sys.stderr)
"""


def run(args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                       env=env, timeout=3600)
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    stats["stdout"] = p.stdout
    return stats


def check_time(draft: str, target: str, repeat: int = 5) -> float:
    """The check itself, in this process (imports done): best of `repeat`."""
    sys.path.insert(0, ROOT)
    from spectrace.doctor import check_checkpoint
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        check_checkpoint(draft, target, "sglang==0.5.23")
        best = min(best, time.perf_counter() - t0)
    return best


def measure(label: str, d: str, dims: dict) -> dict:
    draft, target, nbytes = write_checkpoint(d, dims)
    check = run([draft, "--target", target, "--runtime", "sglang==0.5.23", "--json"])
    assert check["rc"] == 1 and "vocab.d2t_absolute" in check["stdout"], check
    fixed = run([draft, "--target", target, "--runtime", "sglang==0.5.23", "--fix",
                 os.path.join(d, "fixed"), "--json"])
    assert fixed["rc"] == 0, fixed
    fix = json.loads(fixed["stdout"])["fix"]
    out = {"checkpoint": label, "tensor_bytes": nbytes,
           "check_s_in_process": round(check_time(draft, target), 4),
           "check_cli_wall_s": round(check["wall_s"], 3),
           "check_cli_peak_rss_mib": round(check["peak_rss_mib"], 1),
           "fix_cli_wall_s": round(fixed["wall_s"], 3),
           "fix_copy_s": fix["seconds"], "fix_bytes_copied": fix["bytes_copied"],
           "fix_peak_rss_mib": round(fixed["peak_rss_mib"], 1),
           "copy_size_bytes": os.path.getsize(os.path.join(d, "fixed", "model.safetensors"))}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    a = p.parse_args()
    base = tempfile.mkdtemp(prefix="spectrace-doctor-bench-", dir=a.dir)
    try:
        rows = [measure("tiny (H=128)", os.path.join(base, "small"), SMALL),
                measure("Llama-3-8B-shaped draft, 2.16 GB", os.path.join(base, "big"), BIG)]
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(rows, indent=2))
    print(f"\n{'checkpoint':30} {'tensor MiB':>10} {'check s':>8} {'cli s':>6} "
          f"{'fix s':>7} {'fix RSS MiB':>11} {'check RSS MiB':>13}")
    for r in rows:
        print(f"{r['checkpoint']:30} {r['tensor_bytes'] / 2**20:10.1f} "
              f"{r['check_s_in_process']:8.4f} {r['check_cli_wall_s']:6.2f} "
              f"{r['fix_cli_wall_s']:7.2f} {r['fix_peak_rss_mib']:11.1f} "
              f"{r['check_cli_peak_rss_mib']:13.1f}")


if __name__ == "__main__":
    main()
