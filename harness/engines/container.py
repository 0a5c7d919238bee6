"""A cell's container, declared once and pure: every setting NCCL needs in containers, as the SDK's
arguments (engines/docker.py starts it through dockerclient.py) and as a `docker run` line (the dry run
prints it; the doctor starts its probe container from the same declaration). Plain data only: the SDK
builds its own DeviceRequest and Ulimit from the dicts given here."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from .. import launch as launch_mod
from .base import CellSpec

# Set in every cell container besides the variant's NCCL variables.
CELL_ENV = (("HF_HOME", "/tmp/hf"), ("PYTHONUNBUFFERED", "1"))
WORKDIR = "/opt/harness"


@dataclass(frozen=True)
class ContainerConfig:
    """Every setting of a cell's container, declared once: start() hands it to the SDK, the dry run
    prints it as a `docker run` line, and the doctor starts its probe container with it."""

    image: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()  # (host path, container path), read-write
    # None: the host's IPC namespace, since NCCL's SHM transport needs more than Docker's 64 MB /dev/shm
    shm_size: str | None = None
    # NCCL >= 2.24 binds host memory to NUMA nodes (set_mempolicy/mbind): Docker allows it only with CAP_SYS_NICE.
    cap_add: tuple[str, ...] = ("SYS_NICE",)
    gpus: tuple[str, ...] = ()
    gpu_capabilities: tuple[str, ...] = ("gpu",)
    workdir: str = WORKDIR
    # on a Slurm node (engines/noderuntime.py): the node's network (ranks meet at the first node's
    # address), an init that passes scancel's signals on, labels to find it by, and variables passed
    # through from the node's task (Slurm's, the cell's token) by name
    network: str | None = None
    init: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    passthrough: tuple[str, ...] = ()

    @property
    def memlock_unlimited(self) -> bool:
        """NCCL pins host memory (IB, GPUDirect, proxies); gloo on CPU cells does not need it."""
        return bool(self.gpus)

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the SDK's containers.create (besides image, command, name, labels); device
        requests and ulimits as the keyword arguments of the SDK's DeviceRequest and Ulimit, which it
        builds from them (docker.types.HostConfig)."""
        kwargs: dict[str, Any] = {
            "environment": dict(self.env),
            "volumes": {host: {"bind": inside, "mode": "rw"} for host, inside in self.mounts},
            "cap_add": list(self.cap_add),
            "working_dir": self.workdir,
        }
        if self.shm_size:
            kwargs["shm_size"] = self.shm_size
        else:
            kwargs["ipc_mode"] = "host"
        if self.gpus:
            kwargs["device_requests"] = [{"device_ids": list(self.gpus), "capabilities": [list(self.gpu_capabilities)]}]
        if self.memlock_unlimited:
            kwargs["ulimits"] = [{"name": "memlock", "soft": -1, "hard": -1}]
        return kwargs

    def docker_run(self) -> str:
        """The same container as a `docker run` line (minus name and labels), for people to paste."""
        return shlex.join(self.run_argv())

    def run_argv(self, program: str = "docker", devices: tuple[str, ...] = ()) -> list[str]:
        """The `docker run` (or `podman run`: the same flags) words; `devices`: more words before the image
        (a Slurm node's GPUs)."""
        argv = [program, "run", "--rm"]
        argv += [f"--network={self.network}"] if self.network else []
        argv += ["--init"] if self.init else []
        for key, value in self.labels:
            argv += ["--label", f"{key}={value}"]
        argv += [f"--shm-size={self.shm_size}"] if self.shm_size else ["--ipc=host"]
        for cap in self.cap_add:
            argv += ["--cap-add", cap]
        argv += ["-w", self.workdir]
        for host, inside in self.mounts:
            argv += ["-v", f"{host}:{inside}"]
        if self.gpus:
            # the inner quotes matter: --gpus device=0,1 without them silently gives one GPU
            argv += ["--gpus", f'"device={",".join(self.gpus)}"']
        if self.memlock_unlimited:
            argv += ["--ulimit", "memlock=-1:-1"]
        for key, value in self.env:
            argv += ["-e", f"{key}={value}"]
        for key in self.passthrough:
            argv += ["-e", key]
        return argv + [*devices, self.image, *self.command]


def container_config(spec: CellSpec) -> ContainerConfig:
    """The container of one attempt of a cell: pure, so the dry run shows exactly what start() runs."""
    return ContainerConfig(
        image=spec.image,
        command=tuple(spec.launch.argv),
        env=tuple(spec.launch.env) + CELL_ENV,
        mounts=((str(spec.out_dir.resolve()), launch_mod.CONTAINER_OUT),),
        shm_size=spec.shm_size,
        gpus=spec.gpus,
    )
