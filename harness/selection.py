"""What the user selected: the matrix file (GPU or CPU by default), the --only/--exclude filters, the
GPU ids of --gpus, the way of --gpu-api, and the numbers of --ranks and --timeout, each checked before anything starts and
each bad value named with its flag. The bounds are the matrix file's own (harness/matrixfile.py)."""

from __future__ import annotations

import difflib
import fnmatch
import typing
from dataclasses import dataclass, replace
from pathlib import Path

from . import matrix, matrixfile
from .errors import HarnessError, closest
from .kinds import GPU_APIS, GpuApi
from .matrix import FILTER_KEYS, Cell, Matrix
from .progress import Progress


@dataclass(frozen=True)
class Selection:
    matrix: Path | None = None
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    images: tuple[str, ...] = ()  # --image NAME=REF: an image stack run from another image than matrix.yaml's


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


@dataclass(frozen=True)
class Filter:
    """A glob on the cell id, or `key=glob` on one cell field."""

    pattern: str
    key: str = "id"

    def __call__(self, cell: Cell) -> bool:
        return fnmatch.fnmatchcase(cell.fields().get(self.key, ""), self.pattern)  # image keys: image stacks only


def parse_filter(text: str, flag: str) -> Filter:
    """Parse one --only/--exclude value; a malformed one is a HarnessError naming the flag."""
    if "=" not in text:
        if not text.strip():
            raise HarnessError(f"{flag} '': an empty filter. Fix: give a glob on the cell id or key=value.")
        return Filter(text)
    key, _, value = text.partition("=")
    if key not in FILTER_KEYS:
        hint = difflib.get_close_matches(key, FILTER_KEYS, n=1)
        raise HarnessError(
            f"{flag} '{text}': `{key}` is not a cell key. Fix: "
            + (f"did you mean `{hint[0]}`? " if hint else "")
            + f"use one of: {', '.join(FILTER_KEYS)} (e.g. {flag} torch=2.5.*), or a glob on the cell id."
        )
    if not value:
        raise HarnessError(f"{flag} '{text}': no value after '='. Fix: write {key}=VALUE (globs allowed).")
    return Filter(value, key)


def select(cells: typing.Iterable[Cell], only: typing.Sequence[Filter] = (), exclude: typing.Sequence[Filter] = ()) -> list[Cell]:
    """Cells matching any --only (all when none) and no --exclude, in matrix order."""
    return [c for c in cells if (not only or any(f(c) for f in only)) and not any(f(c) for f in exclude)]


def resolve(selection: Selection, progress: Progress) -> tuple[Matrix, list[Cell]]:
    """Load the matrix and apply --only/--exclude; both flags are checked before the file is read."""
    only = [parse_filter(t, "--only") for t in selection.only]
    exclude = [parse_filter(t, "--exclude") for t in selection.exclude]
    images = [parse_image(t) for t in selection.images]
    m = matrix.load(selection.matrix or default_matrix(progress))
    return m, override(select(m.cells, only, exclude), images)


def by_id(m: Matrix, cells: typing.Sequence[Cell], cell_id: str, what: str) -> Cell:
    """The cell of that id among the matrix's; HarnessError naming `what` (a command or flag) and the
    closest id when there is none."""
    found = {c.id: c for c in cells}
    if cell_id not in found:
        guess = closest(cell_id, list(found))
        raise HarnessError(f"{what} {cell_id!r}: no such cell in {m.path}. Fix: "
                           + (f"did you mean {guess}? " if guess else "")
                           + f"Give a cell id as `invoke list --matrix {m.path}` prints it.")
    return found[cell_id]


def parse_image(text: str) -> tuple[str, str]:
    """One --image NAME=REF; a malformed one is a HarnessError naming the flag."""
    name, _, ref = text.partition("=")
    if not name.strip() or not ref.strip():
        raise HarnessError(f"--image {text}: expected NAME=REF, the name of an image stack and the image to run it from. "
                           "Fix: e.g. --image site=site/train:2026-12 (or a pinned sha256:... as a report's Rerun line gives).")
    return name.strip(), ref.strip()


def override(cells: list[Cell], images: typing.Sequence[tuple[str, str]]) -> list[Cell]:
    """--image NAME=REF: image stack NAME of the selection runs from REF instead of matrix.yaml's image (the
    report's Rerun line pins so the image that ran, by digest)."""
    names = {c.stack.id for c in cells if c.stack.is_image}
    for name, ref in images:
        if name not in names:
            have = ", ".join(sorted(names)) or "none in this selection"
            raise HarnessError(f"--image {name}={ref}: `{name}` is not an image stack of the selected cells (image stacks: "
                               f"{have}). Fix: name one of them, or give that stack `image:` in the matrix file.")
    chosen = dict(images)
    return [replace(c, stack=replace(c.stack, image=chosen[c.stack.id], base=chosen[c.stack.id]))
            if c.stack.id in chosen else c for c in cells]


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


def check_gpu_api(value: str | None) -> GpuApi | None:
    """--gpu-api cdi|nvidia (None: the engine probes); bad input names the flag."""
    if value is None:
        return None
    for api in GPU_APIS:
        if value == api:
            return api
    raise HarnessError(f"--gpu-api {value}: not one of {', '.join(GPU_APIS)}. Fix: --gpu-api cdi (CDI devices, "
                       "--device nvidia.com/gpu=0) or --gpu-api nvidia (the NVIDIA runtime, --gpus); leave it out to "
                       "let a probe container choose.")


def check_drop(threshold: float) -> float:
    """--threshold of a search that judges busbw (bisect --metric busbw, fleet): a fraction between 0 and 1."""
    if not 0 < threshold < 1:
        raise HarnessError(f"--threshold {threshold}: the relative drop that counts must lie between 0 and 1. Fix: "
                           "e.g. --threshold 0.10 for 10%.")
    return threshold


def check_ranks(ranks: int | None) -> int | None:
    """--ranks N within what this host can run (the bound of the matrix file's `ranks`)."""
    problem = None if ranks is None else matrixfile.ranks_problem(ranks)
    if problem:
        raise HarnessError(f"--ranks {ranks}: {problem}. Fix: e.g. --ranks 2, or at most --ranks {matrixfile.max_ranks()}.")
    return ranks


def check_ranks_for_gpus(ranks: int | None, gpus: tuple[str, ...], asked: str | None) -> None:
    """--ranks N beside the GPUs the cells get: honoured or refused, never ignored. With GPUs a cell runs
    one rank per GPU (NCCL refuses two ranks on one GPU: "Duplicate GPU detected"), so a --ranks that differs
    from their number would not be what ran (issue 22: `--ranks 2 --gpus 0` ran one rank without a word)."""
    if ranks is None or not gpus or ranks == len(gpus):
        return
    named = f"--gpus {asked}" if asked and asked != "all" else f"this host's {len(gpus)} GPU(s) (--gpus all)"
    raise HarnessError(f"--ranks {ranks} with {named}: a GPU cell runs one rank per GPU (NCCL refuses two ranks on "
                       f"one GPU: \"Duplicate GPU detected\"), so these GPUs give {len(gpus)} rank(s), not {ranks}. "
                       f"Fix: name {ranks} GPUs (e.g. --gpus {','.join(str(i) for i in range(ranks))}), or leave --ranks "
                       "out; it sets the ranks of CPU cells, run without --gpus (e.g. --only 'cpu*').")


def check_timeouts(overrides: tuple[str, ...], base: matrixfile.Timeouts) -> matrixfile.Timeouts:
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
        problem = matrixfile.timeout_problem(seconds)
        if problem:
            raise HarnessError(f"--timeout {item}: {problem}. Fix: e.g. --timeout {key}=300.")
        values[key] = seconds
    return matrixfile.Timeouts(**values)
