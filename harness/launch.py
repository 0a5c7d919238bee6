"""The command line and environment of one cell's launch: pure, so that the exact command a cell ran
can be printed, tested, and pasted to rerun it by hand."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from .imagefacts import IMAGE_PYTHON
from .matrix import Cell, Matrix
from .workload.redact import shown_env

CONTAINER_WORKLOAD = "/opt/harness/workload/run.py"
CONTAINER_CONTROL = "/opt/harness/workload/control.py"  # the NCCL-only control's entry, beside run.py
CONTAINER_OUT = "/out"


def container_python(cell: Cell) -> str:
    """The Python a cell's launcher runs in its container: the harness's venv's, or the user's image's."""
    return IMAGE_PYTHON if cell.stack.is_image else "python"  # IMAGE_PYTHON: the thin layer's wrapper


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


def workload_args(m: Matrix, out: str, device: str, expect_env: dict[str, str | None],
                  extra: tuple[str, ...] = ()) -> list[str]:
    # the workload's alone: the NCCL-only control times all-reduce
    collectives = ["--collectives", ",".join(m.bandwidth_collectives)] if m.bandwidth_collectives != ("all_reduce",) else []
    return ["--out", out, "--device", device, *bandwidth_args(m), "--expect-env", json.dumps(expect_env, sort_keys=True),
            *sizes_args(m), *collectives, *extra]


@dataclass(frozen=True)
class Nodes:
    """Where the ranks of a multi-node launch meet, as each node's launcher sees it: the values are
    literal, or shell variables (NODE_VARS) that the node's shell expands (Slurm sets them per task)."""

    count: str  # how many nodes
    rank: str  # this node's index
    addr: str  # the rendezvous host (the first node)


ONE_NODE = Nodes("1", "0", "127.0.0.1")


def launcher_argv(launcher: str, ranks: int, *, python: str, workload: str, port: str, args: list[str],
                  nodes: Nodes = ONE_NODE, per_node: int | None = None) -> list[str]:
    """The launcher's command for `ranks` ranks in all, `per_node` of them on each node (the one
    declaration of the launchers' flags). One node: no node rank or address for Accelerate (it binds
    locally), and the argv recorded by runs before the slurm engine is unchanged."""
    per_node = ranks if per_node is None else per_node
    multi_node = nodes != ONE_NODE
    if launcher == "torchrun":
        rank = ["--node_rank", nodes.rank] if multi_node else []
        return [python, "-m", "torch.distributed.run", "--nnodes", nodes.count, "--nproc_per_node", str(per_node),
                *rank, "--master_addr", nodes.addr, "--master_port", port, workload, *args]
    # --multi_gpu with Accelerator(cpu=True) gives gloo ranks; --cpu would start no process group.
    multi = ["--multi_gpu"] if ranks > 1 else []
    machine = ["--machine_rank", nodes.rank, "--main_process_ip", nodes.addr] if multi_node else []
    return [python, "-m", "accelerate.commands.launch", *multi, "--num_processes", str(ranks),
            "--num_machines", nodes.count, *machine, "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", port, workload, *args]


def launch(
    cell: Cell,
    m: Matrix,
    *,
    ranks: int,
    python: str = "python",
    workload: str = CONTAINER_WORKLOAD,
    out: str = CONTAINER_OUT,
    port: int | str = 29500,
    extra_args: tuple[str, ...] = (),
    inherited_env: dict[str, str] | None = None,
    nodes: Nodes = ONE_NODE,
    per_node: int | None = None,
) -> Launch:
    """argv + env for `ranks` ranks of `cell` through its launcher (GPU cells: one rank per GPU), on one
    machine, or on each of several `nodes` with `per_node` ranks there."""
    device = "cpu" if cell.stack.is_cpu else "cuda"
    env = cell.variant.env_dict
    # what the rank should see unless the launcher changes it: the host's or image's own variables
    # under the variant's; the rank reports every difference (the launcher's doing)
    # the values only as they may be written down (workload/redact.py): this line is recorded with the cell
    args = workload_args(m, out, device, {**(inherited_env or {}), **shown_env(env)}, extra_args)
    argv = launcher_argv(cell.launcher, ranks, python=python, workload=workload, port=str(port), args=args,
                         nodes=nodes, per_node=per_node)
    return Launch(tuple(argv), tuple(sorted(env.items())), ranks, device)


def control_launch(cell: Cell, m: Matrix, *, ranks: int, python: str = "python", control: str = CONTAINER_CONTROL,
                   out: str = CONTAINER_OUT, port: int | str = 29500, nodes: Nodes = ONE_NODE,
                   per_node: int | None = None) -> Launch:
    """The NCCL-only control (workload/nccl_control.py) for `cell`: the cell's launcher, environment (its
    variant's NCCL variables) and rank count, the control's entry instead of the workload, and the
    matrix's bandwidth settings, so its busbw is the in-image reference for the cell's own figure."""
    args = ["--out", out, *bandwidth_args(m), *sizes_args(m)]
    argv = launcher_argv(cell.launcher, ranks, python=python, workload=control, port=str(port), args=args,
                         nodes=nodes, per_node=per_node)
    return Launch(tuple(argv), tuple(sorted(cell.variant.env_dict.items())), ranks, "cpu" if cell.stack.is_cpu else "cuda")


# The variables a Slurm task's shell expands for its node (sbatch(1), srun(1) OUTPUT ENVIRONMENT
# VARIABLES); HARNESS_RDZV_ADDR and HARNESS_RDZV_PORT are set by the batch script (engines/slurm.py).
SLURM_NODES = Nodes("${SLURM_NNODES}", "${SLURM_NODEID}", "${HARNESS_RDZV_ADDR}")
SLURM_PORT = "${HARNESS_RDZV_PORT}"
NODE_VAR = re.compile(r"^\$\{[A-Z_][A-Z0-9_]*\}$")


def node_launch(cell: Cell, m: Matrix, *, nodes: int, ranks: int, python: str, workload: str, out: str,
                extra_args: tuple[str, ...] = (), inherited_env: dict[str, str] | None = None) -> Launch:
    """One node's launcher for a cell over `nodes` nodes, `ranks` ranks in all (a multiple of `nodes`);
    its node count, index and rendezvous are the shell variables of SLURM_NODES."""
    if nodes < 1 or ranks % nodes:
        raise ValueError(f"{ranks} ranks cannot be spread evenly over {nodes} nodes")
    return launch(cell, m, ranks=ranks, python=python, workload=workload, out=out, port=SLURM_PORT,
                  extra_args=extra_args, inherited_env=inherited_env, nodes=SLURM_NODES, per_node=ranks // nodes)


def shell_line(argv: tuple[str, ...] | list[str]) -> str:
    """argv as a shell line in which the node variables (${SLURM_NODEID}...) are expanded and every
    other word is quoted."""
    return " ".join(f'"{a}"' if NODE_VAR.match(a) else shlex.quote(a) for a in argv)
