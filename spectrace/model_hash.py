"""A content hash of a model folder (the draft's, the target's), computed once at start-up
and recorded as a resource attribute (`spectrace.draft_hash`, `spectrace.model_hash`), so
that `spectrace report --baseline` can say the draft changed even when its path did not.

Cheap by design: it reads `config.json` whole, each weight file's safetensors header
(names, dtypes, shapes, offsets), and `SAMPLES` evenly spaced chunks of `CHUNK` bytes of
each weight file's data (its first and last included): at most about 1 MiB a file
whatever the model's size. A retrained or different checkpoint changes nearly every
value, so the sampled bytes differ; one edited weight between the samples does not
change the hash. Not a local folder (a hub id not yet downloaded): no hash.
"""
from __future__ import annotations

import hashlib
import os
import struct

CHUNK = 4096
SAMPLES = 64
MAX_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _sample(h, f, start: int, end: int) -> None:
    """`SAMPLES` chunks of `f` between `start` and `end` into `h`."""
    span = max(end - start, 0)
    if span <= CHUNK * SAMPLES:
        f.seek(start)
        h.update(f.read(span))
        return
    step = (span - CHUNK) // (SAMPLES - 1)
    for i in range(SAMPLES):
        f.seek(start + i * step)
        h.update(f.read(CHUNK))


def _weight_file(h, path: str) -> None:
    size = os.path.getsize(path)
    h.update(f"{os.path.basename(path)}:{size}\n".encode())
    with open(path, "rb") as f:
        data_start = 0
        if path.endswith(".safetensors") and size >= 8:
            (n,) = struct.unpack("<Q", f.read(8))
            if n <= min(MAX_HEADER, size - 8):
                h.update(f.read(n))
                data_start = 8 + n
        _sample(h, f, data_start, size)


def content_hash(folder) -> str | None:
    """"sha256:" and 16 hex digits over the folder's config and sampled weights (see the
    module's docstring), or None when `folder` is not a readable local folder."""
    if not isinstance(folder, str) or not os.path.isdir(folder):
        return None
    h = hashlib.sha256()
    try:
        names = sorted(os.listdir(folder))
        if "config.json" in names:
            with open(os.path.join(folder, "config.json"), "rb") as f:
                h.update(f.read(MAX_HEADER))
        for name in names:
            if name.endswith(WEIGHT_SUFFIXES):
                _weight_file(h, os.path.join(folder, name))
    except (OSError, struct.error):
        return None
    return "sha256:" + h.hexdigest()[:16]


def hashes(model, draft) -> dict:
    """`model_hash` and `draft_hash` for the process identity (left out where unknown)."""
    out = {}
    for key, folder in (("model_hash", model), ("draft_hash", draft)):
        try:
            value = content_hash(folder)
        except Exception:  # noqa: BLE001 - a hash is never worth the server
            value = None
        if value:
            out[key] = value
    return out
