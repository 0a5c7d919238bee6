"""matrix.yaml: validation with errors a person can act on (its schema is harness/matrixfile.py), and the
pure expansion into cells (stacks x NCCL variants x launchers), GitHub-Actions style, with impossible stacks
kept as `n/a`.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import itertools
import math
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import REPO_ROOT, compat, yamlfile
from .errors import FileError, HarnessError
from .imagefacts import ImageFacts
from .ladder import DEFAULT as DEFAULT_LADDER
from .ladder import Budget, Step
from .matrixfile import MatrixFile, RescueTimeouts, Timeouts
from .yamlfile import Ctx, plain

IMAGES_DIR = REPO_ROOT / "images"
DEFAULT_GPU_MATRIX = REPO_ROOT / "matrix.yaml"
DEFAULT_CPU_MATRIX = REPO_ROOT / "matrix-cpu.yaml"

BUILT_KEYS = ("cuda", "torch", "accelerate", "nccl", "base", "python", "torch_index", "template")
REQUIRED_STACK_KEYS = ("cuda", "torch", "accelerate")
# an image stack (the user's own image): the image, the stack's name, its Python, an Accelerate to install
IMAGE_KEYS = ("image", "name")
IMAGE_STACK_KEYS = ("image", "name", "python", "accelerate")
STACK_KEYS = BUILT_KEYS + IMAGE_KEYS
CELL_KEYS = STACK_KEYS + ("variant", "launcher")
FILTER_KEYS = CELL_KEYS + ("nccl_via", "id", "stack")
# what an image stack's records add, once its image has been read (imagefacts.ImageFacts)
IMAGE_FACT_KEYS = ("image_id", "image_digest", "python_path", "distro")

BUILTIN_VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "p2p-off": {"NCCL_P2P_DISABLE": "1"},
    "p2p-nvl": {"NCCL_P2P_LEVEL": "NVL"},
    "shm-off": {"NCCL_SHM_DISABLE": "1"},
    "net-only": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
    "ib-off": {"NCCL_IB_DISABLE": "1"},
}
BUILTIN_DESCRIPTIONS = {
    "default": "NCCL chooses everything",
    "p2p-off": "no GPU peer-to-peer (falls back to SHM, then NET)",
    "p2p-nvl": "peer-to-peer only over NVLink",
    "shm-off": "no shared-memory transport",
    "net-only": "P2P and SHM off: the network (sockets/IB) path",
    "ib-off": "no InfiniBand",
}

# at most 40 characters: compat.py reads versions with packaging, whose int() of a 5,000-digit part raised
_VERSION_RE = re.compile(r"^(?=.{1,40}$)[0-9]+(\.[0-9]+){0,3}([a-z]+[0-9]*)?(\+[a-z0-9.]+)?$")
_VARIANT_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SIZE_RE = re.compile(r"^([0-9]+)\s*([KMGT]?)(i?B)?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_TEMPLATE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

# Bounds on every number, checked when the file is loaded (so `invoke list` and `--dry-run` refuse too;
# those of timeouts, ranks and list entries are harness/matrixfile.py's).
# Issue 14: `sizes: [0]`, `[-4096]` and "999999T" each became a cell FAIL explained only in launcher.log,
# `init: .inf` an OverflowError when the cell was launched, `ranks: true` one rank, `ranks: 10000` was
# accepted.
MIN_SIZE = 4  # one float32 element: the sweep all-reduces float32 buffers (harness/workload/bandwidth.py)
MAX_SIZE = 32 << 30  # one buffer of this size per rank: fits any 40 GB+ GPU; raise it here for larger ones
MAX_STACKS = 500  # stacks (= images, several GB each) one matrix may expand to
MAX_CELLS = 2000  # cells one matrix may expand to (cells run one at a time: 2000 is days of work)


# ---------------------------------------------------------------- values the rest of the harness uses


@dataclass(frozen=True)
class Stack:
    """One software stack = one image."""

    cuda: str
    torch: str
    accelerate: str
    nccl: str = "bundled"  # "bundled" or the pinned version
    nccl_via: str = "bundled"  # bundled | pip | system
    base: str = ""
    python: str = ""
    torch_index: str = ""
    template: str = ""
    # an image stack: the user's image as matrix.yaml names it (a tag, repo@sha256:..., an image id), the
    # stack's name (its id), and what was read inside it (userimages.resolve): until then its versions are ""
    image: str = ""
    name: str = ""
    python_path: str = ""  # the image's Python as the stack names it ("": python3, then python, on its PATH)
    facts: ImageFacts | None = None

    @property
    def is_cpu(self) -> bool:
        return self.cuda == "cpu"

    @property
    def is_image(self) -> bool:
        """The user's own image, which the harness reads and never installs torch or CUDA into."""
        return bool(self.image)

    @property
    def id(self) -> str:
        if self.is_image:
            return self.name
        parts = ["cpu" if self.is_cpu else f"cu{self.cuda}", f"torch{self.torch}", f"acc{self.accelerate}"]
        if self.nccl_via == "pip":
            parts.append(f"nccl{self.nccl}")
        elif self.nccl_via == "system":
            parts.append(f"nccl{self.nccl}sys")
        return "-".join(parts)

    def fields(self) -> dict[str, str]:
        """What a record keeps of the stack (and --only/--exclude match): an image stack's image keys and,
        once read, the image's identity; a built stack's record is as before image stacks existed."""
        fields = {k: getattr(self, k) for k in BUILT_KEYS} | {"nccl_via": self.nccl_via, "stack": self.id}
        if not self.is_image:
            return fields
        fields |= {"image": self.image, "name": self.name}
        if self.facts is not None:
            found = self.facts
            fields |= {"image_id": found.image_id, "image_digest": found.digest, "python_path": found.python_path,
                       "distro": found.distro}
        return fields


@dataclass(frozen=True)
class Variant:
    name: str
    env: tuple[tuple[str, str], ...] = ()
    description: str = ""

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Cell:
    stack: Stack
    variant: Variant
    launcher: str = "accelerate"
    na_reason: str | None = None

    @property
    def id(self) -> str:
        suffix = "" if self.launcher == "accelerate" else f"+{self.launcher}"
        return f"{self.stack.id}+{self.variant.name}{suffix}"

    def fields(self) -> dict[str, str]:
        return self.stack.fields() | {"variant": self.variant.name, "launcher": self.launcher, "id": self.id}


@dataclass(frozen=True)
class Matrix:
    path: Path
    sha256: str
    description: str
    stacks: tuple[Stack, ...]
    cells: tuple[Cell, ...]
    variants: dict[str, Variant] = field(default_factory=dict)
    timeouts: Timeouts = Timeouts()
    bandwidth_sizes: tuple[int, ...] = ()
    bandwidth_iters: int = 20
    bandwidth_warmup: int = 5
    bandwidth_trials: int = 5
    bandwidth_collectives: tuple[str, ...] = ("all_reduce",)
    min_busbw: float | None = None
    ranks: int = 2
    ladder: tuple[Step, ...] = DEFAULT_LADDER  # the rescue search's steps (`rescue.steps`)
    rescue_budget: Budget = Budget()
    rescue_timeouts: Timeouts = RescueTimeouts()

    @property
    def runnable(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.na_reason is None)


# ---------------------------------------------------------------- loading and validation


def load(path: str | Path) -> Matrix:
    """Read, validate and expand a matrix file; every problem is a MatrixError (exit 2)."""
    path = Path(path)
    try:
        text = yamlfile.read(path)
    except FileNotFoundError:
        raise HarnessError(
            f"{path}: no such matrix file. Fix: pass an existing file with --matrix "
            f"(the repository has {DEFAULT_GPU_MATRIX.name} and {DEFAULT_CPU_MATRIX.name})."
        ) from None
    except OSError as exc:
        raise HarnessError(f"{path}: cannot be read ({exc.strerror}). Fix: check its permissions.") from None
    raw, lines = yamlfile.parse(text, path)
    ctx = Ctx(path, lines)
    if not isinstance(raw, dict):
        raise ctx.error((), "must be a mapping with at least a `stacks` key.", "see the matrix.yaml format in README.md.")
    try:
        spec = MatrixFile.model_validate(raw)
    except ValidationError as exc:
        raise _translate(exc, ctx) from None
    return _build(spec, path, hashlib.sha256(text.encode()).hexdigest(), ctx)


def _not_a_string(value: bool | float | int, in_env: bool) -> tuple[str, str]:
    """Versions are strings: YAML turns unquoted 12.10 into 12.1, so a number is refused, not guessed."""
    if isinstance(value, bool):
        return f"is the boolean {value} (YAML reads yes/no/on/off/true/false so); a string is expected.", "quote the value."
    text = getattr(value, "text", str(value))
    if in_env:
        return f"is the number {text}; environment values are strings or integers.", f'quote it: "{text}".'
    if isinstance(value, float):
        return (
            f"is the number {text}, which YAML reads as {float(value)!r}; versions must be strings "
            "(an unquoted 12.10 would silently become 12.1).",
            f'quote it: "{text}".',
        )
    return f"is the number {text}; versions and names must be strings.", f'quote it: "{text}".'


def _not_a_number(value: Any, whole: bool) -> tuple[str, str]:
    """Counts and seconds are numbers: YAML's true/yes and a quoted "90" are refused, not converted."""
    what = "a whole number" if whole else "a number"
    if isinstance(value, bool):
        return f"is the boolean {value} (YAML reads yes/no/on/off/true/false so); {what} is expected.", "write a number."
    if isinstance(value, str):
        return f"is the string {yamlfile.short(value)}; {what} is expected.", "write the number without quotes."
    if isinstance(value, float):
        return f"is {getattr(value, 'text', value)}; {what} is expected.", "write a whole number."
    return f"is {yamlfile.short(value)}; {what} is expected.", "write a number."


_BOUNDS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_long", "too_short", "finite_number")


def _special(error: Mapping[str, Any], loc: tuple) -> tuple[str, str] | None:
    value, kind = error.get("input"), error["type"]
    if (kind == "string_type" or (kind == "int_type" and "env" in loc)) and isinstance(value, (bool, float, int)):
        return _not_a_string(value, "env" in loc)
    if kind in ("int_type", "float_type"):
        return _not_a_number(value, kind == "int_type")
    if kind in _BOUNDS:
        return (f"{error['msg']} (got {yamlfile.short(value)}).",
                "write a value within that bound (see the matrix.yaml format in README.md).")
    return None



def _translate(exc: ValidationError, ctx: Ctx) -> FileError:  # a MatrixError: the class Ctx(path, lines) builds
    return yamlfile.translate(exc, ctx, MatrixFile, "the matrix.yaml format in README.md", _special)


def parse_size(value: int | str) -> int:
    """'256M' -> 268435456 (binary units, as nccl-tests prints them)."""
    if isinstance(value, int):
        return value
    m = _SIZE_RE.match(value.strip())
    if not m or len(m.group(1)) > 20:
        raise ValueError(value)
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def _size(value: int | str, loc: tuple, ctx: Ctx) -> int:
    """A bandwidth size in bytes, between one float32 element and MAX_SIZE."""
    try:
        size = parse_size(value)
    except ValueError:
        raise ctx.error(loc, f"{yamlfile.short(value)} is not a size.", 'write bytes or e.g. "64K", "256M", "1G".') from None
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ctx.error(loc, f"{yamlfile.short(value)} is {size} bytes; a size must be at least {MIN_SIZE} bytes (one float32 "
                        f"element) and at most {MAX_SIZE >> 30}G (one buffer of it on every rank).",
                        'write e.g. "8K" or "1G" (raise matrix.MAX_SIZE for GPUs that hold more).')
    return size


def _parse_nccl(text: str) -> tuple[str, str]:
    """'bundled' | '2.21.5' | 'pip:2.21.5' | 'system:2.21.5' -> (version, via)."""
    if text == "bundled":
        return "bundled", "bundled"
    via, _, version = text.rpartition(":")
    via = via or "pip"
    if via not in ("pip", "system") or not _VERSION_RE.match(version):
        raise ValueError(text)
    return version, via


def _check_axes(spec: MatrixFile, ctx: Ctx) -> None:
    axes = spec.stacks
    combinations = math.prod(len(values) for values in axes.matrix.values()) if axes.matrix else 0
    if combinations + len(axes.include) > MAX_STACKS:
        raise ctx.error(("stacks", "matrix"), f"makes {combinations + len(axes.include)} stacks (one image each), more "
                        f"than the {MAX_STACKS} one matrix may have.", "split it into several matrix files.")
    for key, values in axes.matrix.items():
        if key not in STACK_KEYS:
            raise ctx.error(("stacks", "matrix", key), f"`{plain(key)}` is not a stack key.",
                            f"use one of: {', '.join(STACK_KEYS)}.")
        if not values:
            raise ctx.error(
                ("stacks", "matrix", key),
                "is an empty list, which would make zero stacks.",
                "give at least one value, or remove the key.",
            )
    for section in ("include", "exclude"):
        for i, entry in enumerate(getattr(axes, section)):
            for key in entry:
                if key not in STACK_KEYS:
                    raise ctx.error(
                        ("stacks", section, i, key), f"`{plain(key)}` is not a stack key.",
                        f"use one of: {', '.join(STACK_KEYS)}.",
                    )
    for i, entry in enumerate(spec.exclude):
        for key in entry:
            if key not in CELL_KEYS:
                raise ctx.error(("exclude", i, key), f"`{plain(key)}` is not a cell key.",
                                f"use one of: {', '.join(CELL_KEYS)}.")
    for key in ("variants", "launchers"):
        if not getattr(spec, key):
            raise ctx.error((key,), "is an empty list, which would make zero cells.", "list at least one, or remove the key.")
    if not axes.matrix and not axes.include:
        raise ctx.error(("stacks",), "defines no stack.", "give `stacks.matrix` axes or `stacks.include` entries.")


def _env_names(env: typing.Iterable[str], loc: tuple, ctx: Ctx) -> None:
    for var in env:
        if not _ENV_RE.match(var):
            raise ctx.error(loc + ("env", var), f"`{plain(var)}` is not an environment variable name.",
                            "use letters, digits and '_'.")


def _ladder(spec: MatrixFile, ctx: Ctx) -> tuple[Step, ...]:
    """`rescue.steps` as the ladder (each named like a variant, with its variables and why), else the default."""
    if spec.rescue.steps is None:
        return DEFAULT_LADDER
    steps: dict[str, Step] = {}
    for i, sdef in enumerate(spec.rescue.steps):
        loc = ("rescue", "steps", i)
        if not _VARIANT_RE.match(sdef.name):
            raise ctx.error(loc + ("name",), f"step name `{plain(sdef.name)}` is not usable in a record.",
                            "use lower-case letters, digits and '-'.")
        if sdef.name in steps:
            raise ctx.error(loc + ("name",), f"step `{plain(sdef.name)}` is defined twice.", "give every step its own name.")
        _env_names(sdef.env, loc, ctx)
        steps[sdef.name] = Step(sdef.name, tuple(sorted((k, str(v)) for k, v in sdef.env.items())), sdef.why)
    return tuple(steps.values())


def _variants(spec: MatrixFile, ctx: Ctx) -> dict[str, Variant]:
    defined = {
        name: Variant(name, tuple(sorted(env.items())), BUILTIN_DESCRIPTIONS[name]) for name, env in BUILTIN_VARIANTS.items()
    }
    for name, vdef in spec.define.variants.items():
        loc = ("define", "variants", name)
        if not _VARIANT_RE.match(name):
            raise ctx.error(loc, f"variant name `{plain(name)}` is not usable in cell ids.",
                            "use lower-case letters, digits and '-'.")
        _env_names(vdef.env, loc, ctx)
        env = tuple(sorted((k, str(v)) for k, v in vdef.env.items()))
        defined[name] = Variant(name, env, vdef.description)
    used = {}
    for i, name in enumerate(spec.variants):
        if name not in defined:
            hint = difflib.get_close_matches(name, list(defined), n=1)
            fix = (f"did you mean `{hint[0]}`? " if hint else "") + (
                f"Define it under `define.variants` or use one of: {', '.join(defined)}."
            )
            raise ctx.error(("variants", i), f"variant `{plain(name)}` is used but not defined.", fix)
        used[name] = defined[name]
    return used


def expand_axes(axes: dict[str, list[str]], include: list[dict], exclude: list[dict]) -> list[dict[str, str]]:
    """GitHub-Actions expansion: product of the axes, minus `exclude`, then `include` extends every
    combination whose original axis values it matches, or is added as a new combination."""
    keys = list(axes)
    combos = [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))] if keys else []
    combos = [c for c in combos if not any(matches(c, e) for e in exclude)]
    extra: list[dict[str, str]] = []
    for entry in include:
        original = {k: v for k, v in entry.items() if k in axes}
        hits = [c for c in combos if all(c.get(k) == v for k, v in original.items())]
        for c in hits:
            c.update(entry)
        if not hits:
            extra.append(dict(entry))
    return combos + extra


def matches(values: dict[str, str], pattern: dict[str, str]) -> bool:
    """Every key of `pattern` matches (fnmatch globs allowed) the value of the same key."""
    return all(k in values and fnmatch.fnmatchcase(str(values[k]), str(p)) for k, p in pattern.items())


def template_path(name: str) -> Path:
    return IMAGES_DIR / f"{name}.Dockerfile.j2"


# a Docker image reference (registry/repo:tag, repo@sha256:..., sha256:<id>); the engine checks it for real
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")  # in cell ids, where '+' separates the parts
_PYTHON_RE = re.compile(r"^[A-Za-z0-9_./+-]{1,200}$")


def default_name(image: str) -> str:
    """An image stack's id when matrix.yaml gives no `name`: the image's last path part with its tag
    (nvcr.io/nvidia/pytorch:24.10-py3 -> pytorch-24.10-py3; an id -> image-<12 hex>)."""
    ref = image.split("@", 1)[0] if "@" in image else image
    if ref.startswith("sha256:"):
        return f"image-{ref[7:19]}"
    last = ref.rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9._-]+", "-", last.lower()).strip("-._")
    return name[:80] or "image"


def _image_stack(raw: dict[str, str], loc: tuple, ctx: Ctx) -> Stack:
    """A stack given by the user's own image: its versions are read from inside it before anything runs."""
    for key in raw:
        if key not in IMAGE_STACK_KEYS:
            raise ctx.error(loc, f"`{plain(key)}` cannot be given with `image:`: an image stack's versions are read from "
                            "inside the image, and the harness never installs torch or CUDA into it.",
                            f"remove `{plain(key)}` (an image stack takes {', '.join(IMAGE_STACK_KEYS)}), or drop `image:` "
                            "to build the stack from versions.")
    image = raw["image"]
    if not _IMAGE_RE.match(image):
        raise ctx.error(loc, f"`image: {plain(image)}` is not an image reference.",
                        "write it as docker does, e.g. nvcr.io/nvidia/pytorch:24.10-py3 or site/train:2026-11.")
    name = raw.get("name") or default_name(image)
    if not _NAME_RE.match(name):
        raise ctx.error(loc, f"`name: {plain(name)}` is not usable as a stack id.",
                        "use lower-case letters, digits, '.', '_' and '-' (no '+'), at most 80.")
    python = raw.get("python", "")
    if python and not _PYTHON_RE.match(python):
        raise ctx.error(loc, f"`python: {plain(python)}` is not a Python to run.",
                        "give a path inside the image (e.g. /opt/conda/bin/python) or a command on its PATH (python3.10).")
    accelerate = raw.get("accelerate", "")
    if accelerate and not _VERSION_RE.match(accelerate):
        raise ctx.error(loc, f"`accelerate: {plain(accelerate)}` is not a version.", 'write it like "1.15.0".')
    return Stack(cuda="", torch="", accelerate=accelerate, base=image, template="image", image=image, name=name,
                 python_path=python)


def stack_entry(stack: Stack) -> dict[str, str]:
    """The stack as one `stacks.include` entry of a matrix file (the derived matrices of bisect and fleet)."""
    if stack.is_image:
        return {k: v for k, v in (("image", stack.image), ("name", stack.name), ("python", stack.python_path),
                                  ("accelerate", stack.accelerate)) if v}
    raw = {"cuda": stack.cuda, "torch": stack.torch, "accelerate": stack.accelerate,
           "nccl": "bundled" if stack.nccl_via == "bundled" else f"{stack.nccl_via}:{stack.nccl}"}
    return raw | {k: v for k, v in (("base", stack.base), ("python", stack.python), ("torch_index", stack.torch_index),
                                    ("template", stack.template)) if v}


def default_base(cuda: str) -> str:
    """The base image of a built stack that names none: the local Debian base on CPU, NVIDIA's runtime image."""
    return "harness-base:bookworm" if cuda == "cpu" else f"nvidia/cuda:{cuda}-runtime-ubuntu22.04"


def default_index(cuda: str) -> str:
    """torch's wheel index for a stack that names none: the CPU wheels, or the CUDA's (cu124 for 12.4.1)."""
    return ("https://download.pytorch.org/whl/cpu" if cuda == "cpu"
            else f"https://download.pytorch.org/whl/{compat.cuda_wheel_tag(cuda)}")


def _stack(raw: dict[str, str], loc: tuple, ctx: Ctx) -> Stack:
    if "image" in raw:
        return _image_stack(raw, loc, ctx)
    missing = [k for k in REQUIRED_STACK_KEYS if k not in raw]
    if missing:
        raise ctx.error(loc, f"a stack {plain(raw)} has no {', '.join(missing)}.",
                        f"give every stack {', '.join(REQUIRED_STACK_KEYS)}.")
    for key in (("torch", "accelerate") + (() if raw["cuda"] == "cpu" else ("cuda",))
                + (("python",) if "python" in raw else ())):
        if not _VERSION_RE.match(raw[key]):
            raise ctx.error(loc, f"`{key}: {plain(raw[key])}` is not a version.",
                            'write it like "2.5.1" (cuda may also be "cpu").')
    try:
        nccl, via = _parse_nccl(raw.get("nccl", "bundled"))
    except ValueError:
        raise ctx.error(
            loc, f"`nccl: {plain(raw.get('nccl'))}` is not understood.",
            'use "bundled", "2.21.5" (pip), "pip:2.21.5" or "system:2.21.5".',
        ) from None
    base = raw.get("base") or default_base(raw["cuda"])
    python = raw.get("python") or compat.python_of_base(base)
    if not python:
        raise ctx.error(loc, f"the Python of base image `{plain(base)}` is not known.", 'add `python: "3.x"` to that stack.')
    template = raw.get("template") or ("cpu" if raw["cuda"] == "cpu" else "cuda")
    if not _TEMPLATE_RE.match(template) or not template_path(template).is_file():
        have = sorted(p.name.split(".")[0] for p in IMAGES_DIR.glob("*.Dockerfile.j2"))
        raise ctx.error(
            loc,
            f"template `{plain(template)}` does not exist (no {IMAGES_DIR.name}/{plain(template)}.Dockerfile.j2).",
            f"use one of: {', '.join(have)}, or add that file.",
        )
    index = raw.get("torch_index") or default_index(raw["cuda"])
    return Stack(raw["cuda"], raw["torch"], raw["accelerate"], nccl, via, base, python, index, template)


def _stack_loc(raw: dict[str, str], spec: MatrixFile) -> tuple:
    for i, entry in enumerate(spec.stacks.include):
        if all(raw.get(k) == v for k, v in entry.items()):
            return ("stacks", "include", i)
    return ("stacks", "matrix")


def _build(spec: MatrixFile, path: Path, sha: str, ctx: Ctx) -> Matrix:
    _check_axes(spec, ctx)
    variants = _variants(spec, ctx)
    raw_stacks = expand_axes(spec.stacks.matrix, spec.stacks.include, spec.stacks.exclude)
    stacks: dict[str, Stack] = {}
    for raw in raw_stacks:
        stack = _stack(raw, _stack_loc(raw, spec), ctx)
        if stacks.setdefault(stack.id, stack) != stack:
            raise ctx.error(
                ("stacks",),
                f"two different stacks make the same id `{stack.id}` (they differ only in base, python, "
                "torch_index or template), so their cells could not be told apart.",
                "keep one of them, or put them in separate matrix files.",
            )
    if len(stacks) * len(variants) * len(spec.launchers) > MAX_CELLS:
        raise ctx.error(("stacks",), f"{len(stacks)} stacks x {len(variants)} variants x {len(spec.launchers)} launchers "
                        f"make more than the {MAX_CELLS} cells one matrix may have.", "split it into several matrix files.")
    cells: dict[str, Cell] = {}
    for stack in stacks.values():
        reason = compat.why_not(stack)
        for variant, launcher in itertools.product(variants.values(), spec.launchers):
            cell = Cell(stack, variant, launcher, reason)
            fields = cell.fields()
            if any(matches(fields, e) for e in spec.exclude):
                continue
            cells[cell.id] = cell
    sizes = [_size(size, ("bandwidth", "sizes", i), ctx) for i, size in enumerate(spec.bandwidth.sizes)]
    return Matrix(
        path=path,
        sha256=sha,
        description=spec.description,
        stacks=tuple(stacks.values()),
        cells=tuple(cells.values()),
        variants=variants,
        timeouts=spec.timeouts,
        bandwidth_sizes=tuple(sizes),
        bandwidth_iters=spec.bandwidth.iters,
        bandwidth_warmup=spec.bandwidth.warmup,
        bandwidth_trials=spec.bandwidth.trials,
        bandwidth_collectives=tuple(spec.bandwidth.collectives),
        min_busbw=spec.bandwidth.min_busbw,
        ranks=spec.ranks,
        ladder=_ladder(spec, ctx),
        rescue_budget=Budget(spec.rescue.attempts, spec.rescue.seconds),
        rescue_timeouts=spec.rescue.timeouts,
    )

