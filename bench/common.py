"""Shared by the benchmarks: timing of whole commands, medians, and the CPU cell they measure."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CPU_STACK = "cpu-torch2.13.0-acc1.15.0"
CPU_CELL = f"{CPU_STACK}+default"


def timed(argv: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of a whole command, which must succeed."""
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=1800, **kwargs)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc


def invoke(*args: str) -> list[str]:
    return [sys.executable, "-m", "invoke", *args]


def host_matrix(mfile: Path, results: Path, run_id: str, gpus: str, *extra: str) -> list[str]:
    """`python -m harness matrix` on the host engine, Accelerate's launcher only, as the benchmarks run
    one matrix file (`gpus` "0,1", or "" for the CPU matrix's gloo ranks)."""
    return [sys.executable, "-m", "harness", "matrix", "--engine", "host", "--matrix", str(mfile), "--results",
            str(results), "--run-id", run_id, "--exclude", "launcher=torchrun", *extra] + (["--gpus", gpus] if gpus else [])


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> int:
    print("TARGETS MET" if ok else "TARGET MISSED")
    return 0 if ok else 1


def stop_rank(rank: int, phase: str, root: Path, signame: str = "STOP"):
    """(on_event, on_start) for the supervisor: send `signame` to `rank` as it starts `phase`, once,
    through the engine's own Running handle, then release that attempt's ranks (they hold at the start
    of `phase` with the workload's test-only --hold-at, which needs HARNESS_TEST_FAULTS=1)."""
    handle: list = []

    def on_event(r: int, event: dict) -> None:
        if handle and r == rank and event.get("event") == "phase_start" and event.get("phase") == phase:
            handle.pop().signal(event["pid"], signame)
            for pid_file in Path(root).rglob(f"pid-rank{rank}"):  # the attempt this rank writes into
                if pid_file.read_text().strip() == str(event["pid"]):
                    (pid_file.parent / "release").touch()

    return on_event, handle.append


def cell_matrix(path: Path, gpus: bool, variants: list[str], define: str = "", bandwidth: bool = False) -> Path:
    """A matrix file of the default matrix's first runnable stack (GPU or CPU; the host engine runs its own
    stack anyway) with `variants`; `define` is YAML for `define:`, `bandwidth` copies that matrix's sweep."""
    from harness import matrix

    source = matrix.load(matrix.DEFAULT_GPU_MATRIX if gpus else matrix.DEFAULT_CPU_MATRIX)
    stack = source.runnable[0].stack
    text = (f'version: 1\ndescription: written by {Path(sys.argv[0]).name}\nstacks:\n'
            f'  matrix: {{cuda: ["{stack.cuda}"], torch: ["{stack.torch}"], accelerate: ["{stack.accelerate}"]}}\n'
            f'variants: [{", ".join(variants)}]\n')
    if bandwidth:
        sizes = ", ".join(f'"{n}"' for n in source.bandwidth_sizes)
        text += (f"bandwidth: {{sizes: [{sizes}], iters: {source.bandwidth_iters}, "
                 f"warmup: {source.bandwidth_warmup}}}\n")
    path.write_text(text + (f"define:\n{define}" if define else ""))
    return path
