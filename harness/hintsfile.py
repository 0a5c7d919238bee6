"""The hints data (harness/hints.d/*.yaml, or a site's own file or folder named by HARNESS_HINTS): where
it is, its schema, and reading it.

A typo in the file must fail loudly before a command does any work, not silently never match: strict
pydantic models (unknown keys refused), every value checked, and each problem reported as
`file:line at `key`: problem Fix: ...` (HintsError, exit 2); a `text` pattern that can backtrack
without end is refused the same way (harness/textmatch.py). What the conditions mean when matched
against a record lives in harness/hints.py; this module only says what a well-formed file is.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness import textmatch, yamlfile
from harness.errors import HarnessError, HintsError
from harness.record import ERROR_CLASSES, PHASES, STATUSES
from harness.workload.fingerprint import COMPUTE_MODES

__all__ = ["ENV_VAR", "PACKAGED", "Conditions", "Hint", "HintSpec", "HintsFile", "VersionRange", "files", "hints_path",
           "read", "version"]

# The packaged hints: every *.yaml file of this folder, in the order of their names, one file per subsystem.
# One file held them all until it neared yamlfile.MAX_BYTES (426 KB of 512 KiB, 245 hints, 2026-12-07); each
# file is bounded on its own, so the knowledge base grows by files, not by raising the parser's bound.
PACKAGED = Path(__file__).with_name("hints.d")
ENV_VAR = "HARNESS_HINTS"  # a site's own hints file or folder, used instead of PACKAGED

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DOC = "the format described in harness/hints.d/README.md"


@dataclass(frozen=True)
class Hint:
    """What the report shows: a known issue the cell looks like, what to do, and where it is documented.
    `evidence` names the public failure logs (tests/data/real_failures.yaml ids) the hint is built from."""

    id: str
    title: str
    explanation: str
    link: str
    fix: str = ""
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"evidence": list(self.evidence)}


def version(text: Any) -> Version | None:
    """packaging Version of the part before '+' (2.7.0+cu126 -> 2.7.0); None when not a version."""
    if not isinstance(text, str):
        return None
    try:
        return Version(text.split("+", 1)[0].strip())
    except InvalidVersion:
        return None


# ---------------------------------------------------------------- validators, worded for a person
_bad = yamlfile.bad


def _a_list(value: Any) -> Any:
    if not isinstance(value, list):
        example = f"[{value}]" if isinstance(value, str) else "[a, b]"
        raise _bad(f"must be a list (got {yamlfile.short(value)}).", f"write it as a YAML list, e.g. {example}.")
    return value


def _nonempty(value: Any) -> Any:
    if not _a_list(value):
        raise _bad("is an empty list.", "list at least one value, or remove the key.")
    return value


def _allowed(what: str, allowed: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in allowed:
            close = difflib.get_close_matches(value, allowed, n=1)
            fix = (f"did you mean `{close[0]}`? " if close else "") + f"Use one of: {', '.join(allowed)}."
            raise _bad(f"unknown {what} `{value}`.", fix)
        return value
    return check


def _quoted_version(value: Any) -> Version:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = getattr(value, "text", str(value))  # yamlfile.Float remembers "2.10"
        if text != repr(value):
            problem = f"is the number {text}, which YAML reads as {value!r}; versions must be quoted strings."
        else:
            why = " (YAML reads an unquoted 2.10 as 2.1)" if isinstance(value, float) else ""
            problem = f"is the number {text}; versions must be quoted strings{why}."
        raise _bad(problem, f'quote it: "{text}".')
    parsed = version(value)
    if parsed is None:
        raise _bad(f"{value!r} is not a version.", 'write it as a quoted version like "2.26.4".')
    return parsed


def _regex(value: Any) -> re.Pattern[str]:
    if not isinstance(value, str) or not value:
        raise _bad(f"must be a regular expression, a non-empty string (got {value!r}).", 'quote it: "...".')
    try:
        compiled = re.compile(value, re.IGNORECASE)
    except re.error as exc:
        raise _bad(f"{value!r} is not a valid regular expression ({exc}).",
                   r"correct it (Python re syntax; a literal ( [ { . * + ? | needs a backslash).") from None
    # issue 22: a pattern that backtracks without end made report, matrix, compare and publish spin forever
    found = textmatch.hazard(value, re.IGNORECASE)
    if found is not None:
        shown = f"`{value}`" if value.isprintable() else repr(value)  # as written in the file, when it can be
        raise _bad(f"the pattern {shown} {found.problem}", found.fix)
    return compiled


def _filled(value: str) -> str:
    if not value.strip():
        raise _bad("is empty.", "write the text (one or two sentences).")
    return value


def _https(value: str) -> str:
    if not value.strip().startswith("https://"):
        raise _bad(f"{value!r} is not an https:// URL.", "link the public page that documents the issue (https://...).")
    return value


def _hint_id(value: str) -> str:
    if not _ID.match(value):
        raise _bad(f"id {value!r} is not lower-case letters, digits and '-'.", "write it like `rtx40-p2p-hang`.")
    return value


def _evidence_id(value: str) -> str:
    if not _ID.match(value):
        raise _bad(f"evidence id {value!r} is not lower-case letters, digits and '-'.",
                   "name an entry of tests/data/real_failures.yaml, e.g. `shm-size-1`.")
    return value


def _names(what: str | None = None, allowed: tuple[str, ...] | None = None) -> Any:
    """A non-empty YAML list of strings, each one of `allowed` when given."""
    item: Any = Annotated[str, StringConstraints(strict=True, min_length=1)]
    if allowed is not None:
        item = Annotated[item, AfterValidator(_allowed(what or "value", allowed))]
    return Annotated[tuple[item, ...], BeforeValidator(_nonempty)]


_Text = Annotated[str, StringConstraints(strict=True), AfterValidator(_filled)]
if TYPE_CHECKING:  # what the models hold; pydantic reads the validators of the aliases below
    _Statuses = tuple[str, ...]
    _Phases = tuple[str, ...]
    _ErrorClasses = tuple[str, ...]
    _Strings = tuple[str, ...]
    _ComputeModes = tuple[str, ...]
else:
    _Statuses = _names("status", STATUSES)
    _Phases = _names("phase", PHASES)
    _ErrorClasses = _names("error class", ERROR_CLASSES)
    _Strings = _names()
    _ComputeModes = _names("compute mode", tuple(COMPUTE_MODES.values()))
_PositiveInt = Annotated[int, Field(strict=True, gt=0)]
_Version = Annotated[Version, PlainValidator(_quoted_version)]
_Regex = Annotated[re.Pattern, PlainValidator(_regex)]
_EvidenceIds = Annotated[tuple[Annotated[str, StringConstraints(strict=True), AfterValidator(_evidence_id)], ...],
                         BeforeValidator(_nonempty)]


# ---------------------------------------------------------------- the models
class _Strict(yamlfile.Strict):
    model_config = ConfigDict(arbitrary_types_allowed=True)  # packaging's Version

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise _bad(f"must be a mapping (got {value!r}).", f"write it with the keys {', '.join(cls.model_fields)}.")
        return value


class VersionRange(_Strict):
    """Inclusive bounds; at least one of them."""

    min: _Version | None = None
    max: _Version | None = None

    @model_validator(mode="after")
    def _bounds(self) -> VersionRange:
        if self.min is None and self.max is None:
            raise _bad("gives neither min nor max.", 'write e.g. {min: "2.24", max: "2.26.4"}.')
        if self.min is not None and self.max is not None and self.min > self.max:
            raise _bad(f"min {self.min} is above max {self.max}.", "swap them, or correct one.")
        return self


class Conditions(_Strict):
    """`when:` of a hint: every key given must hold (the predicates are hints.CONDITIONS, the doc is at
    the top of hints.yaml)."""

    status: _Statuses | None = None
    phase: _Phases | None = None
    error_class: _ErrorClasses | None = None
    launcher: _Strings | None = None
    gpu_name: Annotated[str, StringConstraints(strict=True, min_length=1)] | None = None
    gpu_count_min: _PositiveInt | None = None
    driver_below: _Version | None = None
    torch: VersionRange | None = None
    accelerate: VersionRange | None = None
    nccl_loaded: VersionRange | None = None
    shm_below: _PositiveInt | None = None
    memlock_below: _PositiveInt | None = None
    text: _Regex | None = None
    text_absent: _Regex | None = None
    env_unset: _Strings | None = None
    env_set: _Strings | None = None
    launcher_changed: _Strings | None = None
    peer_unverified: StrictBool | None = None
    ranks_behind: StrictBool | None = None
    shm_writable: StrictBool | None = None
    compat_loaded: StrictBool | None = None
    compute_mode: _ComputeModes | None = None
    capability_below: _Version | None = None
    nvml_mismatch: StrictBool | None = None
    nccl_cuda_above_driver: StrictBool | None = None
    driver_seen: StrictBool | None = None
    gpu_memory_elsewhere: StrictBool | None = None
    any: Annotated[tuple[Conditions, ...], BeforeValidator(_nonempty)] | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            raise _bad("is empty (null).", f"give `{info.field_name}` a value, or remove the key.")
        return value

    @model_validator(mode="after")
    def _at_least_one(self) -> Conditions:
        if not self.model_fields_set:
            raise _bad("has no condition, so the hint would show on every cell.",
                       f"give at least one of: {', '.join(type(self).model_fields)}.")
        return self

    def pairs(self) -> tuple[tuple[str, Any], ...]:
        """(key, value) of the conditions given; `any` holds the pairs of each alternative."""
        # a given `any` is never None (_not_null refuses null); `or ()` only tells mypy so
        return tuple((key, tuple(alt.pairs() for alt in self.any or ()) if key == "any" else getattr(self, key))
                     for key in type(self).model_fields if key in self.model_fields_set)


class HintSpec(_Strict):
    """One entry of `hints:`. `fix` and `evidence` are optional for a site's own file; the packaged
    file gives both for every hint (tests/test_hints_real.py checks it)."""

    id: Annotated[str, StringConstraints(strict=True), AfterValidator(_hint_id)]
    title: _Text
    explanation: _Text
    fix: _Text | None = None
    link: Annotated[_Text, AfterValidator(_https)]
    evidence: _EvidenceIds | None = None
    # a hint about a wrapper (NCCL's "invalid usage", a rank that only lost its peer): shown only when no
    # hint about a specific cause matched the same cell (seen on 2x H200: "invalid usage" wrapped
    # "Bootstrap : no socket interface found", and its generic fix stood beside the socket one)
    generic: bool = False
    when: Conditions

    def hint(self) -> Hint:
        return Hint(self.id, self.title.strip(), " ".join(self.explanation.split()), self.link.strip(),
                    " ".join((self.fix or "").split()), self.evidence or ())


class HintsFile(_Strict):
    hints: Annotated[list[HintSpec], BeforeValidator(_a_list)]


# ---------------------------------------------------------------- reading
def _key(raw: Any) -> Callable[[tuple], str]:
    """Key paths name a hint by its id when it has a usable one (`hints[shm-too-small].when.text`),
    else by its position (`hints[#3]`)."""
    entries = raw.get("hints") if isinstance(raw, dict) else None

    def key(loc: tuple) -> str:
        if len(loc) < 2 or loc[0] != "hints" or not isinstance(loc[1], int):
            return yamlfile.key_text(loc)
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
        hint_id = entry.get("id") if isinstance(entry, dict) else None
        label = hint_id if isinstance(hint_id, str) and _ID.match(hint_id) else f"#{loc[1] + 1}"
        rest = yamlfile.key_text(loc[2:])
        return f"hints[{label}]" + (f".{rest}" if rest else "")

    return key


def hints_path() -> Path:
    """The hints in use: $HARNESS_HINTS when set (a site's own file or folder), else the packaged folder."""
    own = os.environ.get(ENV_VAR, "").strip()
    return Path(own).expanduser() if own else PACKAGED


def _named_by(path: Path) -> str:
    return f" (named by {ENV_VAR})" if path != PACKAGED and path == hints_path() else ""


def files(path: Path) -> list[Path]:
    """The files a hints path stands for: itself, or a folder's *.yaml files in the order of their names."""
    if not path.is_dir():
        return [path]
    found = sorted(p for p in path.iterdir() if p.suffix == ".yaml")
    if not found:
        raise HarnessError(f"{path}: a hints folder with no *.yaml file{_named_by(path)}. Fix: put the hints files "
                           f"in it (start from a copy of {PACKAGED}), or point {ENV_VAR} at a file.")
    return found


def _read_one(path: Path, named_by: str) -> tuple[list[HintSpec], yamlfile.Ctx]:
    try:
        text = yamlfile.read(path, HintsError)
    except FileNotFoundError:
        raise HarnessError(f"{path}: no such hints file{named_by}. Fix: point {ENV_VAR} at an existing file or "
                           f"folder (start from a copy of {PACKAGED}), or unset it to use the packaged one.") from None
    except OSError as exc:
        raise HarnessError(f"{path}: cannot be read{named_by} ({exc.strerror}). "
                           "Fix: check the file and its permissions.") from None
    raw, lines = yamlfile.parse(text, path, HintsError)
    ctx = yamlfile.Ctx(path, lines, HintsError, _key(raw))
    if not isinstance(raw, dict):
        raise ctx.error((), "must be a mapping with the single key `hints` holding a list.",
                        f"start the file with `hints:` (see {PACKAGED / 'README.md'}).")
    try:
        return HintsFile.model_validate(raw).hints, ctx
    except ValidationError as exc:
        raise yamlfile.translate(exc, ctx, HintsFile, _DOC) from None


def read(path: str | Path | None = None) -> list[HintSpec]:
    """Read and validate a hints file or folder (default: hints_path()): every hint, file after file;
    HintsError names file:line, key and fix, and an id used twice names both places."""
    path = Path(path) if path is not None else hints_path()
    named_by = _named_by(path)
    hints: list[HintSpec] = []
    first: dict[str, str] = {}  # id -> where it was first given
    for one in files(path):
        specs, ctx = _read_one(one, named_by)
        for i, entry in enumerate(specs):
            where = ("" if one == path else f"{one.name} ") + f"line {ctx.line(('hints', i, 'id'))}"
            if entry.id in first:
                raise ctx.error(("hints", i, "id"), f"id `{entry.id}` is used twice (first at {first[entry.id]}).",
                                "give every hint an id of its own.")
            first[entry.id] = where
        hints.extend(specs)
    return hints
