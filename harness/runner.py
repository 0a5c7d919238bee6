"""Run selected cells one at a time (cells that share GPUs must not overlap, or bandwidth would not be
comparable), with retries of hangs and infra errors, and record each cell as soon as it ends."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import launch, outcome, proc, results, supervise
from .engines.base import CellSpec, Engine
from .engines.host import HostEngine
from .errors import HarnessError, InfraError
from .matrix import Cell, Matrix, Stack
from .outcome import Outcome


@dataclass(frozen=True)
class RunOptions:
    run_id: str
    results: Path
    gpus: tuple[str, ...] = ()  # () = CPU cells
    ranks: int = 2  # ranks of a CPU cell
    retries: int = 0
    extra_args: tuple[str, ...] = ()  # passed to the workload (tests only)
    extra_env: tuple[tuple[str, str], ...] = ()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_stack(python: str = sys.executable) -> Stack:
    """The stack installed in this environment, as the host engine will run it."""
    probe = (
        "import json, torch, accelerate, sys;"
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda or 'cpu',"
        " 'accelerate': accelerate.__version__, 'python': '%d.%d' % sys.version_info[:2]}))"
    )
    result = proc.run([python, "-c", probe], timeout=120)
    if result.returncode != 0:
        raise InfraError(
            f"the host engine needs torch and accelerate in this Python ({python}), and importing them failed: "
            f"{result.output.strip().splitlines()[-1:] or ''}. Fix: pip install torch accelerate, or use --engine docker."
        )
    facts = json.loads(result.output.strip().splitlines()[-1])
    torch_version = facts["torch"].split("+")[0]
    return Stack(cuda=facts["cuda"], torch=torch_version, accelerate=facts["accelerate"], base="host",
                 python=facts["python"], torch_index="", template="host")


def host_cells(m: Matrix, stack: Stack) -> list[Cell]:
    """The matrix's variants and launchers, on the host's own stack."""
    seen: dict[str, Cell] = {}
    for cell in m.runnable:
        host = Cell(stack, cell.variant, cell.launcher)
        seen.setdefault(host.id, host)
    return list(seen.values())


def spec_for(cell: Cell, m: Matrix, engine: Engine, opts: RunOptions, image: str, attempt: int, out: Path) -> CellSpec:
    ranks = len(opts.gpus) if opts.gpus else opts.ranks
    if isinstance(engine, HostEngine):
        lnch = launch.launch(cell, m, ranks=ranks, python=engine.python, workload=engine.workload, out=str(out),
                             port=_free_port(), extra_args=opts.extra_args)
    else:
        lnch = launch.launch(cell, m, ranks=ranks, extra_args=opts.extra_args)
    if opts.extra_env:
        lnch = launch.Launch(lnch.argv, lnch.env + opts.extra_env, lnch.ranks, lnch.device)
    return CellSpec(opts.run_id, cell.id, lnch, out, image=image, gpus=opts.gpus, attempt=attempt)


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    outcome: Outcome
    attempts: tuple[dict, ...] = ()
    image: dict | None = None  # tag and id of the image it ran in (docker engine)

    def to_json(self) -> dict:
        return {"cell": self.cell.fields(), "env": self.cell.variant.env_dict, "outcome": self.outcome.to_json(),
                "image": self.image, "attempts": list(self.attempts)}

    def save(self, results_dir: Path, run_id: str) -> None:
        results.write_json(results.cell_dir(results_dir, run_id, self.cell.id) / "record.json", self.to_json())


def run_cell(
    engine: Engine,
    cell: Cell,
    m: Matrix,
    opts: RunOptions,
    image: str = "",
    on_event: Callable[[int, dict], None] = lambda r, e: None,
    image_info: dict | None = None,
    on_start: Callable = lambda running: None,
) -> CellResult:
    """Run one cell, retrying hangs and infra errors up to opts.retries times; every attempt is kept."""
    cell_dir = results.cell_dir(opts.results, opts.run_id, cell.id)
    attempts: list[dict] = []
    for attempt in range(1, opts.retries + 2):
        out = cell_dir / f"attempt-{attempt}"
        if out.exists():  # a rerun into the same run replaces the attempt; stale events would mislead
            shutil.rmtree(out)
        spec = spec_for(cell, m, engine, opts, image, attempt, out)
        raw = supervise.supervise(engine, spec, m.timeouts, on_event=on_event, on_start=on_start).to_json()
        result = outcome.classify(raw, m.min_busbw, None if cell.stack.nccl_via == "bundled" else cell.stack.nccl)
        attempts.append({"attempt": attempt, "outcome": result.to_json(), "raw": raw,
                         "command": list(spec.launch.argv)})
        if result.status not in outcome.RETRYABLE or result.status == "interrupted":
            break
    cell_result = CellResult(cell, result, tuple(attempts), image_info)
    cell_result.save(opts.results, opts.run_id)
    return cell_result


def check_gpus(requested: str | None) -> tuple[str, ...]:
    """'all' or '0,1' -> device ids; bad input names the flag."""
    if requested in (None, ""):
        return ()
    if requested == "all":
        present = sorted(p.name[len("nvidia"):] for p in Path("/dev").glob("nvidia[0-9]*"))
        if not present:
            raise HarnessError("--gpus all: no NVIDIA GPU on this host. Fix: drop --gpus to run the CPU cells.")
        return tuple(present)
    ids = tuple(part.strip() for part in requested.split(","))
    if not all(i.isdigit() for i in ids) or len(set(ids)) != len(ids):
        raise HarnessError(f"--gpus {requested}: expected `all` or distinct GPU indexes like 0,1. Fix: e.g. --gpus 0,1.")
    present = {p.name[len("nvidia"):] for p in Path("/dev").glob("nvidia[0-9]*")}
    missing = [i for i in ids if i not in present]
    if missing:
        have = ",".join(sorted(present)) or "none"
        raise HarnessError(f"--gpus {requested}: GPU {','.join(missing)} does not exist here (present: {have}). "
                           "Fix: pick from the present ones, or `all`.")
    return ids
