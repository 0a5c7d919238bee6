"""The closed sets records are written in, each defined once: outcome statuses, phases, error
classes, how an attempt ended, launchers, how NCCL was installed, build statuses, how GPUs reach a container."""

from __future__ import annotations

from typing import Literal, get_args

from .workload.classify import ERROR_CLASSES as WORKLOAD_ERROR_CLASSES
from .workload.cli import PHASES as WORKLOAD_PHASES
from .workload.nccl_control import ERROR_CLASSES as CONTROL_ERROR_CLASSES
from .workload.nccl_control import PHASES as CONTROL_PHASES

# Literal types; the tuple of values of each is typing.get_args of it. The workload (harness/workload,
# which must not import the rest of harness) is the source of its phases and of the error classes it
# reports; the types below add what only the harness produces (subscripting Literal with a tuple is the
# same as listing its values).

Status = Literal["pass", "wrong", "hang", "fail", "slow", "build-error", "infra-error", "n/a", "interrupted"]
STATUSES: tuple[Status, ...] = get_args(Status)
RETRYABLE: tuple[Status, ...] = ("hang", "infra-error")  # `--retries` reruns these
GOOD: tuple[Status, ...] = ("pass", "n/a")  # not a problem: compare counts a change to these as an improvement
FAILED: tuple[Status, ...] = ("fail", "hang", "wrong", "build-error", "slow")  # `invoke matrix` exits 1
MEASURED: tuple[Status, ...] = ("pass", "slow")  # every phase ran: bandwidth and transports to show

STARTUP = "startup"  # before any rank has said anything: container start, imports, launcher
WorkloadPhase = Literal[WORKLOAD_PHASES]  # type: ignore[valid-type]
# the NCCL-only control's phases (workload/nccl_control.py) are phases of its attempts of a cell
_PHASES = (STARTUP, *WORKLOAD_PHASES, *CONTROL_PHASES)
Phase = Literal[_PHASES]  # type: ignore[valid-type]
PHASES: tuple[str, ...] = get_args(Phase)
# The stall threshold (a matrixfile.Timeouts field) each control phase is held to: loading the libraries,
# creating and destroying the communicator are init's kind of work; the sweep is the bandwidth phase's.
CONTROL_THRESHOLDS: dict[str, str] = {"nccl-load": "init", "nccl-init": "init", "nccl-allreduce": "bandwidth",
                                      "nccl-teardown": "init"}
assert set(CONTROL_THRESHOLDS) == set(CONTROL_PHASES)


def phase_index(phase: str | None) -> int:
    """How far a rank got: a phase's position in its sequence (the workload's or the control's); -1
    before the first one (startup, None)."""
    for sequence in (WORKLOAD_PHASES, CONTROL_PHASES):
        if phase in sequence:
            return sequence.index(phase)
    return -1

# "killed": a rank died by a signal without a word (only the supervisor can tell); the control's own
# classes say it could not load libnccl or libcudart
_ERROR_CLASSES = (*WORKLOAD_ERROR_CLASSES, *CONTROL_ERROR_CLASSES, "killed")
ErrorClass = Literal[_ERROR_CLASSES]  # type: ignore[valid-type]
ERROR_CLASSES: tuple[str, ...] = get_args(ErrorClass)

# the cell's workload, the NCCL-only control run for it, or one step of the rescue search (ladder.py)
AttemptKind = Literal["cell", "control", "rescue"]
ATTEMPT_KINDS: tuple[AttemptKind, ...] = get_args(AttemptKind)
ControlWhen = Literal["always", "failing", "never"]  # `--control`: for which cells the control runs
CONTROL_WHEN: tuple[ControlWhen, ...] = get_args(ControlWhen)
ControlStatus = Literal["pass", "hang", "fail", "not-run"]  # record.control: what NCCL alone did
RescueStatus = Literal["rescued", "not-rescued", "not-run"]  # record.rescue: what the rescue search found
# why a cell's rescue search stopped (ladder.SearchEnd): a step made the cell pass, Ctrl-C, its time budget
# was spent, its attempt budget cut the candidates short, or every candidate was tried
RescueEnd = Literal["rescued", "interrupted", "time", "attempts", "steps"]
RESCUE_ENDS: tuple[RescueEnd, ...] = get_args(RescueEnd)
Layer = Literal["nccl", "above-nccl", "unknown"]  # record.layer: where a hang or failure lies

EndedBy = Literal["exited", "stall", "cap", "interrupted", "infra"]  # how the supervisor ended an attempt
ENDED_BY: tuple[EndedBy, ...] = get_args(EndedBy)
Launcher = Literal["accelerate", "torchrun"]
LAUNCHERS: tuple[Launcher, ...] = get_args(Launcher)
NcclVia = Literal["bundled", "pip", "system"]  # torch's own NCCL, a pinned pip wheel, a system libnccl2 + LD_PRELOAD
NCCL_VIAS: tuple[NcclVia, ...] = get_args(NcclVia)
# Where a variable a rank saw came from: the variant asked for it, the harness set it (logging, error
# handling), the launcher added or changed it (Accelerate's RTX 40 rule...), it was in the host's or
# image's environment; "host or image" where an older record cannot tell inherited from launcher.
EnvOrigin = Literal["variant", "harness", "launcher", "inherited", "host or image"]
ENV_ORIGINS: tuple[EnvOrigin, ...] = get_args(EnvOrigin)
BuildStatus = Literal["built", "cached", "build-error"]
BUILD_STATUSES: tuple[BuildStatus, ...] = get_args(BuildStatus)
# How a cell's container gets its GPUs (engines/container.py; `--gpu-api`, run.json's gpu_api): CDI devices
# (`--device nvidia.com/gpu=0`: NVIDIA's recommended way for Docker 25+, podman and rootless engines; the only
# one on the GPU machines, which have no NVIDIA Container Toolkit) or the NVIDIA runtime's device request (`--gpus`).
# In the order the probe tries them.
GpuApi = Literal["cdi", "nvidia"]
GPU_APIS: tuple[GpuApi, ...] = get_args(GpuApi)

for _group in (RETRYABLE, GOOD, FAILED, MEASURED):
    assert set(_group) <= set(STATUSES), _group

__all__ = ["WORKLOAD_ERROR_CLASSES", "WORKLOAD_PHASES", "CONTROL_ERROR_CLASSES", "CONTROL_PHASES", "Status",
           "STATUSES", "RETRYABLE", "GOOD", "FAILED", "MEASURED", "STARTUP", "WorkloadPhase", "Phase", "PHASES",
           "CONTROL_THRESHOLDS", "phase_index", "ErrorClass", "ERROR_CLASSES", "AttemptKind", "ATTEMPT_KINDS",
           "ControlWhen", "CONTROL_WHEN", "ControlStatus", "RescueStatus", "RescueEnd", "RESCUE_ENDS", "Layer",
           "EndedBy", "ENDED_BY", "Launcher", "LAUNCHERS", "NcclVia", "NCCL_VIAS", "EnvOrigin", "ENV_ORIGINS",
           "BuildStatus", "BUILD_STATUSES", "GpuApi", "GPU_APIS"]
