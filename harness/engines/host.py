"""The host engine: the cell's launcher as a subprocess of the current Python environment, in a
process group of its own, for machines without Docker (such as a GPU box where Docker is not allowed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .. import proc
from .base import CellSpec


def group_members(pgid: int) -> list[tuple[int, str, str]]:
    """(pid, state, command) of every live process in a process group, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            members.append((int(entry.name), fields[0], cmd))
        except (OSError, ValueError, IndexError):
            continue
    return members


class HostRunning:
    def __init__(self, popen: subprocess.Popen, log: Path) -> None:
        self.popen, self.log = popen, log

    def poll(self) -> int | None:
        return self.popen.poll()

    def signal(self, pid: int, signame: str) -> None:
        if pid in {p for p, _, _ in group_members(self.popen.pid)}:
            os.kill(pid, getattr(signal, f"SIG{signame}"))

    def process_list(self) -> str:
        return "\n".join(f"{pid:>8} {state} {cmd[:200]}" for pid, state, cmd in group_members(self.popen.pid))

    def output_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        # Stopped ranks must be continued to die promptly; SIGKILL reaches them either way.
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def leftovers(self) -> list[str]:
        return [f"pid {pid} ({state}) {cmd[:80]}" for pid, state, cmd in group_members(self.popen.pid)]


class HostEngine:
    """Runs the workload from this checkout with this environment's torch and accelerate."""

    name = "host"
    python = sys.executable
    workload = str(Path(__file__).resolve().parent.parent / "workload" / "run.py")

    @contextmanager
    def start(self, spec: CellSpec) -> Iterator[HostRunning]:
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **spec.launch.env_dict, "PYTHONUNBUFFERED": "1"}
        if spec.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(spec.gpus)
        log = spec.out_dir / "launcher.log"
        running = HostRunning(proc.spawn(list(spec.launch.argv), env=env, log=log), log)
        try:
            yield running
        finally:
            running.kill()
            deadline = time.monotonic() + 10
            while running.leftovers() and time.monotonic() < deadline:
                time.sleep(0.1)
                running.kill()
