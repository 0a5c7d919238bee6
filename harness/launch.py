"""The command line and environment of one cell's launch: pure, so that the exact command a cell ran
can be printed, tested, and pasted to rerun it by hand."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .matrix import Cell, Matrix
from .workload.redact import shown_env

CONTAINER_WORKLOAD = "/opt/harness/workload/run.py"
CONTAINER_CONTROL = "/opt/harness/workload/control.py"  # the NCCL-only control's entry, beside run.py
CONTAINER_OUT = "/out"


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    ranks: int
    device: str  # cuda | cpu

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


# The supervisor decides hangs, always: torch's process-group timeout (its NCCL watchdog) must not turn a
# hang into a dead rank first. Seen on 2x H200 with the group timeout at timeouts.init (90 s): a rank
# stopped in `prepare` made the peer's watchdog fire at 90 s, before the 120 s `prepare` threshold, and
# torch versions that tear the process down on it turned the seed case (a P2P hang in prepare) into
# "fail: killed". So the group timeout is the longest stall threshold plus room for forensics and kill.
PG_TIMEOUT_MARGIN_S = 60


def process_group_timeout(m: Matrix) -> int:
    """Seconds for init_process_group's timeout: past every phase's stall threshold, so the supervisor's
    verdict comes first (the cell's hard cap may be shorter still; then the cap decides)."""
    phases = m.timeouts.model_dump(exclude={"cell"})
    return int(max(phases.values()) + PG_TIMEOUT_MARGIN_S)


def bandwidth_args(m: Matrix) -> list[str]:
    """The sweep's settings and the time a rank waits for its peers: the workload's and the control's."""
    return ["--iters", str(m.bandwidth_iters), "--warmup", str(m.bandwidth_warmup), "--trials", str(m.bandwidth_trials),
            "--init-timeout", str(process_group_timeout(m))]


def sizes_args(m: Matrix) -> list[str]:
    return ["--sizes", ",".join(str(s) for s in m.bandwidth_sizes)] if m.bandwidth_sizes else []


def workload_args(m: Matrix, out: str, device: str, expect_env: dict[str, str], extra: tuple[str, ...] = ()) -> list[str]:
    return ["--out", out, "--device", device, *bandwidth_args(m), "--expect-env", json.dumps(expect_env, sort_keys=True),
            *sizes_args(m), *extra]


def launch(
    cell: Cell,
    m: Matrix,
    *,
    ranks: int,
    python: str = "python",
    workload: str = CONTAINER_WORKLOAD,
    out: str = CONTAINER_OUT,
    port: int = 29500,
    extra_args: tuple[str, ...] = (),
    inherited_env: dict[str, str] | None = None,
) -> Launch:
    """argv + env for `ranks` ranks of `cell` through its launcher (GPU cells: one rank per GPU)."""
    device = "cpu" if cell.stack.is_cpu else "cuda"
    env = cell.variant.env_dict
    # what the rank should see unless the launcher changes it: the host's or image's own variables
    # under the variant's; the rank reports every difference (the launcher's doing)
    # the values only as they may be written down (workload/redact.py): this line is recorded with the cell
    args = workload_args(m, out, device, {**(inherited_env or {}), **shown_env(env)}, extra_args)
    return Launch(launcher_argv(cell, ranks, python, port, workload, args), tuple(sorted(env.items())), ranks, device)


def launcher_argv(cell: Cell, ranks: int, python: str, port: int, script: str, args: list[str]) -> tuple[str, ...]:
    """`script args` started `ranks` times by the cell's launcher."""
    if cell.launcher == "torchrun":
        return (python, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(ranks),
                "--master_addr", "127.0.0.1", "--master_port", str(port), script, *args)
    # --multi_gpu with Accelerator(cpu=True) gives gloo ranks; --cpu would start no process group.
    multi = ["--multi_gpu"] if ranks > 1 else []
    return (python, "-m", "accelerate.commands.launch", *multi, "--num_processes", str(ranks),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(port), script, *args)


def control_launch(cell: Cell, m: Matrix, *, ranks: int, python: str = "python", control: str = CONTAINER_CONTROL,
                   out: str = CONTAINER_OUT, port: int = 29500) -> Launch:
    """The NCCL-only control (workload/nccl_control.py) for `cell`: the cell's launcher, environment (its
    variant's NCCL variables) and rank count, the control's entry instead of the workload, and the
    matrix's bandwidth settings, so its busbw is the in-image reference for the cell's own figure."""
    args = ["--out", out, *bandwidth_args(m), *sizes_args(m)]
    return Launch(launcher_argv(cell, ranks, python, port, control, args), tuple(sorted(cell.variant.env_dict.items())),
                  ranks, "cpu" if cell.stack.is_cpu else "cuda")
