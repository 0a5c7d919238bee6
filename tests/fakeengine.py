"""A fake engine for fast tests (as tox's fake executor): an Engine whose start() runs scripted ranks in
this process, one thread each, that write their events into the attempt folder exactly as the workload
does (harness/workload/events.py's EventWriter: events-rank{N}.jsonl with start, phase_start, phase_end,
heartbeat, error and result events; pid-rank{N} files), so that the supervisor, classify and the runner
follow them unchanged. Each rank follows its script (Rank): pass every phase, stall in a phase (stop
writing; `beating`: keep heartbeating from source "thread", as a rank stuck in a collective does), keep
making progress in a phase (the cap), die in a phase (stop, and count as gone, while the launcher has
not noticed), record an error in a phase, or end slowly. The fake launcher exits once every rank has
ended: 0 when all passed; after a rank's error it ends the others (as torchrun does) and exits 1."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness import launch as launch_mod
from harness.engines.base import CellSpec, Check, RemoteDumps, Stop
from harness.engines.dockerclient import DockerClient
from harness.errors import BuildFailed
from harness.kinds import GpuApi
from harness.matrix import Cell, Matrix
from harness.progress import Progress
from harness.record import WORKLOAD_PHASES
from harness.workload.events import EventWriter

Do = Literal["pass", "stall", "busy", "die", "error", "slow-end"]
FAKE_PID = 40_000  # rank N's pid, as it writes it: 40000 + N (no such process is ever signalled)
BEAT_S = 0.05  # heartbeats and busy progress, every 50 ms


@dataclass(frozen=True)
class Rank:
    """One rank's script: `do` what in `phase` (every phase before it passes)."""

    do: Do = "pass"
    phase: str = "teardown"
    beating: bool = False  # stall: heartbeats from the thread go on (alive, stuck); else silent (stopped)
    error_class: str = "nccl"
    message: str = "NCCL error: unhandled system error"
    end_s: float = 0.0  # slow-end: seconds in teardown before the result
    busbw: float = 10.0
    fingerprint: Mapping[str, Any] | None = None  # what its fingerprint phase says it saw (versions, GPUs, env)


PASS = Rank()


def stall(phase: str, beating: bool = False) -> Rank:
    return Rank("stall", phase, beating=beating)


def busy(phase: str) -> Rank:
    return Rank("busy", phase)


def die(phase: str) -> Rank:
    return Rank("die", phase)


def error(phase: str, error_class: str = "nccl", message: str = "NCCL error: unhandled system error") -> Rank:
    return Rank("error", phase, error_class=error_class, message=message)


def slow_end(seconds: float) -> Rank:
    return Rank("slow-end", "teardown", end_s=seconds)


Script = Mapping[int, Rank] | Callable[[CellSpec], Mapping[int, Rank]]


class FakeRank:
    """One scripted rank, a thread writing its events as the workload does."""

    def __init__(self, out: Path, rank: int, world: int, script: Rank) -> None:
        self.out, self.rank, self.world, self.script = out, rank, world, script
        self.pid = FAKE_PID + rank
        self.killed = threading.Event()
        self.code: int | None = None  # its exit code once it has ended of itself
        self.died = False
        self.thread = threading.Thread(target=self._run, name=f"fake-rank{rank}", daemon=True)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    @property
    def stopped(self) -> bool:
        """Stopped like SIGSTOP: alive, but it answers nothing (no stack dump)."""
        return self.alive and self.script.do == "stall" and not self.script.beating

    def _run(self) -> None:
        writer = EventWriter(str(self.out / f"events-rank{self.rank}.jsonl"), self.rank, self.world)
        try:
            (self.out / f"pid-rank{self.rank}").write_text(f"{self.pid}\n")
            writer.emit("start", pid=self.pid, argv=["fake"], host="fake", local_rank=self.rank, python="3",
                        placement={"node": "fake"})
            self.code = self._phases(writer)
        finally:
            writer.close()

    def _phases(self, writer: EventWriter) -> int | None:
        s = self.script
        done: list[str] = []
        for phase in WORKLOAD_PHASES:
            writer.emit("phase_start", pid=self.pid, phase=phase)
            if phase == s.phase and s.do in ("stall", "busy"):
                while not self.killed.wait(BEAT_S):
                    if s.do == "busy":
                        writer.emit("heartbeat", pid=self.pid, phase=phase, source="main")
                    elif s.beating:
                        writer.emit("heartbeat", pid=self.pid, phase=phase, source="thread")
                return None
            if phase == s.phase and s.do == "die":
                self.died = True
                return None
            if phase == s.phase and s.do == "error":
                writer.emit("error", pid=self.pid, phase=phase, error_class=s.error_class, type="RuntimeError",
                            message=s.message, traceback="")
                writer.emit("result", pid=self.pid, status="error", phases_done=done, exit_code=1,
                            failed_phase=phase, error_class=s.error_class)
                return 1
            if phase == s.phase and s.do == "slow-end" and self.killed.wait(s.end_s):
                return None
            writer.emit("phase_end", pid=self.pid, phase=phase, seconds=0.001, **_fields(phase, s))
            done.append(phase)
        writer.emit("result", pid=self.pid, status="ok", phases_done=done, exit_code=0, wrong_total=0,
                    largest_bytes=1 << 20, largest_busbw_gbs=s.busbw, largest_algbw_gbs=s.busbw)
        return 0

    def answer_usr1(self) -> None:
        """faulthandler's dump, as a live rank writes it on SIGUSR1."""
        if self.alive and not self.stopped:
            (self.out / f"stacks-rank{self.rank}.txt").write_text(
                f'Thread 0x01 (most recent call first):\n  File "fake.py", line 1 in rank{self.rank}\n')


def _fields(phase: str, script: Rank) -> dict[str, Any]:
    if phase == "fingerprint" and script.fingerprint is not None:
        return {"fingerprint": dict(script.fingerprint)}
    if phase == "check":
        return {"wrong_total": 0}
    if phase == "bandwidth":
        return {"rows": [{"bytes": 1 << 20, "time_s": 0.001, "algbw_gbs": script.busbw, "busbw_gbs": script.busbw,
                          "busbw_trials": [script.busbw], "wrong": 0}]}
    return {}


class FakeRunning:
    """The started fake cell: a launcher over the rank threads."""

    def __init__(self, spec: CellSpec, script: Mapping[int, Rank], stop: Stop) -> None:
        self.spec, self.stop = spec, stop
        world = spec.launch.ranks
        self.ranks = [FakeRank(spec.out_dir, r, world, script.get(r, PASS)) for r in range(world)]
        self.signals: list[tuple[int, str]] = []
        self.killed = False

    def begin(self) -> None:
        for rank in self.ranks:
            rank.thread.start()

    def poll(self) -> int | None:
        self.stop.check()
        if any(r.code == 1 for r in self.ranks):  # a rank failed: the launcher ends its peers, exits 1
            self._end_ranks()
            return 1
        if all(not r.alive for r in self.ranks) and not any(r.died for r in self.ranks):
            return 0
        return None  # a dead rank is not noticed: the launcher waits on (its monitor is slow)

    def _by_pid(self, pid: int) -> FakeRank | None:
        return next((r for r in self.ranks if r.pid == pid), None)

    def signal(self, pid: int, signame: str) -> None:
        self.signals.append((pid, signame))
        rank = self._by_pid(pid)
        if rank is not None and signame == "USR1":
            rank.answer_usr1()

    def native_dump(self, pid: int) -> str:
        return ""  # no py-spy here

    def native_stacks(self, pid: int) -> str:
        return ""  # no eu-stack or gdb for a fake rank

    def nccl_ras(self) -> str:
        return ""  # no NCCL

    def process_list(self) -> str:
        return "\n".join(f"{r.pid:>8} {'T' if r.stopped else 'S'} fake rank {r.rank}" for r in self.ranks if r.alive)

    def dump_ranks(self, pids: dict[int, int]) -> RemoteDumps | None:
        return None  # every rank is reachable through signal() and native_dump()

    def gone(self, pids: dict[int, int]) -> set[int]:
        return {rank for rank, pid in pids.items() if (r := self._by_pid(pid)) is not None and not r.alive}

    def output_tail(self, lines: int = 80) -> str:
        return ""

    def kill(self) -> None:
        self.killed = True
        self._end_ranks()

    def _end_ranks(self) -> None:
        for rank in self.ranks:
            rank.killed.set()
        for rank in self.ranks:
            rank.thread.join(timeout=5)

    def leftovers(self) -> list[str]:
        return [f"fake rank {r.rank}" for r in self.ranks if r.alive]


class FakeBuilder:
    """The Docker client's build side (what images.build_all asks), on scripted builds: every image is missing
    but the local base, a build takes `seconds[stack]` (else none), holds until `until[stack]()` is true where
    given (BuildFailed after `hold_s`: a build that was held too long says so), or fails (`fail`). Pair it with
    images.prepare monkeypatched to a render without wheels (no wheel store, no pip). `built` keeps each
    build's stack with its start and end (time.time())."""

    def __init__(self, seconds: Mapping[str, float] | None = None, until: Mapping[str, Callable[[], bool]] | None = None,
                 fail: tuple[str, ...] = (), hold_s: float = 20.0) -> None:
        self.seconds, self.until, self.fail, self.hold_s = dict(seconds or {}), dict(until or {}), fail, hold_s
        self.built: list[tuple[str, float, float]] = []
        self._images: set[str] = set()

    def image_exists(self, ref: str) -> bool:
        return ref in self._images or ref.startswith("harness-base:")

    def image_labels(self, ref: str) -> dict[str, str]:
        """A local base made with today's packages (baseimage.ensure then keeps it)."""
        from harness import baseimage

        base = baseimage.LOCAL_BASES.get(ref)
        return {baseimage.PACKAGES_LABEL: ",".join(base.packages)} if base else {}

    def build(self, context: Path, tag: str, *, labels: dict[str, str], buildargs: dict[str, str], log: Path,
              on_line: Callable[[str], None] = lambda _: None, timeout: int = 3600, nocache: bool = False) -> str:
        stack = tag.split("/", 1)[1].rsplit(":", 1)[0]  # images.BuildContext.tag: <repo>/<stack id>:<hash>
        started = time.time()
        time.sleep(self.seconds.get(stack, 0.0))
        if stack in self.until:
            deadline = time.monotonic() + self.hold_s
            while not self.until[stack]():
                if time.monotonic() > deadline:
                    raise BuildFailed(f"the fake build of {stack} was held {self.hold_s:g}s and its condition never held")
                time.sleep(0.01)
        if stack in self.fail:
            raise BuildFailed(f"the fake build of {stack} failed")
        self.built.append((stack, started, time.time()))
        self._images.add(tag)
        return f"sha256:{stack}"


class FakeEngine:
    """The Engine protocol in full, on scripted ranks; `started` keeps every Running it made. With a
    FakeBuilder it builds images (scripted) as the docker engine does."""

    name = "fake"
    builds_images = False
    builder: DockerClient | None = None
    client: DockerClient | None = None
    shares_gpus = True  # as the docker and host engines: two cells at once must not be given one GPU

    def __init__(self, script: Script | None = None, together: int = 1,
                 inherited: Mapping[str, str] | None = None, builder: FakeBuilder | None = None) -> None:
        self.script: Script = script if script is not None else {}
        if builder is not None:
            self.builds_images, self.builder = True, builder  # duck-typed: the build side of a DockerClient
        self.together, self.inherited = together, dict(inherited or {})
        self.started: list[FakeRunning] = []
        self._stop = Stop()

    def facts(self) -> dict[str, Any]:
        return {"name": self.name}

    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None, gpu_api: GpuApi | None = None) -> list[Check]:
        return [Check("fake engine", True, "scripted ranks in threads")]

    def gpu_api(self, gpus: tuple[str, ...], image: str, given: GpuApi | None = None) -> GpuApi | None:
        return None  # no container

    def preflight(self, progress: Progress) -> None:
        return None

    def check_results(self, run: Path, progress: Progress) -> None:
        return None

    def cells(self, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
        return selected

    def image_id(self, tag: str) -> str:
        return ""

    def inherited_env(self, image: str) -> dict[str, str]:
        return dict(self.inherited)

    def launch(self, cell: Cell, m: Matrix, *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> launch_mod.Launch:
        if control:
            return launch_mod.control_launch(cell, m, ranks=ranks)
        return launch_mod.launch(cell, m, ranks=ranks, extra_args=extra_args, inherited_env=inherited_env)

    def equivalent(self, spec: CellSpec) -> str:
        return f"# fake engine: {spec.cell_id} attempt {spec.attempt}"

    def concurrent_cells(self, jobs: int) -> int:
        return min(jobs, self.together)

    def interrupt(self) -> None:
        self._stop.set()

    @contextmanager
    def start(self, spec: CellSpec) -> Iterator[FakeRunning]:
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        script = self.script(spec) if callable(self.script) else self.script
        running = FakeRunning(spec, script, self._stop)
        self.started.append(running)
        running.begin()
        try:
            yield running
        finally:
            running.kill()


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
