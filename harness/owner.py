"""The harness process that owns cells and run folders: who it is (host, boot, pid, start time), whether
an owner named in a process tag, a container label or a run lock is still alive, and how its end
reaches its cells: SIGTERM and SIGHUP end it like Ctrl-C, and a watchdog process (harness/reaper.py)
removes its cells when it dies without a word (SIGKILL, the OOM killer).

A pid alone is not an identity: pids are reused, so a tag naming a dead harness's pid could point at an
unrelated live process. The pid's start time (/proc/<pid>/stat, field 22, clock ticks after boot) and
the boot id make it one: a harness is alive when a process with its pid and start time exists on its
host since the same boot. Other harnesses' cells run on this machine at the same time (tests, other
users); only a dead owner's leftovers are ever touched."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import FrameType

from . import CACHE_DIR, proc

OWNER_VAR = "HARNESS_OWNER"  # in every host-engine process of a cell; io.nccl-harness.owner on containers


def _start_ticks(pid: int) -> int | None:
    try:
        return int(proc.stat_fields(pid)[19])  # field 22
    except (OSError, ValueError, IndexError):
        return None


@lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "unknown"


@dataclass(frozen=True)
class Owner:
    """One harness process, as written into the tags, labels and locks of what it starts."""

    host: str
    boot: str
    pid: int
    start: int  # clock ticks after boot: a reused pid has another

    @property
    def marker(self) -> str:
        return f"{self.host}/{self.boot}/{self.pid}/{self.start}"

    @classmethod
    def parse(cls, marker: str) -> Owner | None:
        parts = marker.strip().rsplit("/", 3)
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))

    def dead(self) -> bool:
        """Known to be gone: on this host, and its process is not there since this boot. An owner on
        another host (a shared Docker engine) is never called dead: nothing here can tell."""
        if self.host != socket.gethostname():
            return False
        return self.boot != _boot_id() or _start_ticks(self.pid) != self.start

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def current() -> Owner:
    """This process (looked up again after a fork)."""
    pid = os.getpid()
    return Owner(socket.gethostname(), _boot_id(), pid, _start_ticks(pid) or 0)


# ------------------------------------------------------------------------------ the end of the harness
class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, a cancelled CI job) or SIGHUP (a closed terminal): handled exactly like Ctrl-C,
    so the running cell is killed and recorded as `interrupted` and the report is written."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signal.Signals(signum).name)


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP raise Terminated (a KeyboardInterrupt) in the main thread. Seen before:
    `timeout` (SIGTERM, exit 143) mid-cell left the launcher and both ranks running (issue 14). A signal
    this process was started ignoring stays ignored, as Python leaves an ignored SIGINT: `nohup invoke
    matrix` asked for a run that outlives its terminal's hangup."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGHUP)
           if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


# A harness that submits Slurm jobs leaves a note here before its first job (watch_over), and its watchdog
# removes it once the jobs are cancelled; the sweep asks Slurm only where a note names a dead harness
# (reaper._jobs). Seen before: every command (report, compare, publish included) asked squeue, which waits
# about 7 s where Slurm is installed but its controller is down: a test run's 62 report/compare/publish
# cases took 29 s each instead of 1 s.
JOB_NOTES = CACHE_DIR / "slurm-owners"


def job_note(marker: str) -> Path:
    """The note of the harness `marker` (Owner.marker) that it may have Slurm jobs."""
    owner = Owner.parse(marker)
    return JOB_NOTES / (f"{owner.pid}-{owner.start}" if owner else "unknown")


_watchdogs: dict[str, subprocess.Popen] = {}
_lock = threading.Lock()


def watch_over(engine: str) -> None:
    """Start, once per engine and process, the watchdog that removes this harness's cells on that engine
    when this process ends, however it ends (harness/reaper.py). Call it before starting a cell."""
    me = current()
    key = f"{engine}@{me.pid}"
    with _lock:
        running = _watchdogs.get(key)
        if running is not None and running.poll() is None:
            return
        if engine == "slurm":  # before any job exists: a harness killed with its watchdog is still found
            try:
                JOB_NOTES.mkdir(parents=True, exist_ok=True)
                job_note(me.marker).write_text(me.marker)
            except OSError:
                pass  # no note: the watchdog still cancels the jobs; `invoke clean` finds them too
        # this checkout's harness package, whatever sys.path the watchdog's Python would start with
        package_root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        _watchdogs[key] = proc.watchdog([sys.executable, "-m", "harness.reaper", me.marker, engine], env=env)
