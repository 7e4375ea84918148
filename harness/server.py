"""Start and stop a real SGLang 0.5.23 server on the CPU with the tiny models.

The server runs in its own session (process group) so that stopping it by PID also stops
SGLang's scheduler and detokenizer children. The `*_cpu` kernels come from the pure-torch
stand-in `harness/sgl_kernel_standin/`, and `harness/cpu_patches/` makes `torch.cuda`
calls that need a driver no-ops (DeepSeek / MLA models only): the parts that are not
SGLang's own code.
"""
from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "sgl_kernel_standin")
CPU_PATCHES = os.path.join(HERE, "cpu_patches")  # sitecustomize: no-driver torch.cuda calls
LAUNCHER = os.path.join(HERE, "launch_cpu_server.py")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# ports handed out by `free_port`, each held by an exclusive lock on a file of its own
# here until `release_port` (or the process's end): two test workers starting servers at
# once once drew the same port, the loser's /health wait reached the winner's server, and
# its requests went there (CI rehearsal, 2026-12-04)
CLAIMS_DIR = os.path.join(tempfile.gettempdir(), "spectrace-harness-ports")
_claimed: dict[int, int] = {}  # port -> the open descriptor holding its lock


def free_port(low: int = 30000, high: int = 65535) -> int:
    """A port free now, in [`low`, `high`] and below the kernel's ephemeral range where
    there is room, claimed for this process (`release_port`) so that no other process of
    the harness is handed it. A server binds its port only once its models are loaded,
    tens of seconds later under load; meanwhile every `bind(0)` on the machine (gloo's
    and vLLM's listeners) draws from the ephemeral range, so a port taken from there can
    be gone by then (CI, 2026-12-04: uvicorn's bind failed, exit 3). 30000 up: SGLang
    keeps its own later-bound ports in 22000-29999."""
    top = min(high, _ephemeral_low() - 1)
    if top - low < 256:  # no room below the ephemeral range: anywhere up to `high`
        top = high
    for port in random.sample(range(low, top + 1), min(64, top + 1 - low)):
        if _claim(port):
            if _bindable(port):
                return port
            release_port(port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> int:
    """A base port with the `n - 1` ports after it, all free now and all claimed as
    `free_port`'s (a server's endpoints, one per rank or process, on consecutive ports).
    Claimed, so that `free_port` cannot hand one of them to the server itself (CI
    rehearsal, 2026-12-05: vLLM was started on the port its worker's spectrace endpoint
    then took, and a completion request got the endpoint's 405)."""
    while True:
        base = free_port()
        rest = [base + k for k in range(1, n)]
        claimed = [p for p in rest if _claim(p)]
        if len(claimed) == len(rest) and all(_bindable(p) for p in rest):
            return base
        for p in [base, *claimed]:
            release_port(p)


def _claim(port: int) -> bool:
    """Lock `port`'s claim file; False where another process holds it (or this one)."""
    if port in _claimed:
        return False
    os.makedirs(CLAIMS_DIR, exist_ok=True)
    fd = os.open(os.path.join(CLAIMS_DIR, str(port)), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _claimed[port] = fd
    return True


def release_port(port: int) -> None:
    """Give back a port `free_port` handed out (nothing where it was not claimed here)."""
    fd = _claimed.pop(port, None)
    if fd is not None:
        os.close(fd)


def _bindable(port: int) -> bool:
    try:
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False


class PortTaken(RuntimeError):
    """The server could not bind its port: another process took it after `free_port`."""


def server_args(models: str, port: int, steps: int | None = 3, topk: int = 1,
                draft_tokens: int | None = None, max_running: int = 4,
                algorithm: str = "EAGLE3", draft: str | None = "draft") -> list[str]:
    """`draft`: the draft model's folder in `models` (None: no draft model, as NGRAM);
    `steps` None: no step count or top-k (NGRAM sets its own from the draft tokens)."""
    spec = ["--speculative-algorithm", algorithm]
    if draft is not None:
        spec += ["--speculative-draft-model-path", os.path.join(models, draft)]
    if steps is not None:
        n = draft_tokens if draft_tokens is not None else (
            steps + 1 if topk == 1 else 2 * steps)
        spec += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
                 "--speculative-num-draft-tokens", str(n)]
    elif draft_tokens is not None:
        spec += ["--speculative-num-draft-tokens", str(draft_tokens)]
    return [
        "--model-path", os.path.join(models, "target"), *spec,
        "--device", "cpu", "--attention-backend", "intel_amx", "--sampling-backend", "pytorch",
        "--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled",
        "--dtype", "bfloat16", "--max-total-tokens", "4096",
        "--max-running-requests", str(max_running),
        "--host", "127.0.0.1", "--port", str(port), "--skip-server-warmup",
        # SGLang's own idle mode: the scheduler waits on its sockets instead of spinning
        # a core while no request runs (docs/performance.md, "Idle servers").
        "--sleep-on-idle",
    ]


NO_NCCL = "/nonexistent/libnccl.so.2"  # a path no NCCL library loads from


def tensor_parallel_env(tp_size: int) -> dict:
    """What SGLang needs to run `tp_size` CPU ranks on this machine, none of it a patch:

    - `SGLANG_CPU_OMP_THREADS_BIND`: SGLang asserts one NUMA node per rank unless the
      cores of each rank are given (`utils/numa_utils.py`, `init_threads_binding`); the
      cores this process may use, split into `tp_size` parts (shared when fewer).
    - `SGLANG_NCCL_SO_PATH`: on the CPU SGLang still builds its PyNccl communicator for
      every group wider than 1 (`distributed/parallel_state.py`, `use_pynccl` is off only
      for NPU, XPU and mooncake); with torch's CUDA build `libnccl.so.2` loads, and
      `PyNcclCommunicator.__init__` then enters `torch.cuda.device(<cpu device>)`
      (`device_communicators/pynccl.py`, line 116), which raises "Expected a cuda device,
      but got: cpu". Pointing SGLang's own variable at no library takes its documented
      "missing NCCL library, e.g. in a non-GPU environment" path: the communicator is
      disabled and the gloo CPU group does the collectives."""
    if tp_size <= 1:
        return {}
    cores = sorted(os.sched_getaffinity(0))
    parts = [cores[i * len(cores) // tp_size:(i + 1) * len(cores) // tp_size]
             or [cores[i % len(cores)]] for i in range(tp_size)]
    bind = "|".join(f"{part[0]}-{part[-1]}" if part == list(range(part[0], part[-1] + 1))
                    and len(part) > 1 else ",".join(str(c) for c in part) for part in parts)
    return {"SGLANG_CPU_OMP_THREADS_BIND": bind, "SGLANG_NCCL_SO_PATH": NO_NCCL}


# One intra-op thread per server process unless the caller's environment sets its own
# (`OMP_NUM_THREADS`): with torch's default (one per core) the OpenMP workers spin-wait for
# each other between the tiny models' ops, and the suite runs two servers at once on two
# cores. Measured here (benchmarks/busy_cpu.py, 12 requests of 64 tokens one after the
# other, idle machine, two runs): SGLang 6.1 s with one thread, 5.2-6.2 s with two, for
# 1.7-2x the CPU seconds; vLLM 2.8-4.6 s with one, 5.9-7.1 s with two. On a machine with a
# second job the second thread takes a core the other test worker needs.
# (benchmarks/overhead.py gives its servers the same, for the same reason.)
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def cpu_env(extra: dict | None = None) -> dict:
    """The environment for a CPU server: the kernel stand-in and the CPU patches first on
    PYTHONPATH, also when `extra` brings a PYTHONPATH of its own (e.g. a copy of an
    environment that has one); one OpenMP thread (`ONE_THREAD`) unless set."""
    env = {**ONE_THREAD, **os.environ}
    env.update({"SGLANG_USE_CPU_ENGINE": "1", "TORCHDYNAMO_DISABLE": "1"})
    env.update(extra or {})
    ours = [STANDIN, CPU_PATCHES]
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    env["PYTHONPATH"] = os.pathsep.join(ours + paths)
    return env


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    log_path: str
    extra: dict = field(default_factory=dict)
    stopped: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def generate(self, input_ids, max_new_tokens: int = 24, timeout: float = 120,
                 headers: dict | None = None) -> dict:
        """`headers`: more HTTP headers (a caller's `traceparent`)."""
        body = {"input_ids": input_ids,
                "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}
        req = urllib.request.Request(self.url + "/generate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    def generate_together(self, prompts: list, max_new_tokens: int = 24,
                          timeout: float = 120) -> list[dict]:
        """The answers to `prompts`, sent as one batch request: SGLang's TokenizerManager
        passes them to the scheduler one right after another, so they share steps. (Threads
        sent at once are not enough: on a loaded machine they ran one after the other.)"""
        answers = self.generate(prompts, max_new_tokens, timeout)
        assert isinstance(answers, list) and len(answers) == len(prompts), answers
        return answers

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def send(self, sig: int, group: bool = True) -> None:
        """Send `sig` to the server's whole process group (as a terminal's Ctrl-C does) or
        to the launcher alone."""
        (os.killpg if group else os.kill)(self.proc.pid, sig)

    def wait_stopped(self, timeout: float = 120) -> float:
        """Wait until the launcher and every process of its group are gone; the seconds
        waited."""
        t0 = time.monotonic()
        self.proc.wait(timeout=timeout)
        while time.monotonic() - t0 < timeout:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                self.stopped = True  # all gone: nothing left for `stop` to kill
                release_port(self.port)
                return time.monotonic() - t0
            time.sleep(0.01)
        raise TimeoutError(f"processes of group {self.proc.pid} still alive after {timeout} s")

    def stop(self) -> None:
        """SIGKILL the whole process group, as SGLang itself does to its children; also
        when the launcher has already exited (its scheduler may still be running). Once
        only: later calls do nothing (the group's id may since belong to someone else)."""
        if self.stopped:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=120)
        self.stopped = True
        release_port(self.port)


def start_server(models: str, log_path: str, env_extra: dict | None = None,
                 steps: int | None = 3, topk: int = 1, draft_tokens: int | None = None,
                 timeout: float = 240, python: str = sys.executable,
                 extra_args: list[str] | None = None, algorithm: str = "EAGLE3",
                 background_job: bool = False, tp_size: int = 1,
                 nice: int | None = None, draft: str | None = "draft") -> Server:
    """`background_job`: start it with SIGINT ignored, as a shell script's `cmd &` does.
    `tp_size`: tensor-parallel ranks (`--tp-size`; `tensor_parallel_env`). `nice`: see
    `launch`. `draft`, `steps`: see `server_args`."""
    def command(port: int) -> list[str]:
        cmd = [python, LAUNCHER] + server_args(models, port, steps, topk, draft_tokens,
                                               algorithm=algorithm, draft=draft)
        cmd += extra_args or []
        return cmd + (["--tp-size", str(tp_size)] if tp_size > 1 else [])
    env = {**tensor_parallel_env(tp_size), **(env_extra or {})}
    return launch_on_free_port(command, cpu_env(env), log_path, timeout,
                               background_job=background_job, nice=nice)


def launch_on_free_port(command: Callable[[int], list[str]], env: dict, log_path: str,
                        timeout: float, tries: int = 3, port_high: int = 65535,
                        **launch_kwargs) -> Server:
    """`launch(command(port), ...)` on a `free_port` up to `port_high`; on `PortTaken`,
    again on another."""
    for attempt in range(1, tries + 1):
        port = free_port(high=port_high)
        try:
            return launch(command(port), env, port, log_path, timeout, **launch_kwargs)
        except PortTaken:
            if attempt == tries:
                raise
    raise AssertionError("unreachable")


def _foreground_signals() -> None:
    """SIGINT and SIGTERM as a job started from a terminal gets them: default actions."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _background_signals() -> None:
    """As a shell without job control starts `cmd &`: SIGINT ignored (inherited by every
    process the command starts that does not set its own handler)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _set_nice(nice: int) -> None:
    """In the child, after `setsid`: this process's niceness and its new session's. With
    the kernel's autogroups on (/proc/sys/kernel/sched_autogroup_enabled) every session is
    scheduled as one group and a niceness only counts inside its group, so on a shared
    machine the session's (autogroup) niceness is what raises a server above other jobs."""
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        with open("/proc/self/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:
        pass  # no autogroups: the process niceness is what counts


def launch(cmd: list[str], env: dict, port: int, log_path: str, timeout: float,
           label: str = "SGLang server", background_job: bool = False,
           nice: int | None = None) -> Server:
    """Start `cmd` in its own session, logging to `log_path`; return once /health answers.
    Its signal dispositions are a terminal job's (or a background job's) whatever the
    caller's are. `nice`: the server's niceness, and its session's (`_set_nice`; below 0
    needs root): benchmarks give every server they compare the same one."""
    log = open(log_path, "w")
    signals_of_job = _background_signals if background_job else _foreground_signals

    def preexec() -> None:
        signals_of_job()
        if nice is not None:
            _set_nice(nice)
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=preexec)
    server = Server(proc, port, log_path)
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                text = server.log()
                error = PortTaken if "address already in use" in text.lower() else RuntimeError
                raise error(f"{label} exited with {proc.returncode}; log {log_path}:\n"
                            + _tail_with_errors(text))
            try:
                with urllib.request.urlopen(server.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return server
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{label} did not answer in {timeout} s; log {log_path}:\n"
                           + _tail_with_errors(server.log()))
    except BaseException:  # not started (or interrupted): nothing of it stays running
        server.stop()
        raise
    finally:
        log.close()  # the child has its own descriptor


def _tail_with_errors(log: str, size: int = 4000) -> str:
    """The log's last `size` characters, after its first lines naming an error: the
    cause often comes long before the tracebacks that end the log."""
    errors = [line for line in log.splitlines()
              if "Error" in line or "error" in line][:8]
    head = ("first error lines:\n" + "\n".join(e[:300] for e in errors) + "\n...\n"
            if errors and len(log) > size else "")
    return head + log[-size:]
