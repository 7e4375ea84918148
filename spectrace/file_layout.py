"""What the file exporter writes where: the one description its writers
(`export.files`) and readers (`report.reader`) share.

`<output_dir>/<service>-<host>-<pid>/` holds `resource.json` (the process's resource
attributes), `metrics.jsonl` (a cumulative snapshot every interval: the last complete
line holds the totals), `spans.jsonl` and `events.jsonl` (each finding, flushed when it
happens). Folders are 0700 and files 0600: owner only.
"""
from __future__ import annotations

import os
import re
import socket

METRICS_FILE = "metrics.jsonl"
SPANS_FILE = "spans.jsonl"
EVENTS_FILE = "events.jsonl"
RESOURCE_FILE = "resource.json"
PROCESS_FILES = (RESOURCE_FILE, METRICS_FILE, EVENTS_FILE)

MAX_LINE_BYTES = 16 << 20  # a reader skips longer lines instead of holding them in memory

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(name: str) -> str:
    """A file-name-safe form of a service name: no separators, no `..`, no hidden file."""
    out = _UNSAFE.sub("_", name)[:64].lstrip(".")
    return out or "service"


def process_dir(output_dir: str, service_name: str, pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    host = safe_name(socket.gethostname().split(".")[0] or "host")
    return os.path.join(output_dir, f"{safe_name(service_name)}-{host}-{pid}")


def is_process_dir(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, f)) for f in PROCESS_FILES)
