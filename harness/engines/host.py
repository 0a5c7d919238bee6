"""The host engine: the cell's launcher as a subprocess of the current Python environment, in a
process group of its own, for machines without Docker (such as a GPU box where Docker is not allowed)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import CACHE_DIR, WORKLOAD_DIR, nccl_log, owner, proc
from .. import launch as launch_mod
from ..errors import HarnessError, InfraError
from ..kinds import GpuApi
from ..matrix import Cell, Matrix, Stack
from ..progress import Progress
from ..workload.fingerprint import relevant_env
from .base import LAUNCHER_LOG, CellSpec, Check, RemoteDumps, Stop
from .collector import NATIVE_TIMEOUT_S, native_argv, native_tool, nccl_ras

TOKEN_VAR = "HARNESS_CELL_TOKEN"


@dataclass(frozen=True)
class Marked:
    """A live process carrying a harness variable in its environment."""

    pid: int
    state: str  # R, S, T (stopped)...
    cmd: str
    value: str  # the variable's value

    def describe(self) -> str:
        return f"pid {self.pid} ({self.state}) {self.cmd[:80]}"


def marked(var: str) -> list[Marked]:
    """Every live (not zombie) process with `var` in its environment, with its value.

    Launchers (torch elastic) start ranks in sessions of their own, and killed launchers orphan them,
    so neither the process group nor the parent chain finds every rank; the inherited variable does."""
    prefix = f"{var}=".encode()
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found = [v for v in (entry / "environ").read_bytes().split(b"\0") if v.startswith(prefix)]
            if not found:
                continue
            state = proc.stat_fields(entry.name)[0]
            if state == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            members.append(Marked(int(entry.name), state, cmd, found[0][len(prefix):].decode(errors="replace")))
        except (OSError, ValueError, IndexError):
            continue
    return members


def tagged(token: str) -> list[Marked]:
    """Every live process of one started cell (its token in the environment)."""
    return [p for p in marked(TOKEN_VAR) if p.value == token]


def kill_all(find: Callable[[], list[Marked]], deadline_s: float = 10.0,
             also: Callable[[], None] = lambda: None) -> list[Marked]:
    """SIGKILL what `find` finds (and run `also`) until it finds nothing, `deadline_s` at most; returns
    everything it found (a launcher may start a rank between two looks, so one pass is not enough)."""
    deadline = time.monotonic() + deadline_s
    seen: dict[int, Marked] = {}
    while True:
        members = find()
        for member in members:
            seen.setdefault(member.pid, member)
            try:
                os.kill(member.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        also()
        if not members or time.monotonic() > deadline:
            return list(seen.values())
        time.sleep(0.05)


class CellProcesses:
    """The processes of one started cell on this machine, found by the token in their environment: what
    every engine whose ranks (some of them) run here offers the supervisor besides poll and kill, held by
    its Running (HostRunning; SlurmRunning for the ranks on this machine)."""

    def __init__(self, log: Path, token: str) -> None:
        self.log, self.token = log, token

    def members(self) -> list[Marked]:
        return tagged(self.token)

    def signal(self, pid: int, signame: str) -> None:
        if pid in {p.pid for p in tagged(self.token)}:
            os.kill(pid, getattr(signal, f"SIG{signame}"))

    def native_dump(self, pid: int) -> str:
        if proc.which("py-spy") is None or pid not in {p.pid for p in tagged(self.token)}:
            return ""
        result = proc.run(["py-spy", "dump", "--nonblocking", "--pid", str(pid)], timeout=20)
        return result.output if result.returncode == 0 else f"(py-spy failed: {result.output.strip()[-300:]})"

    def native_stacks(self, pid: int) -> str:
        tool = native_tool()
        if tool is None or pid not in {p.pid for p in tagged(self.token)}:
            return ""
        result = proc.run(native_argv(tool, pid), timeout=NATIVE_TIMEOUT_S)
        return result.output if result.returncode == 0 else f"({Path(tool).name} failed: {result.output.strip()[-300:]})"

    def process_list(self) -> str:
        return "\n".join(f"{p.pid:>8} {p.state} {p.cmd[:200]}" for p in tagged(self.token))

    def gone(self, pids: dict[int, int]) -> set[int]:
        live = {p.pid for p in tagged(self.token)}  # tagged() leaves zombies out
        return {rank for rank, pid in pids.items() if pid not in live}

    def output_tail(self, lines: int = 80) -> str:
        return nccl_log.tail_file(self.log, lines)  # the launcher's output is the ranks' too: read as theirs

    def leftovers(self) -> list[str]:
        return [p.describe() for p in tagged(self.token)]

    def kill(self, also: Callable[[], None] = lambda: None) -> None:
        """SIGKILL every tagged process (and run `also`) until none is left (kill_all)."""
        kill_all(lambda: tagged(self.token), also=also)


def kill_surely(kill: Callable[[], None]) -> None:
    """kill(), even while the user keeps pressing Ctrl-C: a second Ctrl-C stops the harness at once, but
    never before the ranks are dead."""
    while True:
        try:
            kill()
            return
        except KeyboardInterrupt:
            continue


class HostRunning:
    """The launcher started as a subprocess here, in a process group of its own, and its ranks."""

    def __init__(self, popen: subprocess.Popen[bytes], log: Path, token: str, stop: Stop | None = None) -> None:
        self.popen, self.processes = popen, CellProcesses(log, token)
        self.stop = stop or Stop()

    @property
    def token(self) -> str:
        return self.processes.token

    def poll(self) -> int | None:
        self.stop.check()  # HostEngine.interrupt: the supervisor takes it as Ctrl-C
        return self.popen.poll()

    def signal(self, pid: int, signame: str) -> None:
        self.processes.signal(pid, signame)

    def native_dump(self, pid: int) -> str:
        return self.processes.native_dump(pid)

    def process_list(self) -> str:
        return self.processes.process_list()

    def nccl_ras(self) -> str:
        return nccl_ras() if self.processes.members() else ""  # the ranks share this machine's network

    def native_stacks(self, pid: int) -> str:
        return self.processes.native_stacks(pid)

    def dump_ranks(self, pids: dict[int, int]) -> RemoteDumps | None:
        return None  # every rank is on this machine: signal(), native_dump() and native_stacks() reach it

    def gone(self, pids: dict[int, int]) -> set[int]:
        return self.processes.gone(pids)

    def output_tail(self, lines: int = 80) -> str:
        return self.processes.output_tail(lines)

    def leftovers(self) -> list[str]:
        return self.processes.leftovers()

    def kill(self) -> None:
        """SIGKILL the launcher's group and every tagged process, until none is left (10 s at most)."""

        def launcher() -> None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.popen.poll() is None:
                try:
                    self.popen.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass

        launcher()
        self.processes.kill(also=launcher)


def host_stack(python: str = sys.executable) -> Stack:
    """The stack installed in this environment, as the host engine will run it."""
    probe = (
        "import json, torch, accelerate, sys;"
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda or 'cpu',"
        " 'accelerate': accelerate.__version__, 'python': '%d.%d' % sys.version_info[:2]}))"
    )
    result = proc.run([python, "-c", probe], timeout=120, env={**os.environ, **bytecode_env(os.environ)})
    if result.returncode != 0:
        raise InfraError(
            f"the host engine needs torch and accelerate in this Python ({python}), and importing them failed: "
            f"{result.output.strip().splitlines()[-1:] or ''}. Fix: pip install torch accelerate, or use --engine docker."
        )
    facts = json.loads(result.output.strip().splitlines()[-1])
    torch_version = facts["torch"].split("+")[0]
    return Stack(cuda=facts["cuda"], torch=torch_version, accelerate=facts["accelerate"], base="host",
                 python=facts["python"], torch_index="", template="host")


def own_stack_cells(python: str, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
    """The selected variants and launchers, on the stack installed in `python` (the host engine's, and
    the slurm engine's on the nodes' own stack)."""
    stack = host_stack(python)
    progress.say(f"Host stack: {stack.id} (python {stack.python})")
    return [c for c in host_cells(m, stack)
            if any(c.variant == s.variant and c.launcher == s.launcher for s in selected)]


def host_cells(m: Matrix, stack: Stack) -> list[Cell]:
    """The matrix's variants and launchers, on the host's own stack."""
    seen: dict[str, Cell] = {}
    for cell in m.runnable:
        host = Cell(stack, cell.variant, cell.launcher)
        seen.setdefault(host.id, host)
    return list(seen.values())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The launcher's and the ranks' Python bytecode goes to a cache of the harness's own, unless the user set
# PYTHONPYCACHEPREFIX. Seen on 2x H200 (torch 2.11 in a venv installed without .pyc files, with
# PYTHONDONTWRITEBYTECODE=1 in the environment): every rank of every cell compiled torch, torch._dynamo
# and sympy from source, 4.4 s + 5.9 s of imports per rank; with this cache the supervised cell took
# 9.96-10.87 s instead of 18.8-20.9 s (bench/cell_time.py, docs/benchmarks.md). Neither site-packages nor
# a read-only install is written, and nothing torch or NCCL sees changes.
PYCACHE = CACHE_DIR / "pycache"


def bytecode_env(environ: Mapping[str, str]) -> dict[str, str]:
    if environ.get("PYTHONPYCACHEPREFIX"):
        return {}
    # an empty PYTHONDONTWRITEBYTECODE is unset to Python; the cache is written only where we said
    return {"PYTHONPYCACHEPREFIX": str(PYCACHE), **({"PYTHONDONTWRITEBYTECODE": ""}
                                                    if environ.get("PYTHONDONTWRITEBYTECODE") else {})}


def host_env(spec: CellSpec, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What the host engine sets for a cell over the inherited environment (besides its process tag)."""
    env = {**spec.launch.env_dict, "PYTHONUNBUFFERED": "1", **bytecode_env(environ)}
    if spec.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(spec.gpus)
    return env


def env_line(spec: CellSpec) -> str:
    """host_env as the VAR=value words of a pasteable line."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in host_env(spec).items())


def cell_env(spec: CellSpec, token: str) -> dict[str, str]:
    """The whole environment a cell's launcher starts with on this machine: this one, host_env, the
    cell's token (every rank is found by it) and this harness as its owner (reaper.py)."""
    return {**os.environ, **host_env(spec), TOKEN_VAR: token, owner.OWNER_VAR: owner.current().marker}


class HostEngine:
    """Runs the workload from this checkout with this environment's torch and accelerate."""

    name = "host"
    builds_images = False
    builder = None  # no images: the cells run on this Python's stack
    client = None  # and no Docker client is connected
    shares_gpus = True  # the ranks run on this machine, on its GPUs
    python = sys.executable
    workload = str(WORKLOAD_DIR / "run.py")
    control = str(WORKLOAD_DIR / "control.py")

    def __init__(self) -> None:
        self._stop = Stop()

    def concurrent_cells(self, jobs: int) -> int:
        return 1  # the cells share this machine's GPUs: together they would measure each other

    def interrupt(self) -> None:
        self._stop.set()

    def facts(self) -> dict[str, Any]:
        return {"name": self.name, "python": self.python, "flags": ["--engine", "host"]}

    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None, gpu_api: GpuApi | None = None) -> list[Check]:
        try:
            stack = host_stack(self.python)
        except HarnessError as exc:
            return [Check("host stack", False, str(exc))]
        return [Check("host stack", True, f"{stack.id} (python {stack.python})")]

    def gpu_api(self, gpus: tuple[str, ...], image: str, given: GpuApi | None = None) -> GpuApi | None:
        return None  # no container: the ranks see the host's GPUs

    def preflight(self, progress: Progress) -> None:
        return None

    def check_results(self, run: Path, progress: Progress) -> None:
        return None  # the ranks run on this machine

    def cells(self, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
        """The selected variants and launchers, on the stack installed in this Python."""
        return own_stack_cells(self.python, m, selected, progress)

    def image_id(self, tag: str) -> str:
        return ""

    def inherited_env(self, image: str) -> dict[str, str]:
        return relevant_env(os.environ)

    def launch(self, cell: Cell, m: Matrix, *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> launch_mod.Launch:
        # on the host: this Python, this checkout's workload, a free port (other cells or jobs may hold 29500)
        if control:
            return launch_mod.control_launch(cell, m, ranks=ranks, python=self.python, control=self.control,
                                             out=str(out), port=_free_port())
        return launch_mod.launch(cell, m, ranks=ranks, python=self.python, workload=self.workload, out=str(out),
                                 port=_free_port(), extra_args=extra_args, inherited_env=inherited_env)

    def equivalent(self, spec: CellSpec) -> str:
        return f"{env_line(spec)} {shlex.join(spec.launch.argv)}"

    @contextmanager
    def start(self, spec: CellSpec) -> Iterator[HostRunning]:
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        owner.watch_over(self.name)  # this harness's death (even SIGKILL) takes the cell with it
        log = spec.out_dir / LAUNCHER_LOG
        running = HostRunning(proc.spawn(list(spec.launch.argv), env=cell_env(spec, token), log=log), log, token,
                              self._stop)
        try:
            yield running
        finally:
            kill_surely(running.kill)
