"""Where ranks run: `docker` (one container per attempt, through the Docker SDK), `host` (the launcher
as a subprocess of this Python) or `slurm` (one Slurm job per attempt, a launcher per node). base.py
says what every engine offers (the whole of what callers use), dockerclient.py is the one module that
talks to Docker (the build stage uses it too), and `choose` picks an engine from the --engine flag."""

from __future__ import annotations

from dataclasses import replace

from ..errors import HarnessError, InfraError, closest
from ..progress import Progress
from .base import Engine
from .docker import DockerEngine
from .host import HostEngine
from .slurm import SlurmEngine, SlurmOptions

NAMES = ("docker", "host", "slurm")


def choose(choice: str | None, progress: Progress, slurm: SlurmOptions | None = None, jobs: int = 1) -> Engine:
    """--engine docker|host|slurm; without it docker when reachable, else host (said in one line).
    `slurm`: the --nodes/--partition/... flags, which only the slurm engine takes; `jobs` (--jobs): the
    slurm engine's cells at the same time (the others run one at a time: they share this machine's GPUs)."""
    if choice not in (None, *NAMES):
        guess = closest(choice, NAMES)
        raise HarnessError(f"--engine {choice}: unknown engine{f'; did you mean {guess}?' if guess else '.'} "
                           "Fix: use --engine docker, --engine host or --engine slurm.")
    if slurm is not None and choice != "slurm":
        raise HarnessError("--nodes, --gpus-per-node, --node-runtime, --partition, --account, --time and --slurm-arg are for "
                           "the slurm engine. "
                           "Fix: add --engine slurm, or leave them out.")
    if choice == "slurm":
        return SlurmEngine(replace(slurm or SlurmOptions(), jobs=jobs))
    if choice == "host":
        return HostEngine()
    try:
        return DockerEngine.connect()
    except InfraError:
        if choice == "docker":
            raise
    progress.say(
        "No Docker engine reachable: running the host engine on the stack installed in this Python "
        "(NCCL variants still apply). For the full matrix in containers: scripts/setup.sh, then run again."
    )
    return HostEngine()
