"""matrix.yaml's schema: the pydantic models of the file (unknown keys rejected), the bounds they hold
every number to, and the checks of a timeout and of a number of CPU ranks that the command line shares.
harness/matrix.py validates a file with it and expands it into cells.
"""

from __future__ import annotations

import math
import os
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictInt, StrictStr

from . import yamlfile
from .kinds import Launcher
from .ladder import Budget
from .workload.bandwidth import COLLECTIVES
from .yamlfile import Strict as _Strict

# Bounds on every number, checked when the file is loaded (so `invoke list` and `--dry-run` refuse too);
# the bounds of sizes and of the stacks and cells a matrix expands to are harness/matrix.py's.
MAX_TIMEOUT = 7 * 24 * 3600.0  # seconds: a week, for the cell cap and every stall threshold
MAX_RANKS = 256  # absolute cap on CPU ranks, whatever the host
RANKS_PER_CPU = 4  # gloo ranks share the CPUs; beyond 4 per CPU they only thrash (and each holds torch, ~0.5 GB)
MAX_ENTRIES = 100  # entries of each include/exclude list (cells x exclude entries are matched by glob)


def max_ranks() -> int:
    """The CPU ranks this host may run: RANKS_PER_CPU per CPU this process may use, at most MAX_RANKS."""
    return min(MAX_RANKS, RANKS_PER_CPU * len(os.sched_getaffinity(0)))


def ranks_problem(ranks: int) -> str | None:
    """Why a number of CPU ranks cannot run here (None when it can)."""
    if 1 <= ranks <= max_ranks():
        return None
    return (f"{ranks} ranks cannot run here: at least 1 and at most {max_ranks()} "
            f"({RANKS_PER_CPU} per CPU of this host's {len(os.sched_getaffinity(0))}, never more than {MAX_RANKS})")


def timeout_problem(seconds: float) -> str | None:
    """Why a number of seconds is not a usable timeout (None when it is): finite, above 0, at most a week."""
    if math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT:
        return None
    return f"{seconds:g} s is not a usable timeout: it must be a number of seconds above 0 and at most {MAX_TIMEOUT:.0f} (a week)"


def _seconds(value: float) -> float:
    problem = timeout_problem(value)
    if problem:
        raise yamlfile.bad(problem + ".", "write a number of seconds, e.g. 90.")
    return value


def _collectives(value: list[str]) -> list[str]:
    unknown = [name for name in value if name not in COLLECTIVES]
    if unknown:
        raise yamlfile.bad(f"names {', '.join(map(repr, unknown))}, which the sweep does not know.",
                           f"write any of {', '.join(COLLECTIVES)}.")
    if "all_reduce" not in value:
        raise yamlfile.bad("leaves out all_reduce, the compatibility table's column.", "keep all_reduce in the list.")
    if len(set(value)) != len(value):
        raise yamlfile.bad("names a collective twice.", "name each once.")
    return value


Collectives = Annotated[list[StrictStr], AfterValidator(_collectives)]


def _no_bool(value: Any) -> Any:
    """Literal[1] takes True for 1; a version is a number, never a boolean."""
    if isinstance(value, bool):
        raise yamlfile.bad(f"is the boolean {value}; the schema version is a number.", "write `version: 1`.")
    return value


def _ranks(value: int) -> int:
    problem = ranks_problem(value)
    if problem:
        raise yamlfile.bad(problem + ".", f"write e.g. `ranks: 2` (at most {max_ranks()} on this host).")
    return value


# strict: YAML's true/false are never numbers (`ranks: true` was one rank), "90" is not 90.
Seconds = Annotated[float, Field(strict=True), AfterValidator(_seconds)]
Count = Annotated[int, Field(strict=True)]


class Timeouts(_Strict):
    """Seconds without progress after which a phase counts as hung; `cell` is the hard cap."""

    fingerprint: Seconds = 120
    init: Seconds = 90
    prepare: Seconds = 120
    step: Seconds = 60
    check: Seconds = 60
    bandwidth: Seconds = 120
    teardown: Seconds = 30
    cell: Seconds = 1800

    def of(self, phase: str) -> float:
        """The threshold of a workload phase (PHASES) or of the cell's hard cap ("cell")."""
        value: float = getattr(self, phase)
        return value


class Bandwidth(_Strict):
    sizes: list[StrictInt | StrictStr] = Field(["8K", "64K", "1M", "16M", "256M", "1G"], max_length=64)
    iters: Count = Field(20, ge=1, le=100_000)
    warmup: Count = Field(5, ge=0, le=100_000)
    # timed trials per size: every figure is the median with its min-max over the trials
    trials: Count = Field(5, ge=1, le=100)
    # the collectives swept: all-reduce is the table's column; all-gather, reduce-scatter and broadcast
    # (what FSDP and DDP use) go in each cell's detail and in compare
    collectives: Collectives = Field(["all_reduce"], max_length=2 * len(COLLECTIVES))
    # a passing cell whose busbw at the largest size is below this (GB/s) is `slow`
    min_busbw: float | None = Field(None, gt=0, le=1_000_000, strict=True, allow_inf_nan=False)


class RescueTimeouts(Timeouts):
    """Stall thresholds of rescue attempts: shorter than a cell's where a healthy attempt is quick, so a
    ladder of steps that hang costs minutes, not hours. A healthy GPU attempt stays well inside them: on
    2x H200 a whole 2-GPU cell takes about 10 to 11 s (docs/benchmarks.md 4d), NCCL init and DDP's first
    broadcast a few seconds of that; startup (imports, CUDA init) keeps fingerprint's 120 s and the sweep bandwidth's
    120 s per size (1 GiB over sockets is about 50 s a size at 2.8 GB/s, and a rescue may force sockets)."""

    init: Seconds = 30
    prepare: Seconds = 30
    step: Seconds = 30
    check: Seconds = 30
    cell: Seconds = 600


class RescueStepDef(_Strict):
    name: str
    env: dict[str, str | StrictInt] = Field(min_length=1)
    why: str = Field(min_length=1)


class RescueDef(_Strict):
    """`rescue:`: the ladder (replacing DEFAULT_LADDER), the budget of one cell's search, its thresholds."""

    steps: list[RescueStepDef] | None = Field(None, min_length=1, max_length=MAX_ENTRIES)
    attempts: Count = Field(Budget.attempts, ge=1, le=1000)
    seconds: Seconds = Budget.seconds
    timeouts: RescueTimeouts = RescueTimeouts()


class VariantDef(_Strict):
    env: dict[str, str | StrictInt] = {}
    description: str = ""


class Define(_Strict):
    variants: dict[str, VariantDef] = {}


class StackAxes(_Strict):
    matrix: dict[str, list[str]] = {}
    include: list[dict[str, str]] = Field([], max_length=MAX_ENTRIES)
    exclude: list[dict[str, str]] = Field([], max_length=MAX_ENTRIES)


class MatrixFile(_Strict):
    version: Annotated[Literal[1], BeforeValidator(_no_bool)] = 1
    description: str = ""
    stacks: StackAxes
    variants: list[str] = ["default"]
    launchers: list[Launcher] = ["accelerate"]
    exclude: list[dict[str, str]] = Field([], max_length=MAX_ENTRIES)
    define: Define = Define()
    timeouts: Timeouts = Timeouts()
    bandwidth: Bandwidth = Bandwidth()
    ranks: Annotated[Count, AfterValidator(_ranks)] = Field(2, description="ranks of a CPU cell")
    rescue: RescueDef = RescueDef()
