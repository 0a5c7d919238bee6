"""What a dead harness left running, found and removed: host processes by the owner in their environment
(owner.OWNER_VAR), containers by their owner label (engines/dockerclient.py LABEL_OWNER), Slurm jobs by the
owner in their comment (engines/slurm.py).

Seen before (issue 14): a harness killed mid-cell (SIGKILL, or SIGTERM before it was handled) left the
launcher and both ranks running for as long as the cell would have run, and `--resume` then measured
the next cell's bandwidth beside them (85 s instead of 56-60 s) without a word. Two guards:
- the watchdog: every harness starts one beside its first cell (`python -m harness.reaper MARKER ENGINE`,
  owner.watch_over); it waits for its harness to end, however it ends, then removes that harness's
  processes and containers;
- `sweep`: every command, before it runs or measures anything, removes what harnesses that are now dead
  left (the watchdog itself may have been killed with them), and says so.
Only a dead owner's leftovers are touched: other harnesses run on this machine at the same time.
`invoke clean` also removes what older harness versions left without an owner."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import statefile
from .engines import host, slurm
from .errors import InfraError
from .owner import JOB_NOTES, OWNER_VAR, Owner, job_note

if TYPE_CHECKING:
    from .engines.dockerclient import DockerClient
    from .progress import Progress


@dataclass(frozen=True)
class Leftover:
    """One process or container a harness started, with its owner (None: an older harness, no owner)."""

    engine: str  # host | docker | slurm
    name: str  # a pid, a container name, or a job id
    detail: str
    owner: Owner | None

    def describe(self) -> str:
        kind = {"host": "process", "docker": "container", "slurm": "slurm job"}[self.engine]
        return f"{kind} {self.name} {self.detail}".strip()


def _processes() -> list[Leftover]:
    return [Leftover("host", str(p.pid), f"({p.state}) {p.cmd[:80]}", Owner.parse(p.value))
            for p in host.marked(OWNER_VAR)]


def _containers(docker: DockerClient | None) -> list[Leftover]:
    if docker is None:
        return []
    from .engines.dockerclient import LABEL, LABEL_CELL, LABEL_OWNER, LABEL_RUN

    found = []
    # cells only (io.nccl-harness=cell): the intermediate containers of a `docker build` carry the
    # image's labels (io.nccl-harness=base or image) and belong to a build still running
    for name, labels in docker.labelled(f"{LABEL}=cell"):
        owner = Owner.parse(labels[LABEL_OWNER]) if LABEL_OWNER in labels else None
        cell = f"(run {labels[LABEL_RUN]}, cell {labels[LABEL_CELL]})" if LABEL_CELL in labels else ""
        found.append(Leftover("docker", name, cell, owner))
    return found


MAX_NOTE_BYTES = 4096  # a note holds one owner marker: host/boot/pid/start


def _dead_notes() -> list[Path]:
    """The notes (owner.job_note) of harnesses that had Slurm jobs and are gone."""
    dead = []
    try:
        notes = list(JOB_NOTES.iterdir())
    except OSError:
        return []
    for note in notes:
        # a note only sends the sweep to ask Slurm, and `invoke clean` asks it anyway: one that is not a harness's
        # (too big, not a file: a FIFO there hung every command) names no harness and is passed over
        try:
            marker = Owner.parse(statefile.read_bytes(note, MAX_NOTE_BYTES).decode(errors="replace"))
        except (OSError, statefile.Damaged):  # removed meanwhile by another command's sweep, or damaged
            continue
        if marker is not None and marker.dead():
            dead.append(note)
    return dead


def _jobs(ask: bool) -> list[Leftover]:
    """The harness's jobs Slurm still lists, asked only when `ask` (a dead harness's note, or `unowned`):
    a short wait where a controller is configured but down."""
    if not ask:
        return []
    return [Leftover("slurm", job_id, f"({name}, {state})", Owner.parse(comment))
            for job_id, name, state, comment in slurm.queued(timeout=5)]


def _remove(items: list[Leftover], docker: DockerClient | None) -> None:
    if any(i.engine == "host" for i in items):  # again until none is left: a launcher may start a rank between two looks
        host.kill_all(lambda: [p for p in host.marked(OWNER_VAR) if _dead(p.value)])
    for item in items:
        if item.engine == "docker" and docker is not None:
            docker.remove_container(item.name)
    slurm.cancel([i.name for i in items if i.engine == "slurm"])


def _dead(marker: str) -> bool:
    owner = Owner.parse(marker)
    return owner is not None and owner.dead()


def connect_docker(timeout: int = 3) -> DockerClient | None:
    """A client of the Docker engine when one answers, else None (the host engine's machines have none)."""
    from .engines.dockerclient import DockerClient

    try:
        return DockerClient.connect(timeout=timeout)
    except InfraError:
        return None


def sweep(progress: Progress, docker: DockerClient | None = None, *, unowned: bool = False,
          connect: bool = True) -> list[Leftover]:
    """Remove what dead harnesses left (and, with `unowned`, what older harnesses left without an
    owner), on the host and, when one answers, in the Docker engine; each said in one line."""
    if docker is None and connect:
        docker = connect_docker()
    dead_notes = _dead_notes()
    found = [item for item in _processes() + _containers(docker) + _jobs(unowned or bool(dead_notes))
             if (item.owner.dead() if item.owner is not None else unowned)]
    _remove(found, docker)
    for note in dead_notes:  # their jobs are cancelled now
        note.unlink(missing_ok=True)
    if not found:
        return []
    by_owner: dict[str, list[Leftover]] = {}
    for item in found:
        by_owner.setdefault(f"a dead harness ({item.owner.describe()})" if item.owner else "an older harness",
                            []).append(item)
    for who, items in by_owner.items():
        progress.say(f"Removed what {who} left running, before anything else: "
                     + "; ".join(i.describe() for i in items))
    return found


def reap(marker: str, engine: str) -> None:
    """The watchdog's work once its harness has ended: its processes, and its containers or jobs on `engine`."""
    if engine == "slurm":  # first: a cancelled job's ranks end, and none starts after the kill below
        slurm.cancel([job_id for job_id, _, _, comment in slurm.queued() if comment == marker])
    host.kill_all(lambda: [p for p in host.marked(OWNER_VAR) if p.value == marker])
    if engine == "docker":
        docker = connect_docker(timeout=10)
        if docker is not None:
            from .engines.dockerclient import LABEL_OWNER

            for name in docker.leftovers(f"{LABEL_OWNER}={marker}"):
                docker.remove_container(name)


def main(argv: list[str]) -> int:
    """`python -m harness.reaper MARKER ENGINE`: wait for the harness on the other end of stdin to end."""
    marker, engine = argv
    for sig in (signal.SIGINT, signal.SIGHUP):  # a terminal's Ctrl-C or hangup is for the harness
        signal.signal(sig, signal.SIG_IGN)
    if engine == "docker":
        from .engines import dockerclient  # noqa: F401 - the SDK imported now, so that removing the containers takes no longer than it must
    sys.stdin.buffer.read()  # returns at EOF: the harness has ended (exited, or was killed)
    reap(marker, engine)
    job_note(marker).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
