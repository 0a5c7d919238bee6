"""Which waiting cells start now: the pure step of `invoke matrix`'s scheduling, asked again each time an
image is ready or a cell ends (pipeline.py holds the state and starts the cells). A cell starts once its
image is ready (built or found cached), while a slot is free (Engine.concurrent_cells: one on the docker
and host engines, --jobs on the slurm engine) and none of the GPUs it holds is held by a running cell.
Cells keep the matrix's order, except that a cell whose image is still building is passed by later cells
whose image is ready: so on a fresh host the first verdict comes after the first image, not after the last."""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass


@dataclass(frozen=True)
class Waiting:
    """A cell not started yet, as the step sees it."""

    stack: str  # the id of the stack whose image it runs in
    gpus: frozenset[str] = frozenset()  # the GPUs of this machine it holds while it runs (Engine.shares_gpus)


def startable(waiting: Sequence[Waiting], ready: Set[str], running: Sequence[frozenset[str]],
              slots: int) -> tuple[int, ...]:
    """The positions in `waiting` (in the matrix's order) of the cells to start now, given the stacks whose
    image is `ready`, the GPU sets of the cells `running` and the `slots` (cells at once). The first ready cell
    whose GPUs are held waits, and no later cell passes it: only a building image lets later cells go first."""
    free = slots - len(running)
    held: set[str] = set().union(*running)
    chosen: list[int] = []
    for n, cell in enumerate(waiting):
        if len(chosen) >= free:
            break
        if cell.stack not in ready:
            continue
        if cell.gpus & held:
            break
        chosen.append(n)
        held |= cell.gpus
    return tuple(chosen)
