"""What the user selected: the matrix file (GPU or CPU by default), the --only/--exclude filters, the
GPU ids of --gpus, and the numbers of --ranks and --timeout, each checked before anything starts and
each bad value named with its flag. The bounds are the matrix file's own (harness/matrix.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import matrix
from .errors import HarnessError, closest
from .matrix import Cell, Matrix
from .progress import Progress


@dataclass(frozen=True)
class Selection:
    matrix: Path | None = None
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


def present_gpus() -> list[str]:
    """Indexes of the NVIDIA GPUs this host's driver exposes (no nvidia-smi needed)."""
    return sorted((p.name[len("nvidia"):] for p in Path("/dev").glob("nvidia[0-9]*")), key=int)


def gpus_visible() -> bool:
    """NVIDIA GPUs on this host, as the driver exposes them."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def default_matrix(progress: Progress) -> Path:
    if gpus_visible():
        return matrix.DEFAULT_GPU_MATRIX
    progress.say(
        f"No NVIDIA GPU on this host: using {matrix.DEFAULT_CPU_MATRIX.name} "
        f"(pass --matrix {matrix.DEFAULT_GPU_MATRIX.name} for the GPU matrix)."
    )
    return matrix.DEFAULT_CPU_MATRIX


def resolve(selection: Selection, progress: Progress) -> tuple[Matrix, list[Cell]]:
    """Load the matrix and apply --only/--exclude; both flags are checked before the file is read."""
    only = [matrix.parse_filter(t, "--only") for t in selection.only]
    exclude = [matrix.parse_filter(t, "--exclude") for t in selection.exclude]
    m = matrix.load(selection.matrix or default_matrix(progress))
    return m, matrix.select(m.cells, only, exclude)


def check_gpus(requested: str | None) -> tuple[str, ...]:
    """'all' or '0,1' -> device ids; bad input names the flag."""
    if requested in (None, ""):
        return ()
    ids = tuple(part.strip() for part in requested.split(","))
    if requested != "all" and (not all(i.isdigit() for i in ids) or len(set(ids)) != len(ids)):
        raise HarnessError(f"--gpus {requested}: expected `all` or distinct GPU indexes like 0,1. Fix: e.g. --gpus 0,1.")
    present = set(present_gpus())
    if not present:  # the same advice for `all` and for ids, and it works when followed
        raise HarnessError(f"--gpus {requested}: no NVIDIA GPU on this host. Fix: drop --gpus to run the CPU cells.")
    if requested == "all":
        return tuple(sorted(present, key=int))
    missing = [i for i in ids if i not in present]
    if missing:
        have = ",".join(sorted(present, key=int)) or "none"
        raise HarnessError(f"--gpus {requested}: GPU {','.join(missing)} does not exist here (present: {have}). "
                           "Fix: pick from the present ones, or `all`.")
    return ids


def check_ranks(ranks: int | None) -> int | None:
    """--ranks N within what this host can run (the bound of the matrix file's `ranks`)."""
    problem = None if ranks is None else matrix.ranks_problem(ranks)
    if problem:
        raise HarnessError(f"--ranks {ranks}: {problem}. Fix: e.g. --ranks 2, or at most --ranks {matrix.max_ranks()}.")
    return ranks


def check_timeouts(overrides: tuple[str, ...], base: matrix.Timeouts) -> matrix.Timeouts:
    """--timeout prepare=300 --timeout cell=3600 over the matrix file's values; each PHASE=SECONDS
    checked like the file's `timeouts:` (finite, above 0, at most a week)."""
    values = base.model_dump()
    for item in overrides:
        key, _, text = item.partition("=")
        if key not in values:
            guess = closest(key, values)
            raise HarnessError(f"--timeout {item}: expected PHASE=SECONDS with PHASE one of {', '.join(values)}"
                               f"{f'; did you mean {guess}?' if guess else '.'} Fix: e.g. --timeout {guess or 'prepare'}=300.")
        try:
            seconds = float(text)
        except ValueError:
            raise HarnessError(f"--timeout {item}: expected PHASE=SECONDS with SECONDS a number. "
                               f"Fix: e.g. --timeout {key}=300.") from None
        problem = matrix.timeout_problem(seconds)
        if problem:
            raise HarnessError(f"--timeout {item}: {problem}. Fix: e.g. --timeout {key}=300.")
        values[key] = seconds
    return matrix.Timeouts(**values)
