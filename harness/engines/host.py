"""The host engine: the cell's launcher as a subprocess of the current Python environment, in a
process group of its own, for machines without Docker (such as a GPU box where Docker is not allowed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .. import proc
from .base import CellSpec


TOKEN_VAR = "HARNESS_CELL_TOKEN"


def tagged(token: str) -> list[tuple[int, str, str]]:
    """(pid, state, command) of every live process carrying the cell's token in its environment.

    Launchers (torch elastic) start ranks in sessions of their own, and killed launchers orphan them,
    so neither the process group nor the parent chain finds every rank; the inherited token does."""
    needle = f"{TOKEN_VAR}={token}".encode()
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            state = stat[stat.rindex(")") + 2 :].split()[0]
            if state == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            members.append((int(entry.name), state, cmd))
        except (OSError, ValueError, IndexError):
            continue
    return members


class HostRunning:
    def __init__(self, popen: subprocess.Popen, log: Path, token: str) -> None:
        self.popen, self.log, self.token = popen, log, token

    def poll(self) -> int | None:
        return self.popen.poll()

    def signal(self, pid: int, signame: str) -> None:
        if pid in {p for p, _, _ in tagged(self.token)}:
            os.kill(pid, getattr(signal, f"SIG{signame}"))

    def native_dump(self, pid: int) -> str:
        if proc.which("py-spy") is None or pid not in {p for p, _, _ in tagged(self.token)}:
            return ""
        result = proc.run(["py-spy", "dump", "--nonblocking", "--pid", str(pid)], timeout=20)
        return result.output if result.returncode == 0 else f"(py-spy failed: {result.output.strip()[-300:]})"

    def process_list(self) -> str:
        return "\n".join(f"{pid:>8} {state} {cmd[:200]}" for pid, state, cmd in tagged(self.token))

    def output_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the launcher's group and every tagged process, until none is left (10 s at most)."""
        deadline = time.monotonic() + 10
        while True:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            members = tagged(self.token)
            for pid, _, _ in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self.popen.poll() is None:
                try:
                    self.popen.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
            if not members or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def leftovers(self) -> list[str]:
        return [f"pid {pid} ({state}) {cmd[:80]}" for pid, state, cmd in tagged(self.token)]


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
        token = uuid.uuid4().hex
        env[TOKEN_VAR] = token
        log = spec.out_dir / "launcher.log"
        running = HostRunning(proc.spawn(list(spec.launch.argv), env=env, log=log), log, token)
        try:
            yield running
        finally:
            while True:  # a second Ctrl-C stops the harness at once, but never before the ranks are dead
                try:
                    running.kill()
                    break
                except KeyboardInterrupt:
                    continue
