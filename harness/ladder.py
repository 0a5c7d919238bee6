"""The rescue search's ladder (issue 16): NCCL changes to try on a cell that hangs or fails, least costly
first, each with why it may help; and the pure plan of what a search tries within its budget. The
ladder is data: DEFAULT here, replaced by a matrix file's `rescue.steps` (harness/matrix.py).

Every `why` cites NCCL's environment variable documentation,
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (ENV below), or this project's
FIELD-NOTES where a fact comes from a real failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .kinds import RescueEnd

ENV = "NCCL env docs"


@dataclass(frozen=True)
class Step:
    """One change to a cell's NCCL environment: a name, the variables it sets, and why it may help."""

    name: str
    env: tuple[tuple[str, str], ...]
    why: str = ""

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(var for var, _ in self.env)

    def assignments(self) -> str:
        """`VAR=value VAR2=value2`, as a person would set them."""
        return " ".join(f"{var}={value}" for var, value in self.env)


@dataclass(frozen=True)
class Budget:
    """What one cell's search may spend: attempts (rescue attempts, not counting the cell's own) and
    seconds (wall time from the first rescue attempt's start; the last attempt's hard cap is cut to what
    is left)."""

    attempts: int = 12
    seconds: float = 1800.0

    def planned(self, candidates: tuple[Step, ...]) -> tuple[Step, ...]:
        """The candidates this budget's attempts reach, in order (the rest are never tried)."""
        return candidates[:max(self.attempts, 0)]


def _step(name: str, env: Mapping[str, str], why: str) -> Step:
    return Step(name, tuple(sorted(env.items())), why)


# Least costly first. First the changes that keep every transport and only turn off a feature with known
# failure modes (no bandwidth lost on most boxes), then protocol and algorithm (small-size latency), then
# the transport limits, which cost bandwidth (P2P off: 340 -> 27 GB/s on 2x H200, FIELD-NOTES).
DEFAULT: tuple[Step, ...] = (
    _step("nvls-off", {"NCCL_NVLS_ENABLE": "0"},
          "NVLink SHARP needs Fabric Manager and multicast support; off, NCCL uses plain NVLink rings/trees "
          f"({ENV}: NCCL_NVLS_ENABLE)"),
    _step("cumem-host-off", {"NCCL_CUMEM_HOST_ENABLE": "0"},
          "cuMem host memory is NUMA-bound, which containers may forbid (NCCL 2.24 to 2.26.4 fail there, FIELD-NOTES); off, "
          f"NCCL uses cudaHostAlloc ({ENV}: NCCL_CUMEM_HOST_ENABLE)"),
    _step("cumem-off", {"NCCL_CUMEM_ENABLE": "0"},
          "cuMem buffers (default from NCCL 2.19) need driver and IPC support the legacy path does not "
          f"({ENV}: NCCL_CUMEM_ENABLE)"),
    _step("ib-off", {"NCCL_IB_DISABLE": "1"},
          "a broken or half-configured InfiniBand/RoCE device stalls init; off, the network path is sockets (free on one node) "
          f"({ENV}: NCCL_IB_DISABLE)"),
    _step("proto-simple", {"NCCL_PROTO": "Simple"},
          "LL and LL128 rely on ordering guarantees some PCIe paths and GPUs break; Simple costs latency at small sizes only "
          f"({ENV}: NCCL_PROTO)"),
    _step("ring", {"NCCL_ALGO": "Ring"},
          f"rules out Tree, CollNet and NVLS, whose setup is where some hangs are ({ENV}: NCCL_ALGO)"),
    _step("p2p-pix", {"NCCL_P2P_LEVEL": "PIX"},
          "P2P only between GPUs behind one PCIe switch: no P2P through the host bridge or across CPUs, where consumer boards "
          f"break it ({ENV}: NCCL_P2P_LEVEL)"),
    _step("p2p-nvl", {"NCCL_P2P_LEVEL": "NVL"},
          f"P2P only over NVLink; PCIe pairs go through shared memory ({ENV}: NCCL_P2P_LEVEL)"),
    _step("p2p-off", {"NCCL_P2P_DISABLE": "1"},
          "no GPU peer-to-peer at all: the fix for drivers that claim P2P that hangs (RTX 40, FIELD-NOTES); falls back to SHM "
          f"({ENV}: NCCL_P2P_DISABLE)"),
    _step("shm-off", {"NCCL_SHM_DISABLE": "1"},
          "no shared-memory transport: for a small /dev/shm or broken host memory sharing; with P2P off too NCCL must use the "
          f"network ({ENV}: NCCL_SHM_DISABLE)"),
)


def _already(step: Step, cell_env: Mapping[str, str]) -> bool:
    """The cell already runs with every variable of `step` at its value: trying it would repeat the cell."""
    return all(cell_env.get(var) == value for var, value in step.env)


def pair(a: Step, b: Step) -> Step:
    """Two steps together (their variables must not overlap)."""
    return Step(f"{a.name}+{b.name}", tuple(sorted(a.env + b.env)), f"{a.name} and {b.name} together")


def candidates(steps: Iterable[Step], cell_env: Mapping[str, str]) -> tuple[Step, ...]:
    """Every change the search may try, in order: the single steps as declared, then every pair of them
    (in declared order of the first, then the second), leaving out what the cell already has (a pair
    holding such a step too: it is the other step alone) and pairs that set one variable twice."""
    singles = [s for s in steps if not _already(s, cell_env)]
    pairs = [pair(a, b) for a, b in itertools.combinations(singles, 2) if not a.variables & b.variables]
    return tuple(singles + pairs)


def plan(steps: Iterable[Step], cell_env: Mapping[str, str], budget: Budget) -> tuple[Step, ...]:
    """What the search of one cell tries, in order, cut to the budget's attempts (the time budget is
    spent as it runs: runner stops when it is gone)."""
    return budget.planned(candidates(steps, cell_env))


@dataclass(frozen=True)
class SearchEnd:
    """Why one cell's search stopped, what it did not try and the budget it ran under: whether raising
    `rescue: attempts` or `seconds` in matrix.yaml could find more."""

    why: RescueEnd
    untried: tuple[str, ...] = ()  # the candidates not tried, in order (names)
    budget: Budget = Budget()

    def text(self) -> str:
        """`the time budget of 120 s was spent; not tried: a, b (matrix.yaml rescue: seconds)`, and so on."""
        untried = ", ".join(self.untried[:6]) + (f" and {len(self.untried) - 6} more" if len(self.untried) > 6 else "")
        if self.why == "rescued":
            return "stopped at the first step that passed"
        if self.why == "steps":
            return "every candidate step was tried"
        if self.why == "interrupted":
            return "stopped by Ctrl-C" + (f"; not tried: {untried}" if untried else "")
        if self.why == "time":
            return (f"the time budget of {self.budget.seconds:g} s was spent; not tried: {untried} "
                    "(raise matrix.yaml rescue: seconds to try them)")
        return (f"the attempt budget of {self.budget.attempts} was reached; not tried: {untried} "
                "(raise matrix.yaml rescue: attempts to try them)")


def search_end(candidates: tuple[Step, ...], budget: Budget, tried: int, rescued: bool,
               interrupted: bool) -> SearchEnd:
    """Why a search over `candidates` (in order; the first `tried` were run) stopped."""
    untried = tuple(s.name for s in candidates[tried:])
    if rescued:
        return SearchEnd("rescued", untried, budget)
    if interrupted:
        return SearchEnd("interrupted", untried, budget)
    if not untried:
        return SearchEnd("steps", (), budget)
    return SearchEnd("time" if tried < budget.attempts else "attempts", untried, budget)
