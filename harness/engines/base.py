"""What every engine offers the supervisor: start one cell, and a handle that can be polled, signalled,
inspected and killed. Engines never decide outcomes."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..launch import Launch


@dataclass(frozen=True)
class CellSpec:
    """Everything an engine needs to start one attempt of one cell."""

    run_id: str
    cell_id: str
    launch: Launch
    out_dir: Path  # on the host; the engine maps it to launch's --out
    image: str = ""  # docker only
    gpus: tuple[str, ...] = ()  # device ids; () = CPU cell
    shm_size: str | None = None  # docker: a /dev/shm size instead of the host IPC namespace
    attempt: int = 1


class Running(Protocol):
    """A started cell."""

    def poll(self) -> int | None:
        """The launcher's exit code once it has ended, else None."""

    def signal(self, pid: int, signame: str) -> None:
        """Send a signal (e.g. "USR1", "STOP") to a rank's pid as the rank sees it."""

    def native_dump(self, pid: int) -> str:
        """`py-spy dump` of a rank where py-spy is installed (it reads a stopped rank too), else ""."""

    def process_list(self) -> str:
        """The cell's processes with their state (R, S, T for stopped...), for forensics."""

    def output_tail(self, lines: int = 80) -> str:
        """The end of the launcher's merged stdout/stderr."""

    def kill(self) -> None:
        """Stop everything of the cell now."""

    def leftovers(self) -> list[str]:
        """What of the cell still exists (containers, processes); [] once cleaned up."""


class Engine(Protocol):
    name: str

    def start(self, spec: CellSpec) -> AbstractContextManager[Running]:
        """Start the cell; leaving the context removes everything it started, on every path."""
