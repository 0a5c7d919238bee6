"""What a cell's ranks run in on each Slurm node (--node-runtime), as pure words: `host` the nodes' own
Python stack (as the host engine), `docker` and `podman` the cell's image in a container started by
the node's engine (the docker engine's container, engines/container.py, plus what a node needs), `pyxis`
the image through Slurm's own `srun --container-image` (NVIDIA pyxis/enroot). The slurm engine puts the
step into its batch script; nothing here runs anything."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from .. import launch as launch_mod
from .base import CellSpec
from .container import WORKDIR, cdi_device, container_config
from .dockerclient import LABEL, LABEL_CELL, LABEL_OWNER, LABEL_RUN

RUNTIMES = ("host", "docker", "podman", "pyxis")
CONTAINED = ("docker", "podman")  # started by an engine on the node, removed by its labels
# Slurm's variables the rank reads for its placement (workload/events.py), passed into a container
PLACEMENT_VARS = ("SLURMD_NODENAME", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODEID")
# A node's GPUs (those Slurm gave the job: CUDA_VISIBLE_DEVICES, passed through) in a container
GPU_DEVICES = {"docker": ("--gpus", "all"), "podman": ("--device", cdi_device("all"))}


@dataclass(frozen=True)
class NodeStep:
    """The job's srun step: srun's flags besides one task per node, and each node's command (node
    variables such as ${SLURM_NODEID} left for its shell)."""

    srun_flags: tuple[str, ...]
    words: tuple[str, ...]


def labels(spec: CellSpec, owner_marker: str) -> tuple[tuple[str, str], ...]:
    """A node container's labels: the Docker client's (the docker engine's cleanup and the reaper's sweep find it)."""
    return ((LABEL, "cell"), (LABEL_RUN, spec.run_id), (LABEL_CELL, spec.cell_id),
            (f"{LABEL}.attempt", str(spec.attempt)), (LABEL_OWNER, owner_marker))


def node_step(runtime: str, spec: CellSpec, owner_marker: str, passthrough: tuple[str, ...]) -> NodeStep:
    """The srun step of one attempt: `passthrough` names the harness's variables (the cell's token, its
    owner) that a container gets from the node's task, so its processes are found there as on the host."""
    if runtime == "host":
        return NodeStep((), spec.launch.argv)
    if runtime == "pyxis":  # the task itself runs in the image, with the job's environment
        return NodeStep((f"--container-image={spec.image}",
                         f"--container-mounts={spec.out_dir}:{launch_mod.CONTAINER_OUT}",
                         f"--container-workdir={WORKDIR}"), spec.launch.argv)
    config = replace(container_config(spec), network="host", init=True, labels=labels(spec, owner_marker),
                     passthrough=(*passthrough, *PLACEMENT_VARS,
                                  *(("CUDA_VISIBLE_DEVICES",) if spec.launch.device == "cuda" else ())),
                     gpus=(), log_max=None)
    devices = GPU_DEVICES[runtime] if spec.launch.device == "cuda" else ()
    return NodeStep((), tuple(config.run_argv(runtime, devices)))


def remove_line(runtime: str, spec: CellSpec) -> str:
    """A node's shell line that removes the attempt's containers there (before the job is cancelled: a
    killed `docker run` client leaves its container running)."""
    filters = " ".join(f"--filter {shlex.quote(f'label={key}={value}')}" for key, value in
                       ((LABEL_RUN, spec.run_id), (LABEL_CELL, spec.cell_id), (f"{LABEL}.attempt", str(spec.attempt))))
    return f"{runtime} ps -aq {filters} | xargs -r {runtime} rm -f"
