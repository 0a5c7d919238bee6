"""Base images made on this host (no registry needed): debootstrap a Debian root file system and
import it into the engine. Used by the CPU stacks and as a stand-in for nvidia/cuda when offline."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import proc
from .errors import InfraError
from .progress import Progress

if TYPE_CHECKING:
    from .engines.dockerclient import DockerClient


@dataclass(frozen=True)
class LocalBase:
    ref: str
    suite: str
    packages: tuple[str, ...]


PACKAGES_LABEL = "io.nccl-harness.packages"
LOCAL_BASES = {
    "harness-base:bookworm": LocalBase(
        # elfutils: eu-stack, every thread's native stack of a hung rank (NCCL's C++ threads too)
        "harness-base:bookworm", "bookworm", ("python3", "python3-venv", "python3-pip", "ca-certificates", "elfutils")
    ),
}


def is_local(ref: str) -> bool:
    return ref in LOCAL_BASES


def ensure(docker: DockerClient, ref: str, log: Path, progress: Progress, mirror: str | None = None) -> bool:
    """Make the base image unless the engine has it; True when it was made now."""
    base = LOCAL_BASES[ref]
    if docker.image_exists(ref) and docker.image_labels(ref).get(PACKAGES_LABEL) == ",".join(base.packages):
        return False  # made with these packages (a base made before a package was added is made again)
    if proc.which("debootstrap") is None:
        raise InfraError(
            f"the base image {ref} is missing and debootstrap is not installed to make it. "
            "Fix: apt-get install debootstrap (scripts/setup.sh does), then run again."
        )
    work = Path(tempfile.mkdtemp(prefix="harness-rootfs-"))
    try:
        rootfs, tarball = work / "rootfs", work / "rootfs.tar"
        argv = ["debootstrap", "--variant=minbase", f"--include={','.join(base.packages)}", base.suite, str(rootfs)]
        if mirror:
            argv.append(mirror)
        with progress.task(f"making base image {ref} with debootstrap (about a minute)"):
            proc.check(
                proc.run(argv, timeout=1200, log=log, on_line=progress.detail),
                f"debootstrap of {base.suite}",
                f"See {log}.",
            )
            proc.check(proc.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], timeout=600, log=log), "tar", "")
            docker.import_rootfs(tarball, ref, {"io.nccl-harness.suite": base.suite, PACKAGES_LABEL: ",".join(base.packages)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return True
