"""Outcomes are values: a status, a reason, a duration; they serialise to JSON and say nothing of how
they were produced. `classify` is the pure function from an attempt's raw record to its outcome."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("pass", "wrong", "hang", "fail", "slow", "build-error", "infra-error", "n/a", "interrupted")
ERROR_CLASSES = ("nccl", "cuda", "oom", "shm", "import", "launcher", "timeout", "killed", "other")
RETRYABLE = ("hang", "infra-error")

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


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str = ""
    seconds: float = 0.0
    phase: str | None = None
    error_class: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


def _fail(raw: dict, phase: str | None, error_class: str, reason: str, **detail: Any) -> Outcome:
    return Outcome("fail", reason, raw.get("seconds", 0.0), phase, error_class, detail)


def _startup_failure(raw: dict) -> Outcome:
    tail = raw.get("launcher_tail", "")
    error_class = next((cls for rx, cls in _LAUNCHER_CLASSES if rx.search(tail)), "launcher")
    lines = [l for l in tail.splitlines() if l.strip()]
    key = next((l for l in reversed(lines) if re.search(r"Error|error|FAILED", l)), lines[-1] if lines else "")
    started = len(raw.get("ranks", {}))
    return _fail(raw, "startup", error_class,
                 f"{started} of {raw.get('expected_ranks')} ranks started; launcher exit {raw.get('exit_code')}: {key.strip()[:300]}")


def loaded_nccl(raw: dict) -> str | None:
    """The NCCL version the ranks really loaded (fingerprint), else what NCCL's own log says."""
    fingerprint = ((raw.get("phases") or {}).get("fingerprint") or {}).get("fingerprint") or {}
    version = (fingerprint.get("nccl_loaded") or {}).get("version")
    if version:
        return version
    return next((s.get("version") for s in (raw.get("nccl") or {}).values() if s and s.get("version")), None)


def classify(raw: dict, min_busbw: float | None = None, nccl_expected: str | None = None) -> Outcome:
    """The outcome of one attempt, from its raw record alone (see supervise.Attempt); a pass below
    `min_busbw` GB/s (matrix.yaml's bandwidth.min_busbw) is `slow`; a cell that asked for a pinned NCCL
    (`nccl_expected`) and loaded another did not test what it says: `infra-error`."""
    seconds = raw.get("seconds", 0.0)
    ended_by = raw.get("ended_by")
    ranks: dict[str, dict] = raw.get("ranks", {})
    if ended_by == "infra":
        return Outcome("infra-error", raw.get("infra_reason", ""), seconds)
    loaded = loaded_nccl(raw)
    if nccl_expected and loaded and loaded != nccl_expected:
        return Outcome("infra-error", f"the cell asked for NCCL {nccl_expected} but the ranks loaded {loaded}; "
                       "the pin did not take (check the image's nvidia-nccl package or LD_PRELOAD)", seconds,
                       detail={"nccl_expected": nccl_expected, "nccl_loaded": loaded})
    if ended_by == "interrupted":
        return Outcome("interrupted", "stopped by Ctrl-C", seconds)
    if ended_by in ("stall", "cap"):
        stall = raw.get("stall") or {}
        behind = stall.get("ranks_behind", [])
        why = stall.get("why_behind", {})
        what = (f"hard cap of {stall.get('threshold', 0):.0f}s for the cell reached" if ended_by == "cap"
                else f"no progress for {stall.get('since_progress', 0):.0f}s in {stall.get('phase')} "
                     f"(threshold {stall.get('threshold', 0):.0f}s)")
        who = "; ".join(f"rank {r} {why.get(str(r), '')}".strip() for r in behind) or "all ranks waiting"
        return Outcome("hang", f"{what}; {who}", seconds, stall.get("phase"), None,
                       {"ranks_behind": behind, "why_behind": why})
    # The launcher exited.
    errors = sorted((s["error"] | {"rank": int(r)} for r, s in ranks.items() if s.get("error")),
                    key=lambda e: e.get("wall") or 0)
    silent = [int(r) for r, s in ranks.items() if not s.get("result") and not s.get("error")]
    # A rank that died by a signal without a word is the cause, and its peers' errors (connection
    # reset, NCCL remote error) the consequence; SIGTERM is the launcher stopping the survivors.
    killed = [(r, c, s) for r, c, s in launcher_failures(raw.get("launcher_tail", ""))
              if c < 0 and r in silent and s != "SIGTERM"]
    if killed:
        rank, code, sig = killed[0]
        phase = ranks[str(rank)].get("phase")
        return _fail(raw, phase, "killed", f"rank {rank} died in {phase} ({sig or f'signal {-code}'}) without an error",
                     rank=rank, signal=sig, others=[_first_line(e.get("message")) for e in errors])
    if errors:
        first = errors[0]
        return _fail(raw, first.get("phase"), first.get("error_class") or "other",
                     f"rank {first['rank']}: {first.get('type')}: {_first_line(first.get('message'))}",
                     rank=first["rank"], ranks_with_errors=sorted({e["rank"] for e in errors}))
    if silent:
        rank = silent[0]
        phase = ranks[str(rank)].get("phase")
        return _fail(raw, phase, "killed", f"rank {rank} died in {phase} without an error (launcher exit {raw.get('exit_code')})",
                     rank=rank)
    if len(ranks) < raw.get("expected_ranks", 0):
        return _startup_failure(raw)
    results = [s["result"] for s in ranks.values()]
    wrong = max((r.get("wrong_total") or 0 for r in results), default=0)
    if wrong:
        return Outcome("wrong", f"all-reduce returned {wrong} wrong element(s)", seconds, "check", None, {"wrong": wrong})
    if raw.get("exit_code") not in (0, None):
        return _fail(raw, "teardown", "launcher", f"every rank finished but the launcher exited with {raw.get('exit_code')}")
    busbw = max((r.get("largest_busbw_gbs") or 0 for r in results), default=0)
    if len(results) == 1:
        return Outcome("pass", "one rank: every phase passed (bus bandwidth needs two or more ranks)", seconds)
    if min_busbw is not None and busbw < min_busbw:
        return Outcome("slow", f"busbw {busbw:.2f} GB/s at the largest size, below the {min_busbw:g} GB/s floor",
                       seconds, "bandwidth", None, {"busbw_gbs": busbw, "min_busbw": min_busbw})
    return Outcome("pass", f"busbw {busbw:.2f} GB/s at the largest size", seconds, None, None, {"busbw_gbs": busbw})
