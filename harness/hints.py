"""Known-issue hints: which documented traps a cell record looks like, with the fix and a link.

Why a data file: the signatures (hints.yaml) change as drivers, NCCL, torch and Accelerate change;
the matcher here stays small. Why declarative conditions instead of code per hint: a hint must be
readable and reviewable next to the evidence it cites, and a typo in the data file must fail loudly
at load time (unknown keys are rejected), not silently never match.

`match(record)` is pure and total: any field of a record may be missing or of the wrong type (old
records, build-error and n/a cells without attempts) and the answer is then just fewer hints.
Missing facts make a condition fail, so a hint fires only on evidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from harness.outcome import ERROR_CLASSES, STATUSES

__all__ = ["DATA_FILE", "CONDITIONS", "Facts", "Hint", "Rule", "facts", "load", "match"]

DATA_FILE = Path(__file__).with_name("hints.yaml")

# supervise.STARTUP plus the workload's phases (supervise.PHASES); not imported, to keep this
# module free of the engine stack.
_PHASES = ("startup", "fingerprint", "init", "prepare", "step", "check", "bandwidth", "teardown")
_HINT_KEYS = ("id", "title", "explanation", "link", "when")
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


def _get(obj: Any, *keys: Any) -> Any:
    """obj[k1][k2]...; None as soon as a level is missing or not a mapping/list."""
    for key in keys:
        if isinstance(obj, Mapping):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


def _dict(obj: Any) -> Mapping:
    return obj if isinstance(obj, Mapping) else {}


def _str(obj: Any) -> str | None:
    return obj if isinstance(obj, str) and obj else None


def _int(obj: Any) -> int | None:
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else None


def version(text: Any) -> Version | None:
    """packaging Version of the part before '+' (2.7.0+cu126 -> 2.7.0); None when not a version."""
    if not isinstance(text, str):
        return None
    try:
        return Version(text.split("+", 1)[0].strip())
    except InvalidVersion:
        return None


def _texts(outcome: Mapping, raw: Mapping) -> tuple[str, ...]:
    """Where error text lives: outcome reason, rank errors, launcher output, NCCL warnings and log tails."""
    found: list[Any] = [outcome.get("reason"), raw.get("launcher_tail"), raw.get("infra_reason")]
    for state in _dict(raw.get("ranks")).values():
        error = _get(state, "error")
        found += [_get(error, "type"), _get(error, "message")]
    for log in _dict(raw.get("nccl")).values():
        for key in ("warnings", "errors"):
            items = _get(log, key)
            found += items if isinstance(items, list) else []
    found += list(_dict(_get(raw, "forensics", "nccl_tail")).values())
    return tuple(t for t in found if isinstance(t, str) and t)


def _env_set(record: Mapping, raw: Mapping, fp: Mapping) -> frozenset[str]:
    """Variables set anywhere we can see: the variant, the rank, NCCL's own log, the launcher's change."""
    names = set()
    for env in [record.get("env"), fp.get("env")] + [_get(log, "env") for log in _dict(raw.get("nccl")).values()]:
        names |= {k for k, v in _dict(env).items() if isinstance(k, str) and v not in (None, "")}
    for name, change in _dict(fp.get("nccl_env_changed")).items():
        if _get(change, "actual") not in (None, ""):
            names.add(name)
    return frozenset(names)


def _memlock(fp: Mapping) -> float | None:
    soft = _get(fp, "memlock", "soft")
    if soft == "unlimited":
        return math.inf
    return _int(soft)


def _peer_unverified(fp: Mapping) -> bool:
    rows = fp.get("peer_access")
    return any(_get(row, "claimed") is True and _get(row, "verified") not in (None, True)
               for row in (rows if isinstance(rows, list) else []))


def facts(record: Any) -> Facts:
    """The normalised facts of one cell record; never raises, whatever the record holds."""
    record = _dict(record)
    cell = _dict(record.get("cell"))
    attempts = record.get("attempts")
    last = _dict(attempts[-1]) if isinstance(attempts, list) and attempts else {}
    raw = _dict(last.get("raw"))
    fp = _dict(_get(raw, "phases", "fingerprint", "fingerprint"))
    outcome = _dict(record.get("outcome")) or _dict(last.get("outcome"))

    gpus = fp.get("gpus") if isinstance(fp.get("gpus"), list) else []
    names = tuple(n for n in (_str(_get(g, "name")) for g in gpus) if n)
    counts = [c for c in (_int(fp.get("device_count")), len(gpus) or None) if c]

    # loaded NCCL: as read inside the rank, else as NCCL logged it, else what the cell asked for
    candidates = [_get(fp, "nccl_loaded", "version")]
    candidates += [_get(log, "version") for log in _dict(raw.get("nccl")).values()]
    nccl = next((v for v in map(version, candidates + [cell.get("nccl")]) if v is not None), None)
    return Facts(
        status=_str(outcome.get("status")),
        phase=_str(outcome.get("phase")),
        error_class=_str(outcome.get("error_class")),
        launcher=_str(cell.get("launcher")) or _str(fp.get("launcher")),
        gpu_names=names,
        gpu_count=max(counts) if counts else None,
        driver=version(_get(fp, "driver", "version")),
        versions={
            "torch": version(fp.get("torch")) or version(cell.get("torch")),
            "accelerate": version(fp.get("accelerate")) or version(cell.get("accelerate")),
            "nccl_loaded": nccl,
        },
        shm_bytes=_int(_get(fp, "shm", "bytes")),
        memlock_soft=_memlock(fp),
        env_set=_env_set(record, raw, fp),
        launcher_changed=frozenset(
            k for k, v in _dict(fp.get("nccl_env_changed")).items()
            if isinstance(k, str) and _get(v, "expected") != _get(v, "actual")
        ),
        peer_unverified=_peer_unverified(fp),
        texts=_texts(outcome, raw),
    )


# ---------------------------------------------------------------- the condition vocabulary
class _Invalid(Exception):
    """A condition's value is malformed; load() adds the hint id and key."""


def _strings(value: Any, allowed: Iterable[str] | None = None) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _Invalid("must be a non-empty list of strings")
    if allowed is not None:
        unknown = [v for v in value if v not in allowed]
        if unknown:
            raise _Invalid(f"unknown value(s) {unknown}; known: {', '.join(allowed)}")
    return tuple(value)


def _quoted_version(value: Any) -> Version:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise _Invalid(f"version {value!r} must be quoted (YAML reads 2.10 as the number 2.1)")
    parsed = version(value)
    if parsed is None:
        raise _Invalid(f"{value!r} is not a version")
    return parsed


def _range(value: Any) -> tuple[Version | None, Version | None]:
    if not isinstance(value, Mapping) or not value or set(value) - {"min", "max"}:
        raise _Invalid("must be a mapping with min and/or max")
    low = _quoted_version(value["min"]) if "min" in value else None
    high = _quoted_version(value["max"]) if "max" in value else None
    if low is not None and high is not None and low > high:
        raise _Invalid(f"min {low} is above max {high}")
    return low, high


def _positive_int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise _Invalid("must be a positive integer")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid("must be a non-empty string")
    return value


def _regex(value: Any) -> re.Pattern[str]:
    try:
        return re.compile(_text(value), re.IGNORECASE)
    except re.error as exc:
        raise _Invalid(f"bad regular expression: {exc}") from None


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("must be true or false")
    return value


def _in_range(have: Version | None, bounds: tuple[Version | None, Version | None]) -> bool:
    low, high = bounds
    return have is not None and (low is None or have >= low) and (high is None or have <= high)


def _one_of(attr: str, allowed: Iterable[str] | None = None) -> tuple[Callable, Callable]:
    return (lambda v: _strings(v, allowed), lambda f, want: getattr(f, attr) in want)


def _version_range(name: str) -> tuple[Callable, Callable]:
    return (_range, lambda f, bounds: _in_range(f.versions.get(name), bounds))


# key -> (parse and validate the data file's value, predicate on (Facts, parsed value))
CONDITIONS: dict[str, tuple[Callable[[Any], Any], Callable[[Facts, Any], bool]]] = {
    "status": _one_of("status", STATUSES),
    "phase": _one_of("phase", _PHASES),
    "error_class": _one_of("error_class", ERROR_CLASSES),
    "launcher": _one_of("launcher"),
    "gpu_name": (_text, lambda f, want: any(want.lower() in n.lower() for n in f.gpu_names)),
    "gpu_count_min": (_positive_int, lambda f, n: f.gpu_count is not None and f.gpu_count >= n),
    "driver_below": (_quoted_version, lambda f, bound: f.driver is not None and f.driver < bound),
    "torch": _version_range("torch"),
    "accelerate": _version_range("accelerate"),
    "nccl_loaded": _version_range("nccl_loaded"),
    "shm_below": (_positive_int, lambda f, n: f.shm_bytes is not None and f.shm_bytes < n),
    "memlock_below": (_positive_int, lambda f, n: f.memlock_soft is not None and f.memlock_soft < n),
    "text": (_regex, lambda f, rx: any(rx.search(t) for t in f.texts)),
    "env_unset": (_strings, lambda f, names: not f.env_set.intersection(names)),
    "launcher_changed": (_strings, lambda f, names: bool(f.launcher_changed.intersection(names))),
    "peer_unverified": (_bool, lambda f, want: f.peer_unverified is want),
    # "any" is handled by _parse_when / _holds: a list of condition sets, one of which must hold.
}


def _parse_when(hint_id: str, when: Any, where: str = "when") -> tuple[tuple[str, Any], ...]:
    if not isinstance(when, Mapping) or not when:
        raise ValueError(f"hint {hint_id!r}: {where!r} must be a non-empty mapping of conditions")
    parsed = []
    for key, value in when.items():
        if key == "any":
            if not isinstance(value, list) or not value:
                raise ValueError(f"hint {hint_id!r}: key {where}.any must be a non-empty list of condition sets")
            parsed.append(("any", tuple(_parse_when(hint_id, alt, f"{where}.any[{i}]") for i, alt in enumerate(value))))
            continue
        if key not in CONDITIONS:
            raise ValueError(f"hint {hint_id!r}: unknown condition key {where}.{key!s}; "
                             f"known: {', '.join([*CONDITIONS, 'any'])}")
        try:
            parsed.append((key, CONDITIONS[key][0](value)))
        except _Invalid as exc:
            raise ValueError(f"hint {hint_id!r}: key {where}.{key}: {exc}") from None
    return tuple(parsed)


def _holds(conditions: tuple[tuple[str, Any], ...], f: Facts) -> bool:
    return all(any(_holds(alt, f) for alt in arg) if key == "any" else CONDITIONS[key][1](f, arg)
               for key, arg in conditions)


@dataclass(frozen=True)
class Rule:
    """One entry of the data file: the hint and the (validated) conditions that select it."""

    hint: Hint
    when: tuple[tuple[str, Any], ...]

    def holds(self, f: Facts) -> bool:
        return _holds(self.when, f)


# ---------------------------------------------------------------- loading
def _rule(index: int, entry: Any, seen: set[str]) -> Rule:
    if not isinstance(entry, Mapping):
        raise ValueError(f"hint #{index + 1}: must be a mapping with keys {', '.join(_HINT_KEYS)}")
    hint_id = entry.get("id")
    if not isinstance(hint_id, str) or not _ID.match(hint_id):
        raise ValueError(f"hint #{index + 1}: key 'id' must be lower-case letters, digits and '-', got {hint_id!r}")
    if hint_id in seen:
        raise ValueError(f"hint {hint_id!r}: key 'id' is used twice")
    seen.add(hint_id)
    unknown = sorted(set(entry) - set(_HINT_KEYS), key=str)
    if unknown:
        raise ValueError(f"hint {hint_id!r}: unknown key {unknown[0]!s}; known: {', '.join(_HINT_KEYS)}")
    for key in ("title", "explanation", "link"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise ValueError(f"hint {hint_id!r}: key {key!r} is missing or empty")
    if not entry["link"].startswith("https://"):
        raise ValueError(f"hint {hint_id!r}: key 'link' must be an https:// URL")
    if "when" not in entry:
        raise ValueError(f"hint {hint_id!r}: key 'when' is missing")
    when = _parse_when(hint_id, entry["when"])
    hint = Hint(hint_id, entry["title"].strip(), " ".join(entry["explanation"].split()), entry["link"].strip())
    return Rule(hint, when)


def load(path: str | Path | None = None) -> list[Rule]:
    """Read and validate a hints file (default: the packaged hints.yaml); ValueError names hint and key."""
    path = Path(path) if path is not None else DATA_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, Mapping) or set(data) != {"hints"} or not isinstance(data["hints"], list):
        raise ValueError(f"{path}: must be a mapping with the single key 'hints' holding a list")
    seen: set[str] = set()
    return [_rule(i, entry, seen) for i, entry in enumerate(data["hints"])]


@lru_cache(maxsize=1)
def _default_rules() -> tuple[Rule, ...]:
    return tuple(load())


def match(record: Any, rules: Iterable[Rule] | None = None) -> list[Hint]:
    """The hints whose conditions all hold for this cell record, in data-file order."""
    f = facts(record)
    return [rule.hint for rule in (_default_rules() if rules is None else rules) if rule.holds(f)]
