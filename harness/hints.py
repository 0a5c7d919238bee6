"""Known-issue hints: which documented traps a cell record looks like, with the fix and a link.

Why a data file: the signatures (hints.yaml) change as drivers, NCCL, torch and Accelerate change;
the matcher here stays small. Why declarative conditions instead of code per hint: a hint must be
readable and reviewable next to the evidence it cites, and a typo in the data file must fail loudly
before a command does any work (`check()`; strict pydantic models, unknown keys refused), not
silently never match. The file is the packaged hints.yaml, or a site's own file named by the
environment variable HARNESS_HINTS.

`match(record)` is pure and total: any field of a record may be missing or of the wrong type (old
records, build-error and n/a cells without attempts) and the answer is then just fewer hints.
Missing facts make a condition fail, so a hint fires only on evidence.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import (AfterValidator, BeforeValidator, ConfigDict, Field, PlainValidator, StrictBool,
                      StringConstraints, ValidationError, ValidationInfo, field_validator, model_validator)
from pydantic_core import PydanticCustomError

from harness import yamlfile
from harness.errors import HarnessError, HintsError
from harness.record import ERROR_CLASSES, PHASES, STATUSES, CellRecord, Fingerprint, Outcome, RawAttempt

__all__ = ["DATA_FILE", "ENV_VAR", "CONDITIONS", "Facts", "Hint", "HintsError", "Rule", "check", "facts",
           "hints_file", "load", "match"]

DATA_FILE = Path(__file__).with_name("hints.yaml")
ENV_VAR = "HARNESS_HINTS"  # a site's own hints file, used instead of DATA_FILE

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Hint:
    """What the report shows: a known issue the cell looks like, what to do, and where it is documented."""

    id: str
    title: str
    explanation: str
    link: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


# ---------------------------------------------------------------- facts from one record
@dataclass(frozen=True)
class Facts:
    """The few facts of a cell record that conditions look at, normalised (None = not known)."""

    status: str | None = None
    phase: str | None = None
    error_class: str | None = None
    launcher: str | None = None
    gpu_names: tuple[str, ...] = ()
    gpu_count: int | None = None
    driver: Version | None = None
    versions: Mapping[str, Version | None] = field(default_factory=dict)  # torch, accelerate, nccl_loaded
    shm_bytes: int | None = None
    memlock_soft: float | None = None  # bytes; math.inf for "unlimited"
    env_set: frozenset[str] = frozenset()
    launcher_changed: frozenset[str] = frozenset()
    peer_unverified: bool = False
    texts: tuple[str, ...] = ()


def version(text: Any) -> Version | None:
    """packaging Version of the part before '+' (2.7.0+cu126 -> 2.7.0); None when not a version."""
    if not isinstance(text, str):
        return None
    try:
        return Version(text.split("+", 1)[0].strip())
    except InvalidVersion:
        return None


def _texts(outcome: Outcome | None, raw: RawAttempt) -> tuple[str, ...]:
    """Where error text lives: outcome reason, rank errors, launcher output, NCCL warnings and log tails."""
    found: list[Any] = [outcome.reason if outcome else None, raw.launcher_tail, raw.infra_reason]
    for state in raw.rank_states.values():
        found += [state.error.type, state.error.message] if state.error else []
    for log in raw.nccl_logs.values():
        found += [*log.warnings, *log.errors]
    found += raw.nccl_tails
    return tuple(t for t in found if isinstance(t, str) and t)


def _env_set(record: CellRecord, raw: RawAttempt, fp: Fingerprint) -> frozenset[str]:
    """Variables set anywhere we can see: the variant, the rank, NCCL's own log, the launcher's change."""
    names = set()
    for env in [record.env, fp.env] + [log.env for log in raw.nccl_logs.values()]:
        names |= {k for k, v in env.items() if isinstance(k, str) and v not in (None, "")}
    names |= {name for name, change in fp.env_changed.items() if change.actual not in (None, "")}
    return frozenset(names)


def _peer_unverified(fp: Fingerprint) -> bool:
    return any(p.claimed is True and p.verified not in (None, True) for p in fp.peer_access)


def facts(record: CellRecord | Any) -> Facts:
    """The normalised facts of one cell record (a CellRecord, or its JSON); never raises, whatever the
    record holds: JSON that is not a record's gives no facts, and a missing fact is None or empty."""
    record = CellRecord.parse(record)
    if record is None:
        return Facts()
    cell, raw = record.cell, record.last_raw
    fp = raw.fingerprint
    last = record.last_attempt
    outcome = record.outcome or (last.outcome if last else None)
    # loaded NCCL: as read inside the rank, else as NCCL logged it, else what the cell asked for
    candidates = [fp.nccl_loaded] + [log.version for log in raw.nccl_logs.values()] + [cell.nccl]
    nccl = next((v for v in map(version, candidates) if v is not None), None)
    return Facts(
        status=outcome.status if outcome else None,
        phase=(outcome.phase or None) if outcome else None,
        error_class=(outcome.error_class or None) if outcome else None,
        launcher=cell.launcher or fp.launcher,
        gpu_names=fp.gpu_names,
        gpu_count=fp.gpu_count,
        driver=version(fp.driver),
        versions={
            "torch": version(fp.torch) or version(cell.torch),
            "accelerate": version(fp.accelerate) or version(cell.accelerate),
            "nccl_loaded": nccl,
        },
        shm_bytes=fp.shm_bytes,
        memlock_soft=fp.memlock_soft,
        env_set=_env_set(record, raw, fp),
        launcher_changed=frozenset(k for k, change in fp.env_changed.items() if change.expected != change.actual),
        peer_unverified=_peer_unverified(fp),
        texts=_texts(outcome, raw),
    )


# ---------------------------------------------------------------- the condition vocabulary
def _in_range(have: Version | None, bounds: VersionRange) -> bool:
    low, high = bounds.min, bounds.max
    return have is not None and (low is None or have >= low) and (high is None or have <= high)


def _one_of(attr: str) -> Callable[[Facts, tuple[str, ...]], bool]:
    return lambda f, want: getattr(f, attr) in want


def _version_range(name: str) -> Callable[[Facts, VersionRange], bool]:
    return lambda f, bounds: _in_range(f.versions.get(name), bounds)


# key -> predicate on (Facts, the validated value of that key in the data file; see Conditions)
CONDITIONS: dict[str, Callable[[Facts, Any], bool]] = {
    "status": _one_of("status"),
    "phase": _one_of("phase"),
    "error_class": _one_of("error_class"),
    "launcher": _one_of("launcher"),
    "gpu_name": lambda f, want: any(want.lower() in n.lower() for n in f.gpu_names),
    "gpu_count_min": lambda f, n: f.gpu_count is not None and f.gpu_count >= n,
    "driver_below": lambda f, bound: f.driver is not None and f.driver < bound,
    "torch": _version_range("torch"),
    "accelerate": _version_range("accelerate"),
    "nccl_loaded": _version_range("nccl_loaded"),
    "shm_below": lambda f, n: f.shm_bytes is not None and f.shm_bytes < n,
    "memlock_below": lambda f, n: f.memlock_soft is not None and f.memlock_soft < n,
    "text": lambda f, rx: any(rx.search(t) for t in f.texts),
    "env_unset": lambda f, names: not f.env_set.intersection(names),
    "launcher_changed": lambda f, names: bool(f.launcher_changed.intersection(names)),
    "peer_unverified": lambda f, want: f.peer_unverified is want,
    # "any" is handled by _holds: a list of condition sets, one of which must hold.
}


def _holds(conditions: tuple[tuple[str, Any], ...], f: Facts) -> bool:
    return all(any(_holds(alt, f) for alt in arg) if key == "any" else CONDITIONS[key](f, arg)
               for key, arg in conditions)


@dataclass(frozen=True)
class Rule:
    """One entry of the data file: the hint and the (validated) conditions that select it."""

    hint: Hint
    when: tuple[tuple[str, Any], ...]

    def holds(self, f: Facts) -> bool:
        return _holds(self.when, f)


# ---------------------------------------------------------------- the data file's schema
_DOC = "the format described at the top of harness/hints.yaml"


def _bad(problem: str, fix: str) -> PydanticCustomError:
    """A validation error worded for a person; yamlfile.translate shows the message and the fix."""
    # "fix" first: pydantic fills the template key by key, so a "{fix}" inside the problem stays as written
    return PydanticCustomError("hints", "{problem}", {"fix": fix, "problem": problem})


def _a_list(value: Any) -> Any:
    if not isinstance(value, list):
        example = f"[{value}]" if isinstance(value, str) else "[a, b]"
        raise _bad(f"must be a list (got {value!r}).", f"write it as a YAML list, e.g. {example}.")
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
        return re.compile(value, re.IGNORECASE)
    except re.error as exc:
        raise _bad(f"{value!r} is not a valid regular expression ({exc}).",
                   r"correct it (Python re syntax; a literal ( [ { . * + ? | needs a backslash).") from None


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


def _names(what: str | None = None, allowed: tuple[str, ...] | None = None) -> Any:
    """A non-empty YAML list of strings, each one of `allowed` when given."""
    item: Any = Annotated[str, StringConstraints(strict=True, min_length=1)]
    if allowed is not None:
        item = Annotated[item, AfterValidator(_allowed(what or "value", allowed))]
    return Annotated[tuple[item, ...], BeforeValidator(_nonempty)]


_Text = Annotated[str, StringConstraints(strict=True), AfterValidator(_filled)]
_Statuses = _names("status", STATUSES)
_Phases = _names("phase", PHASES)
_ErrorClasses = _names("error class", ERROR_CLASSES)
_Strings = _names()
_PositiveInt = Annotated[int, Field(strict=True, gt=0)]
_Version = Annotated[Version, PlainValidator(_quoted_version)]
_Regex = Annotated[re.Pattern, PlainValidator(_regex)]


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
    """`when:` of a hint: every key given must hold (predicates in CONDITIONS, doc in hints.yaml)."""

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
    env_unset: _Strings | None = None
    launcher_changed: _Strings | None = None
    peer_unverified: StrictBool | None = None
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
                       f"give at least one of: {', '.join([*CONDITIONS, 'any'])}.")
        return self

    def pairs(self) -> tuple[tuple[str, Any], ...]:
        """(key, value) of the conditions given, for _holds; `any` holds the pairs of each alternative."""
        return tuple((key, tuple(alt.pairs() for alt in self.any) if key == "any" else getattr(self, key))
                     for key in type(self).model_fields if key in self.model_fields_set)


class HintSpec(_Strict):
    """One entry of `hints:`."""

    id: Annotated[str, StringConstraints(strict=True), AfterValidator(_hint_id)]
    title: _Text
    explanation: _Text
    link: Annotated[_Text, AfterValidator(_https)]
    when: Conditions

    def rule(self) -> Rule:
        hint = Hint(self.id, self.title.strip(), " ".join(self.explanation.split()), self.link.strip())
        return Rule(hint, self.when.pairs())


class HintsFile(_Strict):
    hints: Annotated[list[HintSpec], BeforeValidator(_a_list)]


# ---------------------------------------------------------------- loading
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


def hints_file() -> Path:
    """The hints file in use: $HARNESS_HINTS when set (a site's own known issues), else the packaged one."""
    own = os.environ.get(ENV_VAR, "").strip()
    return Path(own).expanduser() if own else DATA_FILE


def load(path: str | Path | None = None) -> list[Rule]:
    """Read and validate a hints file (default: hints_file()); HintsError names file:line, key and fix."""
    path = Path(path) if path is not None else hints_file()
    from_env = f" (named by {ENV_VAR})" if path != DATA_FILE and path == hints_file() else ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HarnessError(f"{path}: no such hints file{from_env}. Fix: point {ENV_VAR} at an existing file "
                           f"(start from a copy of {DATA_FILE}), or unset it to use the packaged one.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: cannot be read{from_env} ({exc}). Fix: check the file and its permissions.") from None
    raw, lines = yamlfile.parse(text, path, HintsError)
    ctx = yamlfile.Ctx(path, lines, HintsError, _key(raw))
    if not isinstance(raw, dict):
        raise ctx.error((), "must be a mapping with the single key `hints` holding a list.",
                        f"start the file with `hints:` (see {DATA_FILE}).")
    try:
        spec = HintsFile.model_validate(raw)
    except ValidationError as exc:
        raise yamlfile.translate(exc, ctx, HintsFile, _DOC) from None
    first_line: dict[str, int | None] = {}
    for i, entry in enumerate(spec.hints):
        if entry.id in first_line:
            raise ctx.error(("hints", i, "id"), f"id `{entry.id}` is used twice (first at line {first_line[entry.id]}).",
                            "give every hint an id of its own.")
        first_line[entry.id] = ctx.line(("hints", i, "id"))
    return [entry.rule() for entry in spec.hints]


@lru_cache(maxsize=4)
def _rules(path: Path) -> tuple[Rule, ...]:
    return tuple(load(path))


def _default_rules() -> tuple[Rule, ...]:
    return _rules(hints_file())


def check(path: str | Path | None = None) -> None:
    """Validate the hints file in use (or `path`) before a command does any work: a bad file is a
    HintsError (exit 2) naming file:line, key and fix, never a traceback after a whole run."""
    _rules(Path(path) if path is not None else hints_file())


def match(record: Any, rules: Iterable[Rule] | None = None) -> list[Hint]:
    """The hints whose conditions all hold for this cell record, in data-file order."""
    f = facts(record)
    return [rule.hint for rule in (_default_rules() if rules is None else rules) if rule.holds(f)]
