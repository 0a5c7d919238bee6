"""What exists in the world: which torch wheels exist for which CUDA and Python, what Accelerate
requires, which Python a base image has. Pure data and pure functions, so that impossible cells are
pruned as `n/a` with a reason instead of being built and reported as failures.

Sources: the wheel indexes of download.pytorch.org and the Requires-Python / Requires-Dist metadata of
the Accelerate releases on PyPI (read 2026-11). Versions not in these tables are not pruned: the build
will tell.
"""

from __future__ import annotations

from typing import Protocol

from packaging.version import InvalidVersion, Version

# torch minor -> CUDA wheel tags published on download.pytorch.org/whl/cuXY.
TORCH_CUDA_WHEELS: dict[str, tuple[str, ...]] = {
    "2.0": ("cu117", "cu118"),
    "2.1": ("cu118", "cu121"),
    "2.2": ("cu118", "cu121"),
    "2.3": ("cu118", "cu121"),
    "2.4": ("cu118", "cu121", "cu124"),
    "2.5": ("cu118", "cu121", "cu124"),
    "2.6": ("cu118", "cu124", "cu126"),
    "2.7": ("cu118", "cu126", "cu128"),
    "2.8": ("cu126", "cu128", "cu129"),
    "2.9": ("cu126", "cu128", "cu130"),
    "2.10": ("cu126", "cu128", "cu130"),
    "2.11": ("cu126", "cu128", "cu130"),
}

# torch minor -> (oldest, newest) CPython with wheels; newer minors: oldest only.
TORCH_PYTHONS: dict[str, tuple[str, str | None]] = {
    "2.0": ("3.8", "3.11"),
    "2.1": ("3.8", "3.11"),
    "2.2": ("3.8", "3.12"),
    "2.3": ("3.8", "3.12"),
    "2.4": ("3.8", "3.12"),
    "2.5": ("3.9", "3.13"),
    "2.6": ("3.9", "3.13"),
    "2.7": ("3.9", "3.13"),
    "2.8": ("3.9", "3.13"),
    "2.9": ("3.10", "3.14"),
    "2.10": ("3.10", "3.14"),
    "2.11": ("3.10", "3.14"),
}
NEWEST_KNOWN_TORCH = "2.11"
NEWER_TORCH_MIN_PYTHON = "3.10"

# Accelerate: (first release with the rule, Requires-Python floor, torch floor).
ACCELERATE_REQUIRES: tuple[tuple[str, str, str], ...] = (
    ("0.0", "3.8", "1.10.0"),
    ("1.2.0", "3.9", "1.10.0"),
    ("1.6.0", "3.9", "2.0.0"),
    ("1.11.0", "3.10", "2.0.0"),
)

# Base image (substring of its reference) -> the python3 it ships.
BASE_PYTHONS: tuple[tuple[str, str], ...] = (
    ("ubuntu20.04", "3.8"),
    ("ubuntu22.04", "3.10"),
    ("ubuntu24.04", "3.12"),
    ("bookworm", "3.11"),
    ("bullseye", "3.9"),
    ("trixie", "3.13"),
)


class StackLike(Protocol):
    """What the rules read of a stack (matrix.Stack, frozen: read-only)."""

    @property
    def cuda(self) -> str: ...
    @property
    def torch(self) -> str: ...
    @property
    def accelerate(self) -> str: ...
    @property
    def nccl_via(self) -> str: ...
    @property
    def python(self) -> str: ...


def minor(version: str) -> str:
    """'2.5.1' -> '2.5'; the key of the tables above."""
    return ".".join(version.split("+")[0].split(".")[:2])


def _v(text: str) -> Version:
    return Version(text.split("+")[0])


def cuda_wheel_tag(cuda: str) -> str:
    """'12.4.1' -> 'cu124': the suffix of torch's wheel index for that CUDA."""
    major, minor_, *_ = (cuda.split(".") + ["0"])[:2]
    return f"cu{major}{minor_}"


def python_of_base(base: str) -> str | None:
    for marker, python in BASE_PYTHONS:
        if marker in base:
            return python
    return None


def needs_numpy_below_2(torch: str) -> bool:
    """torch < 2.4 wheels were built against NumPy 1.x and break when NumPy 2 is installed."""
    try:
        return _v(torch) < Version("2.4")
    except InvalidVersion:
        return False


def needs_setuptools_below_70(accelerate: str) -> bool:
    """Old Accelerate launchers import pkg_resources, which setuptools 70 no longer ships by default
    and Python >= 3.12 venvs lack altogether."""
    try:
        return _v(accelerate) < Version("0.25")
    except InvalidVersion:
        return False


def why_not(stack: StackLike) -> str | None:
    """The reason this stack cannot exist, or None. Never raises on unknown versions."""
    try:
        torch_v, acc_v, py_v = _v(stack.torch), _v(stack.accelerate), Version(stack.python)
    except InvalidVersion:
        return None
    key = minor(stack.torch)
    if stack.cuda == "cpu":
        if stack.nccl_via != "bundled":
            return "a pinned NCCL needs a CUDA stack; CPU cells use gloo"
    else:
        tags = TORCH_CUDA_WHEELS.get(key)
        tag = cuda_wheel_tag(stack.cuda)
        if tags is not None and tag not in tags:
            return f"torch {key} has no {tag} wheel (it has {', '.join(tags)})"
    lo, hi = TORCH_PYTHONS.get(key, (None, None))
    if lo is None and torch_v > _v(NEWEST_KNOWN_TORCH + ".99"):
        lo = NEWER_TORCH_MIN_PYTHON
    if lo is not None and py_v < Version(lo):
        return f"torch {key} needs Python >= {lo}; the base image has {stack.python}"
    if hi is not None and py_v > Version(hi):
        return f"torch {key} has no wheel for Python {stack.python} (newest {hi})"
    py_floor, torch_floor = "3.8", "1.10.0"
    for since, py_req, torch_req in ACCELERATE_REQUIRES:
        if acc_v >= Version(since):
            py_floor, torch_floor = py_req, torch_req
    if py_v < Version(py_floor):
        return f"Accelerate {stack.accelerate} needs Python >= {py_floor}; the base image has {stack.python}"
    if torch_v < Version(torch_floor):
        return f"Accelerate {stack.accelerate} needs torch >= {torch_floor}"
    return None
