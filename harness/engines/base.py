"""What every engine offers the pipeline and the supervisor, and nothing more: which cells it runs and
whether their images are built (and by which Docker client), the launch of a cell in the engine's own
world (paths, ports), a pasteable equivalent, how many cells run at once, and one started cell as a
handle that can be polled, signalled, inspected and killed. Engines never decide outcomes; everything
that differs between engines lives behind this interface, which every engine implements in full
(tests/test_engine_interface.py); callers never ask which engine they hold."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..kinds import AttemptKind, GpuApi
from ..launch import Launch

if TYPE_CHECKING:
    from ..matrix import Cell, Matrix
    from ..progress import Progress
    from .dockerclient import DockerClient


# The launcher's output in the attempt folder, where the engine writes it there (host, slurm); the supervisor
# caps it (rankfiles.cap)
LAUNCHER_LOG = "launcher.log"


@dataclass(frozen=True)
class CellSpec:
    """Everything an engine needs to start one attempt of one cell."""

    run_id: str
    cell_id: str
    launch: Launch
    out_dir: Path  # on the host; the engine maps it to launch's --out
    image: str = ""  # docker only
    gpus: tuple[str, ...] = ()  # device ids; () = CPU cell
    # docker: how the container gets the GPUs, chosen once per run (DockerEngine.gpu_api, or --gpu-api); None:
    # not chosen (CPU cells, engines without a container here)
    gpu_api: GpuApi | None = None
    shm_size: str | None = None  # docker: a /dev/shm size instead of the host IPC namespace
    attempt: int = 1
    # NCCL_/TORCH_/CUDA_/ACCELERATE_ variables the launcher starts with from the host or the image (not
    # the variant's): recorded, so that a variable is reported as inherited, not as the launcher's change
    inherited_env: tuple[tuple[str, str], ...] = ()
    kind: AttemptKind = "cell"  # "control": the NCCL-only control run for the cell (launch.control_launch)


@dataclass(frozen=True)
class Check:
    """One readiness fact for `invoke doctor` and the run's preflight: what was seen, and the fix."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    blocking: bool = True


@dataclass(frozen=True)
class RemoteDumps:
    """What the nodes' collectors took of their ranks (Running.dump_ranks), by rank."""

    py_spy: dict[str, str]
    native: dict[str, str]
    ras: str = ""  # NCCL's RAS STATUS, from the first node that had one


class Stop:
    """What an engine's interrupt() sets and its started cells' poll() checks: Ctrl-C for cells supervised
    in worker threads (pipeline: --jobs on the slurm engine), where Python raises KeyboardInterrupt in
    the main thread only. Once set, every poll raises it, in its own thread, where the supervisor
    records `interrupted` and kills the cell; attempts started after it end the same way."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise KeyboardInterrupt


class Running(Protocol):
    """A started cell."""

    def poll(self) -> int | None:
        """The launcher's exit code once it has ended, else None."""

    def signal(self, pid: int, signame: str) -> None:
        """Send a signal (e.g. "USR1", "STOP") to a rank's pid as the rank sees it."""

    def native_dump(self, pid: int) -> str:
        """`py-spy dump` of a rank where py-spy is installed (it reads a stopped rank too), else ""."""

    def native_stacks(self, pid: int) -> str:
        """Every thread's native stack of a rank (eu-stack, else gdb: collector.NATIVE_TOOLS) where the
        rank's machine or image has one (they read a stopped rank too and leave it stopped), else ""."""

    def process_list(self) -> str:
        """The cell's processes with their state (R, S, T for stopped...), for forensics."""

    def nccl_ras(self) -> str:
        """NCCL's RAS service's STATUS report where the ranks run (collector.nccl_ras, in their network
        namespace), "" where none answers (gloo, NCCL before 2.24, NCCL_RAS_ENABLE=0)."""

    def dump_ranks(self, pids: dict[int, int]) -> RemoteDumps | None:
        """Where the ranks run on other machines (slurm): SIGUSR1 to every rank there (its threads land in
        the attempt folder), py-spy's dumps and native stacks by rank; None: the supervisor does it through
        signal(), native_dump() and native_stacks() (every rank is reachable from here)."""

    def gone(self, pids: dict[int, int]) -> set[int]:
        """Of these ranks (rank: pid as the rank saw it), those whose process has exited (a zombie too);
        empty where it cannot be told. A rank killed while its launcher has not yet noticed is gone, not
        stopped: the supervisor asks before it calls a silent rank a hang."""

    def output_tail(self, lines: int = 80) -> str:
        """The end of the launcher's merged stdout/stderr."""

    def kill(self) -> None:
        """Stop everything of the cell now."""

    def leftovers(self) -> list[str]:
        """What of the cell still exists (containers, processes); [] once cleaned up."""


class Engine(Protocol):
    @property
    def name(self) -> str:
        """docker, host, slurm: run.json's engine, the records' and the watchdog's."""

    @property
    def builds_images(self) -> bool:
        """Whether the cells run in images the harness builds (then `builder` builds them)."""

    @property
    def builder(self) -> DockerClient | None:
        """The Docker client that builds the cells' images (connected on first use: InfraError when no
        engine answers); None for an engine whose cells run on the nodes' own stack."""

    @property
    def client(self) -> DockerClient | None:
        """The Docker client this engine has connected already, if any: the reaper's sweep reuses it
        instead of connecting again. Never connects."""

    def facts(self) -> dict[str, Any]:
        """What run.json records about the engine (name, version, runtimes...)."""

    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None, gpu_api: GpuApi | None = None) -> list[Check]:
        """Everything this engine needs for a run, for `invoke doctor` (slurm: `results_dir` is where the
        nodes' probe job writes, to check that every node sees it; docker: `gpu_api` (--gpu-api) the one way
        to give containers GPUs to check, else both)."""

    def gpu_api(self, gpus: tuple[str, ...], image: str, given: GpuApi | None = None) -> GpuApi | None:
        """How this run's cell containers get `gpus`, chosen once per run: `given` (--gpu-api) or what a
        probe finds (docker, preferring `image`, one the run uses: InfraError when no way works); None for a
        CPU-only run and for an engine that starts no container from here (host; slurm: the node runtime's)."""

    def preflight(self, progress: Progress) -> None:
        """The fast checks before a run: raise InfraError for what blocks it, warn for the rest."""

    def check_results(self, run: Path, progress: Progress) -> None:
        """Raise InfraError when the ranks cannot write into the run folder where this host reads it
        (slurm: a folder not shared by every node); one machine's engines have nothing to check."""

    def cells(self, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
        """The cells this engine runs for a selection (the host engine: on its own stack)."""

    def image_id(self, tag: str) -> str:
        """The engine's id of a built image ("" for an engine without images)."""

    def inherited_env(self, image: str) -> dict[str, str]:
        """The NCCL_/TORCH_/CUDA_/ACCELERATE_ variables a cell starts with here (the host's environment,
        or the image's ENV), secrets masked."""

    def launch(self, cell: Cell, m: Matrix, *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> Launch:
        """The cell's launcher command, in the engine's own paths and ports; `control`: the NCCL-only
        control's instead of the workload's (launch.control_launch), with the same launcher and variables."""

    def equivalent(self, spec: CellSpec) -> str:
        """A shell line that starts the same cell by hand, ready to paste."""

    def concurrent_cells(self, jobs: int) -> int:
        """How many cells may run at the same time for --jobs `jobs`: 1 where they share this machine's
        GPUs (together they would measure each other); the slurm engine's `jobs`, each its own job."""

    @property
    def shares_gpus(self) -> bool:
        """Whether the cells started here share this machine's GPUs (docker, host), so that two cells running at
        once must never be given the same one (schedule.startable); False where each cell gets GPUs of nodes of
        its own (slurm: a job per attempt, --exclusive with --jobs)."""

    def start(self, spec: CellSpec) -> AbstractContextManager[Running]:
        """Start the cell; leaving the context removes everything it started, on every path."""

    def interrupt(self) -> None:
        """End every attempt running now, and any started after, as Ctrl-C ends one (see Stop): for
        cells supervised in worker threads."""
