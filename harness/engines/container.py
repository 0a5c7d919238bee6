"""A cell's container, declared once and pure: every setting NCCL needs in containers, as the SDK's
arguments (engines/docker.py starts it through dockerclient.py) and as a `docker run` line (the dry run
prints it; the doctor and the GPU probe start their containers from the same declaration). Plain data
only: the SDK builds its own DeviceRequest and Ulimit from the dicts given here."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from .. import launch as launch_mod
from ..kinds import GpuApi
from .base import CellSpec

# Set in every cell container besides the variant's NCCL variables.
CELL_ENV = (("HF_HOME", "/tmp/hf"), ("PYTHONUNBUFFERED", "1"))
WORKDIR = "/opt/harness"
# The CDI kind of NVIDIA's GPUs, as `nvidia-ctk cdi generate` writes it: one device per GPU, named by its
# index or UUID (and `all`), given to a container as `--device nvidia.com/gpu=0`.
CDI_KIND = "nvidia.com/gpu"
# The GPUs of a cell's container when the run did not choose (a spec made without the run's choice, a CPU
# cell): the NVIDIA runtime's request, what the harness asked for before CDI.
DEFAULT_GPU_API: GpuApi = "nvidia"


# The two ways (kinds.GpuApi) as people read them: the doctor, the errors, the run's line, the report's header
GPU_API_NAMES: dict[GpuApi, str] = {"cdi": "CDI", "nvidia": "the NVIDIA runtime"}


def cdi_device(gpu: str) -> str:
    """The CDI name of one GPU (an index, a UUID or `all`)."""
    return f"{CDI_KIND}={gpu}"


def gpu_text(api: GpuApi, gpus: tuple[str, ...]) -> str:
    """A way with its `docker run` words for these GPUs: `CDI (--device nvidia.com/gpu=0)`,
    `the NVIDIA runtime (--gpus "device=0,1")`; the way alone without GPUs."""
    words = " ".join(ContainerConfig("", (), gpus=gpus, gpu_api=api).gpu_argv()) if gpus else ""
    return f"{GPU_API_NAMES[api]} ({words})" if words else GPU_API_NAMES[api]


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
    gpu_api: GpuApi = DEFAULT_GPU_API  # how the engine gives the container its GPUs: CDI devices or the NVIDIA runtime
    gpu_capabilities: tuple[str, ...] = ("gpu",)  # the NVIDIA runtime's; a CDI device brings what its spec says
    workdir: str = WORKDIR
    # on a Slurm node (engines/noderuntime.py): the node's network (ranks meet at the first node's
    # address), an init that passes scancel's signals on, labels to find it by, and variables passed
    # through from the node's task (Slurm's, the cell's token) by name
    network: str | None = None
    init: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    passthrough: tuple[str, ...] = ()
    # The engine keeps at most this much of the launcher's output (json-file, one file: the oldest is dropped,
    # the tail that output_tail reads is kept). Issue 22: 400 MB of stdout per rank was kept whole. None: the
    # output is not the engine's to keep (a Slurm node's container writes to the task's launcher.log, which
    # the supervisor caps like the host engine's: rankfiles.cap).
    log_max: str | None = "64m"

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
            kwargs["device_requests"] = [self.device_request()]
        if self.memlock_unlimited:
            kwargs["ulimits"] = [{"name": "memlock", "soft": -1, "hard": -1}]
        if self.log_max:
            kwargs["log_config"] = {"type": "json-file", "config": dict(self.log_options())}
        return kwargs

    def log_options(self) -> tuple[tuple[str, str], ...]:
        """The json-file log driver's options (docker run --log-opt): one file of at most log_max."""
        return (("max-size", self.log_max), ("max-file", "1")) if self.log_max else ()

    def device_request(self) -> dict[str, Any]:
        """The GPUs as the keyword arguments of the SDK's DeviceRequest. CDI: the driver "cdi" and one
        device name per GPU; the docker CLI's `--device nvidia.com/gpu=0` sends the same request (seen:
        the docker 28 CLI's and the SDK's both reached a Docker 20.10 daemon as `could not select device
        driver "cdi"`). The NVIDIA runtime: the ids exactly, with the capabilities (the CLI's `--gpus`)."""
        if self.gpu_api == "cdi":
            return {"driver": "cdi", "device_ids": [cdi_device(gpu) for gpu in self.gpus]}
        return {"device_ids": list(self.gpus), "capabilities": [list(self.gpu_capabilities)]}

    def gpu_argv(self) -> list[str]:
        """The same GPUs as `docker run` words: one --device per GPU for CDI, else --gpus."""
        if self.gpu_api == "cdi":
            return [word for gpu in self.gpus for word in ("--device", cdi_device(gpu))]
        # the inner quotes matter: --gpus device=0,1 without them silently gives one GPU
        return ["--gpus", f'"device={",".join(self.gpus)}"']

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
            argv += self.gpu_argv()
        if self.memlock_unlimited:
            argv += ["--ulimit", "memlock=-1:-1"]
        if self.log_max:
            argv += ["--log-driver", "json-file"]
            for key, value in self.log_options():
                argv += ["--log-opt", f"{key}={value}"]
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
        gpu_api=spec.gpu_api or DEFAULT_GPU_API,
    )
