"""Classification: the pure function from an attempt's raw record to its outcome. The outcome value,
the closed sets of statuses and error classes, and the raw attempt's typed views live in record.py."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .record import ERROR_CLASSES, RETRYABLE, STATUSES, Outcome, RawAttempt, Stall

__all__ = ["ERROR_CLASSES", "RETRYABLE", "STATUSES", "Outcome", "classify", "launcher_failures", "loaded_nccl"]

# torchrun / accelerate launch (torch elastic) list every failed rank:
#   rank      : 1 (local_rank: 1)
#   exitcode  : -9 (pid: 7250)  (SIGKILL)
# Its "Root Cause (first observed failure)" is only the first it noticed, often a victim.
_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)[^\n]*", re.S)
_SIGNAME = re.compile(r"\((SIG[A-Z0-9]+)\)")
_LAUNCHER_CLASSES = (
    (re.compile(r"ModuleNotFoundError|ImportError|cannot open shared object"), "import"),
    (re.compile(r"No space left on device|/dev/shm"), "shm"),
    (re.compile(r"error: unrecognized arguments|usage: |invalid choice|Address already in use"), "launcher"),
)


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def launcher_failures(launcher_tail: str) -> list[tuple[int, int, str | None]]:
    """(rank, exit code, signal name) of every rank the launcher reported as failed."""
    found = []
    for m in _FAILURE.finditer(launcher_tail or ""):
        sig = _SIGNAME.search(m.group(0))
        found.append((int(m.group(1)), int(m.group(2)), sig.group(1) if sig else None))
    return found


def _fail(raw: RawAttempt, phase: str | None, error_class: str, reason: str, **detail: Any) -> Outcome:
    return Outcome("fail", reason, raw.seconds, phase, error_class, detail)


def _startup_failure(raw: RawAttempt) -> Outcome:
    tail = raw.launcher_tail
    error_class = next((cls for rx, cls in _LAUNCHER_CLASSES if rx.search(tail)), "launcher")
    lines = [l for l in tail.splitlines() if l.strip()]
    key = next((l for l in reversed(lines) if re.search(r"Error|error|FAILED", l)), lines[-1] if lines else "")
    return _fail(raw, "startup", error_class,
                 f"{len(raw.ranks)} of {raw.expected_ranks} ranks started; launcher exit {raw.exit_code}: {key.strip()[:300]}")


def _attempt(raw: RawAttempt | Mapping[str, Any]) -> RawAttempt:
    return raw if isinstance(raw, RawAttempt) else RawAttempt.from_json(raw)


def loaded_nccl(raw: RawAttempt | Mapping[str, Any]) -> str | None:
    """The NCCL version the ranks really loaded (fingerprint), else what NCCL's own log says."""
    return _attempt(raw).loaded_nccl


def classify(raw: RawAttempt | Mapping[str, Any], min_busbw: float | None = None,
             nccl_expected: str | None = None) -> Outcome:
    """The outcome of one attempt, from its raw record alone (a RawAttempt, or its JSON); a pass below
    `min_busbw` GB/s (matrix.yaml's bandwidth.min_busbw) is `slow`; a cell that asked for a pinned NCCL
    (`nccl_expected`) and loaded another did not test what it says: `infra-error`."""
    raw = _attempt(raw)
    seconds = raw.seconds
    if raw.ended_by == "infra":
        return Outcome("infra-error", raw.infra_reason, seconds)
    loaded = raw.loaded_nccl
    if nccl_expected and loaded and loaded != nccl_expected:
        return Outcome("infra-error", f"the cell asked for NCCL {nccl_expected} but the ranks loaded {loaded}; "
                       "the pin did not take (check the image's nvidia-nccl package or LD_PRELOAD)", seconds,
                       detail={"nccl_expected": nccl_expected, "nccl_loaded": loaded})
    if raw.ended_by == "interrupted":
        return Outcome("interrupted", "stopped by Ctrl-C", seconds)
    if raw.ended_by in ("stall", "cap"):
        stall = raw.stall_info or Stall.of({})
        why = {str(r): text for r, text in stall.why_behind.items()}
        what = (f"hard cap of {stall.threshold:.0f}s for the cell reached" if raw.ended_by == "cap"
                else f"no progress for {stall.since_progress:.0f}s in {stall.phase} (threshold {stall.threshold:.0f}s)")
        who = "; ".join(f"rank {r} {why.get(str(r), '')}".strip() for r in stall.ranks_behind) or "all ranks waiting"
        return Outcome("hang", f"{what}; {who}", seconds, stall.phase, None,
                       {"ranks_behind": list(stall.ranks_behind), "why_behind": why})
    # The launcher exited.
    ranks = raw.rank_states
    errors = sorted(((r, s.error) for r, s in ranks.items() if s.error), key=lambda e: e[1].wall or 0)
    silent = [r for r, s in ranks.items() if not s.result and not s.error]
    # A rank that died by a signal without a word is the cause, and its peers' errors (connection
    # reset, NCCL remote error) the consequence; SIGTERM is the launcher stopping the survivors.
    killed = [(r, c, s) for r, c, s in launcher_failures(raw.launcher_tail) if c < 0 and r in silent and s != "SIGTERM"]
    if killed:
        rank, code, sig = killed[0]
        phase = ranks[rank].phase
        return _fail(raw, phase, "killed", f"rank {rank} died in {phase} ({sig or f'signal {-code}'}) without an error",
                     rank=rank, signal=sig, others=[_first_line(e.message) for _, e in errors])
    if errors:
        rank, first = errors[0]
        return _fail(raw, first.phase, first.error_class or "other",
                     f"rank {rank}: {first.type}: {_first_line(first.message)}",
                     rank=rank, ranks_with_errors=sorted({r for r, _ in errors}))
    if silent:
        rank = silent[0]
        phase = ranks[rank].phase
        return _fail(raw, phase, "killed", f"rank {rank} died in {phase} without an error (launcher exit {raw.exit_code})",
                     rank=rank)
    if len(raw.ranks) < raw.expected_ranks:
        return _startup_failure(raw)
    finished = list(ranks.values())
    wrong = max((s.wrong_total for s in finished), default=0)
    if wrong:
        return Outcome("wrong", f"all-reduce returned {wrong} wrong element(s)", seconds, "check", None, {"wrong": wrong})
    if raw.exit_code not in (0, None):
        return _fail(raw, "teardown", "launcher", f"every rank finished but the launcher exited with {raw.exit_code}")
    busbw = max((s.largest_busbw_gbs for s in finished), default=0)
    if len(finished) == 1:
        return Outcome("pass", "one rank: every phase passed (bus bandwidth needs two or more ranks)", seconds)
    if min_busbw is not None and busbw < min_busbw:
        return Outcome("slow", f"busbw {busbw:.2f} GB/s at the largest size, below the {min_busbw:g} GB/s floor",
                       seconds, "bandwidth", None, {"busbw_gbs": busbw, "min_busbw": min_busbw})
    return Outcome("pass", f"busbw {busbw:.2f} GB/s at the largest size", seconds, None, None, {"busbw_gbs": busbw})
