"""Known-issue hints: which documented traps a cell record looks like, with the fix and a link.

Why data files: the signatures (harness/hints.d/*.yaml) change as drivers, NCCL, torch and Accelerate change;
the matcher here stays small. Why declarative conditions instead of code per hint: a hint must be
readable and reviewable next to the evidence it cites (the public failure logs it is built from), and
a typo in the data file must fail loudly before a command does any work (`check()`; the schema is
harness/hintsfile.py). The data is the packaged folder harness/hints.d, or a site's own file or folder
named by the environment variable HARNESS_HINTS.

Conditions are three-valued. Each one is true, false, or unknown when the fact it reads is missing
(a record made from a log alone has no fingerprint: no GPU model, driver, /dev/shm size...). A hint
is *certain* when every condition is true; it is *possible* when none is false, some are unknown and
at least one evidence condition (the text of the logs, what the launcher changed, a peer copy that
failed) is really satisfied: the log shows the signature, the measured facts that would confirm it
are missing. Otherwise it does not match.

`match(record)` is pure and total: any field of a record may be missing or of the wrong type (old
records, build-error and n/a cells without attempts) and the answer is then just fewer hints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from harness.errors import HintsError
from harness.hintsfile import ENV_VAR, PACKAGED, Conditions, Hint, HintSpec, VersionRange, hints_path, read, version
from harness.record import ERROR_CLASSES, PHASES, STATUSES, CellRecord, Fingerprint, Outcome, P2pCheck, RawAttempt
from harness.textmatch import searched

__all__ = ["CONDITIONS", "ENV_VAR", "PACKAGED", "ERROR_CLASSES", "EVIDENCE", "PHASES", "STATUSES", "UNMEASURED",
           "Conditions", "Facts", "Hint", "HintsError", "Match", "Rule", "check", "facts", "hints_path", "load", "match",
           "version"]


# ---------------------------------------------------------------- facts from one record
@dataclass(frozen=True)
class Facts:
    """The few facts of a cell record that conditions look at, normalised. None (or an empty tuple for
    gpu_names) means the fact is not known, which makes the conditions on it unknown, not false."""

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
    env_known: bool = False  # the ranks' environment was seen (fingerprint, NCCL log), not only the variant's
    launcher_changed: frozenset[str] | None = None  # None without a fingerprint
    peer_unverified: bool | None = None  # None when no GPU pair was checked
    ranks_behind: tuple[int, ...] | None = None  # the ranks behind when the hang was declared; None: not known
    # measured in the fingerprint (issue 23: a hint decided by its fact, not by the words around it)
    shm_writable: bool | None = None  # the rank could create a file in /dev/shm
    compat_loaded: bool | None = None  # a CUDA forward-compatibility libcuda was mapped
    compute_modes: tuple[str, ...] = ()  # NVML's, per GPU of the machine
    min_capability: Version | None = None  # the lowest compute capability of the GPUs the rank saw
    nvml_mismatch: bool | None = None  # nvmlInit: driver library and kernel module of different versions
    nccl_cuda: int | None = None  # the CUDA major NCCL was built for ("NCCL version x.y.z+cuda12.4")
    driver_cuda: int | None = None  # the highest CUDA major the driver runs
    driver_seen: bool | None = None  # a driver answered (its version); False: the rank saw no GPU and no driver
    gpu_memory_elsewhere: bool | None = None  # CUDA's OOM message: most of the GPU was held by other processes
    texts: tuple[str, ...] = ()  # each at most textmatch.MAX_TEXT characters: a longer text is its head and its tail


# The stable parts of NCCL's and nvidia-smi's own lines: a log shows the versions it ran with.
_NCCL_VERSION = re.compile(r"\bNCCL\s+version\s+(\d+\.\d+\.\d+)")
_DRIVER_VERSION = re.compile(r"\bDriver Version:\s*(\d+\.\d+(?:\.\d+)?)")
_NCCL_BUILT_CUDA = re.compile(r"\bNCCL\s+version\s+\d+\.\d+\.\d+\S*?\+cuda(\d+)\.\d+")
# NCCL's INFO "cudaDriverVersion 12020" (init.cc), nvidia-smi's "CUDA Version: 12.2"
_DRIVER_CUDA = (re.compile(r"\bcudaDriverVersion (\d{4,6})\b"), re.compile(r"\bCUDA Version:\s*(\d+)\.\d+"))
# The first driver of each CUDA major (CUDA toolkit release notes, "CUDA Toolkit and Corresponding Driver
# Versions"): a driver below 450.80.02 runs no CUDA 11, below 525.60.13 no CUDA 12, below 580.65.06 no 13.
_CUDA_MAJOR_DRIVERS = ((13, Version("580.65.06")), (12, Version("525.60.13")), (11, Version("450.80.02")),
                       (10, Version("410.48")), (9, Version("384.81")), (8, Version("367.48")))


def _driver_cuda(fp: Fingerprint, texts: Iterable[str]) -> int | None:
    """The highest CUDA major the driver says it runs: libcuda's own answer, else NCCL's or nvidia-smi's
    line; None when neither was seen."""
    api = fp.driver_info.cuda_driver_api if fp.driver_info else None
    if api and api.split(".")[0].isdigit():
        return int(api.split(".")[0])
    for t in texts:
        if m := _DRIVER_CUDA[0].search(t):
            return int(m.group(1)) // 1000
        if m := _DRIVER_CUDA[1].search(t):
            return int(m.group(1))
    return None


def _cuda_of_driver(driver: Version | None) -> int | None:
    """The highest CUDA major a driver of this version runs (_CUDA_MAJOR_DRIVERS)."""
    return None if driver is None else next((major for major, first in _CUDA_MAJOR_DRIVERS if driver >= first), 7)


def _nccl_cuda(texts: Iterable[str]) -> int | None:
    built = _in_text(_NCCL_BUILT_CUDA, texts)
    return built.major if built else None


def _in_text(pattern: re.Pattern[str], texts: Iterable[str]) -> Version | None:
    return next((version(m.group(1)) for t in texts for m in [pattern.search(t)] if m), None)


# torch's desync report (TORCH_NCCL_DESYNC_DEBUG=1; TraceUtils.h analyzeMissingRanks) names ranks that
# never joined: "To our best knowledge, ranks [1, 3] are the lagging ranks that caused this timeout."
_LAGGING = re.compile(r"ranks \[(\d+(?:, ?\d+)*)\] are the lagging ranks that caused this timeout")
# ProcessGroupNCCL's broadcastUniqueNCCLID: a rank waiting for the NCCL id that rank N has not yet put in
# the store ("[1] is setting up NCCL communicator and retr(ei|ie)ving ncclUniqueId from [0] via c10d
# key-value store by key '0', but store->get('0') got error: Timeout waiting for key"): rank N is behind.
_NO_UNIQUE_ID = re.compile(r"ncclUniqueId from \[(\d+)\] via c10d key-value store by key \S{1,80} but "
                           r"store->get\(\S{1,80} got error: (Socket )?Timeout")


def _ranks_behind(outcome: Outcome | None, texts: Iterable[str]) -> tuple[int, ...] | None:
    """The ranks behind when the hang was declared: the outcome's own (the supervisor's stall, or the
    ranks that did not report torch's watchdog timeout; empty when every rank waited inside the same
    collective), else the lagging ranks torch's desync report names; None when nothing says."""
    found = outcome.detail.get("ranks_behind") if outcome and outcome.status == "hang" else None
    if isinstance(found, list) and all(isinstance(r, int) and not isinstance(r, bool) for r in found):
        return tuple(found)
    lagging = next((m.group(1) for t in texts for m in [_LAGGING.search(t) or _NO_UNIQUE_ID.search(t)] if m), None)
    return tuple(int(r) for r in lagging.split(",")) if lagging else None


# The CUDA caching allocator's OOM message states what this process held against the GPU's size:
# torch < 2.1 "(GPU 0; 47.54 GiB total capacity; 194.45 MiB already allocated; 4.88 MiB free; 686.00 MiB
# reserved in total by PyTorch)", before torch 1.4 "...; 7.75 MiB free; 542.02 MiB cached)" (cached beside
# what is allocated, not counting it), later "GPU 0 has a total capacity of 23.65 GiB of which 3.06 MiB is free.
# ... this process has 1.20 GiB memory in use", or only "Of the allocated memory 29.76 GiB is allocated by
# PyTorch, and 1.64 GiB is reserved by PyTorch but unallocated". What is neither free nor this process's
# is another's.
_SIZE = r"(\d+(?:\.\d+)?) ([KMGT]i?B)"
_OOM_OLD = re.compile(rf"{_SIZE} total capacity; {_SIZE} already allocated; {_SIZE} free; {_SIZE} (reserved in total|cached)")
_OOM_NEW = re.compile(rf"total capacity of {_SIZE} of which {_SIZE} is free\.")
_OOM_MINE = (re.compile(rf"this process has {_SIZE} memory in use"),
             re.compile(rf"Of the allocated memory {_SIZE} is allocated by PyTorch, and {_SIZE} is reserved"))
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _bytes(number: str, unit: str) -> float:
    return float(number) * _UNITS[unit[0]]


def _gpu_memory_elsewhere(texts: Iterable[str]) -> bool | None:
    """Whether more than half of the GPU was held by other processes when CUDA ran out of memory, from
    the allocator's own figures; None when no OOM message gives them."""
    for t in texts:
        if m := _OOM_OLD.search(t):
            total, free, mine = _bytes(*m.group(1, 2)), _bytes(*m.group(5, 6)), _bytes(*m.group(7, 8))
            if m.group(9) == "cached":
                mine += _bytes(*m.group(3, 4))
        elif (m := _OOM_NEW.search(t)) and (own := _OOM_MINE[0].search(t) or _OOM_MINE[1].search(t)):
            total, free = _bytes(*m.group(1, 2)), _bytes(*m.group(3, 4))
            mine = sum(_bytes(*own.group(i, i + 1)) for i in range(1, own.re.groups, 2))
        else:
            continue
        return total - free - mine > total / 2
    return None


def _driver_seen(fp: Fingerprint, driver: Version | None, driver_cuda: int | None) -> bool | None:
    """A driver answered: its version or its CUDA is known (the fingerprint, nvidia-smi's or NCCL's line). False when
    the fingerprint was taken and the rank saw neither a GPU nor a driver; None for a log that says neither."""
    if driver is not None or driver_cuda is not None:
        return True
    return False if fp and fp.device_count == 0 and not fp.gpus else None  # torch counted none


def _texts(outcome: Outcome | None, raw: RawAttempt) -> tuple[str, ...]:
    """Where error text lives: outcome reason, rank errors, launcher output, NCCL warnings, NCCL log
    tails and the thread dumps of a hang; each as written, as normalised and on one line (a log as
    someone pasted it: JSON records, rank prefixes, timestamps, wrapped lines; textmatch.searched), each
    cut to the head and tail that a pattern is searched in (the ranks wrote them, of any size)."""
    found: list[Any] = [outcome.reason if outcome else None, raw.launcher_tail, raw.infra_reason]
    for state in raw.rank_states.values():
        found += [state.error.type, state.error.message] if state.error else []
    for log in raw.nccl.values():
        found += [*log.warnings, *log.errors]
    found += [*raw.nccl_tails, *raw.thread_dumps]
    return tuple(dict.fromkeys(part for t in found if isinstance(t, str) and t for part in searched(t)))


def _env_set(record: CellRecord, raw: RawAttempt, fp: Fingerprint) -> frozenset[str]:
    """Variables set anywhere we can see: the variant, the rank, NCCL's own log, the launcher's change."""
    names = set()
    for env in [record.env, fp.env] + [log.env for log in raw.nccl.values()]:
        names |= {k for k, v in env.items() if isinstance(k, str) and v not in (None, "")}
    names |= {name for name, change in fp.env_changed.items() if change.actual not in (None, "")}
    return frozenset(names)


def _peer_unverified(fp: Fingerprint, ipc: P2pCheck) -> bool | None:
    """A pair whose P2P was claimed and failed a real copy, or failed the IPC kernel read (wrong data, no
    answer); None when no pair was checked either way."""
    if not fp.peer_access and not ipc.pairs:
        return None
    return any(p.claimed is True and p.verified not in (None, True) for p in fp.peer_access) \
        or any(r.broken for r in ipc.pairs)


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
    texts = _texts(outcome, raw)
    # loaded NCCL: as read inside the rank, else as NCCL logged it, else what the cell asked for, else
    # the "NCCL version x.y.z" that NCCL and torch print in their messages
    candidates = [fp.nccl_loaded] + [log.version for log in raw.nccl.values()] + [cell.nccl]
    nccl = next((v for v in map(version, candidates) if v is not None), None) or _in_text(_NCCL_VERSION, texts)
    driver = version(fp.driver) or _in_text(_DRIVER_VERSION, texts)
    driver_cuda = _driver_cuda(fp, texts)  # as the driver said it, not read from the table
    return Facts(
        status=outcome.status if outcome else None,
        phase=(outcome.phase or None) if outcome else None,
        error_class=(outcome.error_class or None) if outcome else None,
        launcher=cell.launcher or fp.launcher,
        gpu_names=fp.gpu_names,
        gpu_count=fp.gpu_count,
        driver=driver,
        versions={
            "torch": version(fp.torch) or version(cell.torch),
            "accelerate": version(fp.accelerate) or version(cell.accelerate),
            "nccl_loaded": nccl,
        },
        shm_bytes=fp.shm_bytes,
        memlock_soft=fp.memlock_soft,
        env_set=_env_set(record, raw, fp),
        env_known=bool(fp) or any(log.env for log in raw.nccl.values()),
        launcher_changed=frozenset(k for k, change in fp.env_changed.items() if change.expected != change.actual)
        if fp else None,
        peer_unverified=_peer_unverified(fp, raw.p2p_check),
        ranks_behind=_ranks_behind(outcome, texts),
        shm_writable=fp.shm_writable,
        compat_loaded=fp.compat_loaded,
        compute_modes=fp.compute_modes,
        min_capability=version(fp.min_capability),
        nvml_mismatch=fp.nvml_mismatch,
        nccl_cuda=_nccl_cuda(texts),
        driver_cuda=driver_cuda if driver_cuda is not None else _cuda_of_driver(driver),
        driver_seen=_driver_seen(fp, driver, driver_cuda),
        gpu_memory_elsewhere=_gpu_memory_elsewhere(texts),
        texts=texts,
    )


# ---------------------------------------------------------------- the condition vocabulary
def _known(have: Any, test: Callable[[Any], bool]) -> bool | None:
    return None if have is None else test(have)


def _in_range(have: Version | None, bounds: VersionRange) -> bool | None:
    low, high = bounds.min, bounds.max
    return _known(have, lambda v: (low is None or v >= low) and (high is None or v <= high))


def _one_of(attr: str) -> Callable[[Facts, tuple[str, ...]], bool | None]:
    return lambda f, want: _known(getattr(f, attr), lambda have: have in want)


def _version_range(name: str) -> Callable[[Facts, VersionRange], bool | None]:
    return lambda f, bounds: _in_range(f.versions.get(name), bounds)


def _env_unset(f: Facts, names: tuple[str, ...]) -> bool | None:
    if f.env_set.intersection(names):
        return False
    return True if f.env_known else None  # the variant did not set it; the launcher may have


def _env_set_condition(f: Facts, names: tuple[str, ...]) -> bool | None:
    unset = _env_unset(f, names)  # the same places, the same unknown
    return None if unset is None else not unset


# key -> predicate on (Facts, the validated value of that key in the data file; see hintsfile.Conditions)
CONDITIONS: dict[str, Callable[[Facts, Any], bool | None]] = {
    "status": _one_of("status"),
    "phase": _one_of("phase"),
    "error_class": _one_of("error_class"),
    "launcher": _one_of("launcher"),
    "gpu_name": lambda f, want: _known(f.gpu_names or None,
                                       lambda names: any(want.lower() in n.lower() for n in names)),
    "gpu_count_min": lambda f, n: _known(f.gpu_count, lambda have: have >= n),
    "driver_below": lambda f, bound: _known(f.driver, lambda have: have < bound),
    "torch": _version_range("torch"),
    "accelerate": _version_range("accelerate"),
    "nccl_loaded": _version_range("nccl_loaded"),
    "shm_below": lambda f, n: _known(f.shm_bytes, lambda have: have < n),
    "memlock_below": lambda f, n: _known(f.memlock_soft, lambda have: have < n),
    "text": lambda f, rx: any(rx.search(t) for t in f.texts),
    "text_absent": lambda f, rx: not any(rx.search(t) for t in f.texts),
    "env_unset": _env_unset,
    "env_set": _env_set_condition,
    "launcher_changed": lambda f, names: _known(f.launcher_changed, lambda have: bool(have.intersection(names))),
    "peer_unverified": lambda f, want: _known(f.peer_unverified, lambda have: have is want),
    "ranks_behind": lambda f, want: _known(f.ranks_behind, lambda have: bool(have) is want),
    "shm_writable": lambda f, want: _known(f.shm_writable, lambda have: have is want),
    "compat_loaded": lambda f, want: _known(f.compat_loaded, lambda have: have is want),
    "compute_mode": lambda f, want: _known(f.compute_modes or None, lambda modes: any(m in want for m in modes)),
    "capability_below": lambda f, bound: _known(f.min_capability, lambda have: have < bound),
    "nvml_mismatch": lambda f, want: _known(f.nvml_mismatch, lambda have: have is want),
    "nccl_cuda_above_driver": lambda f, want: None if f.nccl_cuda is None or f.driver_cuda is None
    else (f.nccl_cuda > f.driver_cuda) is want,
    "driver_seen": lambda f, want: _known(f.driver_seen, lambda have: have is want),
    "gpu_memory_elsewhere": lambda f, want: _known(f.gpu_memory_elsewhere, lambda have: have is want),
    # "any" is handled by _evaluate: a list of condition sets, one of which must hold.
}

# Conditions that are evidence of the signature itself; the others are facts that confirm or rule out
# (a hint with only unknown facts and no evidence satisfied is not shown at all).
EVIDENCE = frozenset({"text", "launcher_changed", "peer_unverified"})

# How a condition whose fact was missing is named in the report ("... was not measured").
UNMEASURED = {"status": "the outcome", "phase": "the phase", "error_class": "the error class",
              "launcher": "the launcher", "gpu_name": "the GPU model", "gpu_count_min": "the GPU count",
              "driver_below": "the driver version", "torch": "the torch version",
              "accelerate": "the Accelerate version", "nccl_loaded": "the NCCL version",
              "shm_below": "the /dev/shm size", "memlock_below": "the memlock limit",
              "env_unset": "the ranks' environment", "env_set": "the ranks' environment",
              "launcher_changed": "what the launcher changed",
              "peer_unverified": "GPU peer access",
              "ranks_behind": "which ranks were behind", "shm_writable": "whether /dev/shm is writable",
              "compat_loaded": "whether a CUDA compat libcuda was loaded", "compute_mode": "the GPUs' compute mode",
              "capability_below": "the GPUs' compute capability", "nvml_mismatch": "NVML's own answer",
              "nccl_cuda_above_driver": "the CUDA NCCL was built for against the driver's",
              "driver_seen": "the driver version", "gpu_memory_elsewhere": "the GPU's memory use"}


@dataclass(frozen=True)
class _Verdict:
    value: bool | None  # True, False, or None (unknown)
    evidence: bool = False  # an evidence condition is true in a part that is not false
    unknown: tuple[str, ...] = ()  # the keys whose facts were missing, in a part that is not false


def _evaluate(conditions: tuple[tuple[str, Any], ...], f: Facts) -> _Verdict:
    """All of `conditions` (three-valued AND); an `any` is a three-valued OR of its alternatives."""
    parts: list[_Verdict] = []
    for key, arg in conditions:
        if key == "any":
            alts = [_evaluate(alt, f) for alt in arg]
            alive = [a for a in alts if a.value is not False]
            if any(a.value is True for a in alts):  # one true alternative settles it
                parts.append(_Verdict(True, any(a.evidence for a in alive)))
            else:
                parts.append(_Verdict(None if alive else False, any(a.evidence for a in alive),
                                      tuple(k for a in alive for k in a.unknown)))
        else:
            value = CONDITIONS[key](f, arg)
            parts.append(_Verdict(value, value is True and key in EVIDENCE, (key,) if value is None else ()))
    if any(p.value is False for p in parts):
        return _Verdict(False)
    value = True if all(p.value is True for p in parts) else None
    return _Verdict(value, any(p.evidence for p in parts), tuple(dict.fromkeys(k for p in parts for k in p.unknown)))


@dataclass(frozen=True)
class Rule:
    """One entry of the data file: the hint and the (validated) conditions that select it."""

    hint: Hint
    when: tuple[tuple[str, Any], ...]
    generic: bool = False  # shown only when no specific hint matched

    @classmethod
    def of(cls, spec: HintSpec) -> Rule:
        return cls(spec.hint(), spec.when.pairs(), spec.generic)

    def verdict(self, f: Facts) -> _Verdict:
        return _evaluate(self.when, f)

    def holds(self, f: Facts) -> bool:
        """Certain: every condition true."""
        return self.verdict(f).value is True


@dataclass(frozen=True)
class Match:
    """A hint that matches a record: for certain, or possibly (the log shows the signature; the facts
    named in `unknown` that would confirm it were not measured)."""

    hint: Hint
    certain: bool
    unknown: tuple[str, ...] = ()  # condition keys whose facts were missing (empty when certain)
    generic: bool = False  # a hint about a wrapper, shown only where no specific one matched

    @property
    def caveat(self) -> str:
        """For a possible match: 'the log matches; the GPU model and the driver version were not measured'."""
        if self.certain:
            return ""
        words = list(dict.fromkeys(UNMEASURED.get(k, k) for k in self.unknown))
        named = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
        return f"the log matches; {named} {'was' if len(words) == 1 else 'were'} not measured"

    def to_json(self) -> dict[str, Any]:
        return self.hint.to_json() | {"certain": self.certain, "unknown": list(self.unknown)}


# ---------------------------------------------------------------- loading and matching
def load(path: str | Path | None = None) -> list[Rule]:
    """Read and validate a hints file or folder (default: hints_path()); HintsError names file:line, key and fix."""
    return [Rule.of(spec) for spec in read(path)]


@lru_cache(maxsize=4)
def _rules(path: Path) -> tuple[Rule, ...]:
    return tuple(load(path))


def _default_rules() -> tuple[Rule, ...]:
    return _rules(hints_path())


def check(path: str | Path | None = None) -> None:
    """Validate the hints in use (or `path`) before a command does any work: a bad file is a
    HintsError (exit 2) naming file:line, key and fix, never a traceback after a whole run."""
    _rules(Path(path) if path is not None else hints_path())


def match(record: Any, rules: Iterable[Rule] | None = None) -> list[Match]:
    """The hints that match this cell record, certain or possible, in data-file order."""
    f = facts(record)
    found: list[tuple[Rule, Match]] = []
    for rule in _default_rules() if rules is None else rules:
        verdict = rule.verdict(f)
        if verdict.value is True:
            found.append((rule, Match(rule.hint, True, generic=rule.generic)))
        elif verdict.value is None and verdict.evidence:
            found.append((rule, Match(rule.hint, False, verdict.unknown, rule.generic)))
    specific = any(not rule.generic for rule, _ in found)
    return [m for rule, m in found if not (rule.generic and specific)]
