"""Classification: the pure function from an attempt's raw record to its outcome. The outcome value,
the closed sets of statuses and error classes, and the raw attempt's typed views live in record.py."""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from typing import Any

from . import flight, nativestack
from .evidence import RankError
from .kinds import CONTROL_ERROR_CLASSES, phase_index
from .payloads import size_label
from .record import ERROR_CLASSES, RETRYABLE, STARTUP, STATUSES, Outcome, RawAttempt, Stall
from .workload.classify import MISSING_COMMAND, classify_text

__all__ = ["ERROR_CLASSES", "RETRYABLE", "STATUSES", "Outcome", "classify", "launcher_failures", "loaded_nccl"]

# torchrun / accelerate launch (torch elastic) list every failed rank:
#   rank      : 1 (local_rank: 1)
#   exitcode  : -9 (pid: 7250)  (SIGKILL)
# Its "Root Cause (first observed failure)" is only the first it noticed, often a victim; the name of
# the signal is not always printed (seen on 2x H200: "exitcode : -15" alone for the launcher's SIGTERM).
_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)[^\n]*", re.S)
_SIGNAME = re.compile(r"\((SIG[A-Z0-9]+)\)")
# A rank whose own error only says that it lost its peer is a victim of whatever happened to the peer.
_LOST_PEER = re.compile(
    r"remote process exited|Connection reset by peer|Connection closed by (remote )?peer|Broken pipe|"
    r"ncclRemoteError|remote error|peer (has )?closed|closed by peer|recvBytes failed|Failed to recv|"
    r"NCCL communicator was aborted|communicator (was|has been) aborted|has been aborted|"
    r"process group (has been |was )?(shut down|aborted|destroyed)", re.I)
# torch's NCCL watchdog, on a collective that did not finish within the process-group timeout:
#   [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLGATHER,
#   NumelIn=..., NumelOut=..., Timeout(ms)=90000) ran for 90041 milliseconds before timing out.
_WATCHDOG = re.compile(r"(?:\[Rank (\d+)\]\s*)?Watchdog caught collective operation timeout:\s*"
                       r"WorkNCCL\(SeqNum=(\d+),\s*OpType=(\w+)(?:[^)]*?Timeout\(ms\)=(\d+))?")
# gloo's own timeout on a collective (CPU cells): "Timed out waiting 90000ms for recv operation to complete"
_GLOO_TIMEOUT = re.compile(r"Timed out waiting (\d+)ms for (send|recv) operation to complete")
# NCCL's own account of an error, after its generic wrapper ("NCCL error in: ..., invalid usage ..."):
_LAST_ERROR = re.compile(r"Last error:\s*\n?\s*(\S[^\n]*)")
_CUDA_LINE = re.compile(r"(CUDA error: [^\n]+|Cuda failure [^\n]+|CUDA driver [^\n]+)")


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _signame(code: int, printed: str | None) -> str | None:
    if printed:
        return printed
    try:
        return signal.Signals(-code).name if code < 0 else None
    except ValueError:
        return None


def launcher_failures(launcher_tail: str) -> list[tuple[int, int, str | None]]:
    """(rank, exit code, signal name) of every rank the launcher reported as failed."""
    found = []
    for m in _FAILURE.finditer(launcher_tail or ""):
        sig = _SIGNAME.search(m.group(0))
        code = int(m.group(2))
        found.append((int(m.group(1)), code, _signame(code, sig.group(1) if sig else None)))
    return found


def key_line(message: str | None, nccl_warnings: tuple[str, ...] = ()) -> str:
    """The most specific line there is: NCCL's "Last error:" line, else the rank's first NCCL WARN
    line, else a CUDA error line, else the message's first line (the generic wrapper)."""
    text = message or ""
    last = _LAST_ERROR.search(text)
    if last:
        return last.group(1).strip()[:300]
    if nccl_warnings:
        return nccl_warnings[0].strip()[:300]
    m = _CUDA_LINE.search(text)
    return m.group(1).strip()[:300] if m else _first_line(text)


def _error_class(error: RankError, warnings: tuple[str, ...]) -> str:
    """The class of a rank's error by the one classifier (the workload's), over its message and its
    NCCL warnings; the class the rank recorded when the text says nothing more specific."""
    if error.error_class in CONTROL_ERROR_CLASSES:  # the control could not load libnccl/libcudart: its own word
        return error.error_class
    text = "\n".join([error.message or "", *warnings])
    found = classify_text(error.type or "", text)
    return found if found != "other" else (error.error_class or "other")


def _fail(raw: RawAttempt, phase: str | None, error_class: str, reason: str, **detail: Any) -> Outcome:
    return Outcome(status="fail", reason=reason, seconds=raw.seconds, phase=phase, error_class=error_class, detail=detail)


_SRUN_NODE = re.compile(r"srun: error: (?P<node>[^:\s]+): task \d+: Exited with exit code")
_WHERE = {"docker": "in the cell's image", "slurm": "on the node", "host": "on this host"}
_HAVE_IT = {
    "docker": "use an image that has it (`docker run --rm IMAGE sh -c 'command -v {cmd}'` shows it)",
    "slurm": "make `{cmd}` exist on every node at that path (a Python with torch and accelerate in a shared "
             "/home or software tree), or run the harness from such a Python; `invoke doctor --engine slurm` checks "
             "the nodes",
    "host": "install `{cmd}` on this host, or run the harness from the Python that has torch and accelerate",
}


def missing_command(text: str, engine: str | None) -> tuple[str, str, str] | None:
    """The command that does not exist, where (the node srun names, the image, this host) and the fix, from
    the launcher's output; None when it says no such thing."""
    found = next((m for pattern in MISSING_COMMAND if (m := pattern.search(text))), None)
    if found is None:
        return None
    cmd = found.group("cmd").strip()
    node = _SRUN_NODE.search(text)
    where = f"on node {node.group('node')}" if node else _WHERE.get(engine or "", "where the ranks start")
    fix = _HAVE_IT.get(engine or "", _HAVE_IT["host"]).format(cmd=cmd)
    return cmd, where, fix


def _startup_failure(raw: RawAttempt) -> Outcome:
    tail = raw.launcher_tail
    missing = missing_command(tail, raw.engine)
    if missing is not None:
        cmd, where, fix = missing
        return _fail(raw, "startup", "launcher", f"the command `{cmd}` does not exist {where} (launcher exit "
                     f"{raw.exit_code}); no rank started. Fix: {fix}.", missing_command=cmd, where=where)
    found = classify_text("", tail)
    error_class = found if found != "other" else "launcher"
    lines = [l for l in tail.splitlines() if l.strip()]
    key = next((l for l in reversed(lines) if re.search(r"Error|error|FAILED", l)), lines[-1] if lines else "")
    return _fail(raw, "startup", error_class,
                 f"{len(raw.ranks)} of {raw.expected_ranks} ranks started; launcher exit {raw.exit_code}: {key.strip()[:300]}")


def _watchdog(raw: RawAttempt) -> dict[str, Any] | None:
    """What torch's watchdog said, where any rank's error or the launcher's output holds its line."""
    texts = [s.error.message for s in raw.rank_states.values() if s.error and s.error.message]
    for text in [*texts, raw.launcher_tail, *raw.nccl_tails]:
        m = _WATCHDOG.search(text or "")
        if m:
            rank, seq, op, ms = m.groups()
            return {"rank": int(rank) if rank else None, "seq_num": int(seq), "op_type": op,
                    "timeout_s": int(ms) / 1000 if ms else None, "by": "torch's watchdog"}
    for rank, state in sorted(raw.rank_states.items()):
        m = _GLOO_TIMEOUT.search((state.error.message or "") if state.error else "")
        if m:
            return {"rank": rank, "seq_num": None, "op_type": f"gloo {m.group(2)}", "timeout_s": int(m.group(1)) / 1000,
                    "by": "gloo's timeout"}
    return None


def _victims(raw: RawAttempt, cause: int, failures: dict[int, tuple[int, str | None]],
             stall: Stall | None = None) -> dict[str, str]:
    """Every other rank that did not finish, and why: it lost its peer, the launcher stopped it, or it
    was still waiting when the supervisor stopped the cell."""
    why: dict[str, str] = {}
    behind = stall.why_behind if stall else {}
    for rank, state in sorted(raw.rank_states.items()):
        if rank == cause or (state.result and not state.error):  # finished well
            continue
        _, sig = failures.get(rank, (None, None))
        if rank in behind and not state.error:
            why[str(rank)] = f"{behind[rank]} after rank {cause} failed"
        elif stall is not None and not state.error:
            why[str(rank)] = f"still waiting in {state.phase or STARTUP} when the cell was stopped, after rank {cause} failed"
        elif state.error and _LOST_PEER.search(state.error.message or ""):
            why[str(rank)] = f"lost its peer in {state.error.phase or state.phase}: {_first_line(state.error.message)}"
        elif state.error:  # an error of its own, later: the same fault seen twice, or a second one
            why[str(rank)] = f"also failed in {state.error.phase or state.phase}: {_first_line(state.error.message)}"
        elif sig:
            why[str(rank)] = f"stopped by the launcher ({sig}) in {state.phase or STARTUP} after rank {cause} failed"
        else:
            why[str(rank)] = f"ended in {state.phase or STARTUP} after rank {cause} failed"
    for rank in range(raw.expected_ranks):
        if rank != cause and rank not in raw.rank_states:
            why[str(rank)] = "never started (no events)"
    return why


def _victim_text(victims: dict[str, str]) -> str:
    return "; ".join(f"rank {r} {w}" if w.startswith("also failed") else f"rank {r} is a victim: {w}"
                     for r, w in victims.items())


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
        return Outcome(status="infra-error", reason=raw.infra_reason, seconds=seconds)
    loaded = raw.loaded_nccl
    if nccl_expected and loaded and loaded != nccl_expected:
        return Outcome(status="infra-error", reason=f"the cell asked for NCCL {nccl_expected} but the ranks loaded {loaded}; "
                       "the pin did not take (check the image's nvidia-nccl package or LD_PRELOAD)", seconds=seconds,
                       detail={"nccl_expected": nccl_expected, "nccl_loaded": loaded})
    if raw.ended_by == "interrupted":
        return Outcome(status="interrupted", reason="stopped by Ctrl-C", seconds=seconds)
    # Whether the launcher exited or the supervisor stopped the cell: a rank that recorded its own error
    # is the cause; ranks that only lost their peer, that the launcher stopped after it, or that were
    # still waiting when the cell was stopped are its victims. A collective that timed out (torch's
    # watchdog, gloo's own timeout) means a hang, whatever torch did next. Only when no rank recorded an
    # error of its own is a rank killed by a signal (not the launcher's SIGTERM) the cause.
    ranks = raw.rank_states
    logs = raw.nccl
    failures = {r: (c, s) for r, c, s in launcher_failures(raw.launcher_tail)}
    watchdog = _watchdog(raw)
    if watchdog is not None:
        return _caught_by_watchdog(raw, watchdog)
    stall = raw.stall if raw.ended_by in ("stall", "cap") else None
    errors = sorted(((r, s.error) for r, s in ranks.items() if s.error), key=lambda e: e[1].wall or 0)
    own = [(r, e) for r, e in errors if not _LOST_PEER.search(e.message or "")]
    if raw.ended_by in ("stall", "cap") and not own:
        if stall is not None and stall.gone:  # silent because dead: the launcher had not yet noticed
            rank = stall.gone[0]
            phase = ranks[rank].phase if rank in ranks else stall.phase
            return _fail(raw, phase, "killed", f"rank {rank} died in {phase} without an error (its process was gone "
                         "when the cell stopped progressing; the launcher had not yet noticed)",
                         rank=rank, signal=None, victims=_victims(raw, rank, failures, stall))
        return _hang(raw, stall or Stall())
    silent = [r for r, s in ranks.items() if not s.result and not s.error]
    killed = [(r, *failures[r]) for r in silent if r in failures and failures[r][0] < 0 and failures[r][1] != "SIGTERM"]
    if own or (errors and not killed):
        rank, first = (own or errors)[0]
        warnings = logs[str(rank)].warnings if str(rank) in logs else ()
        line = key_line(first.message, warnings)
        victims = _victims(raw, rank, failures, stall)
        lost = "" if own else " (it only lost its peer, and no other rank said why)"
        return _fail(raw, first.phase, _error_class(first, warnings),
                     f"rank {rank}: {first.type}: {line}{lost}" + (f" ({_victim_text(victims)})" if victims else ""),
                     rank=rank, key_line=line, victims=victims, ranks_with_errors=sorted({r for r, _ in errors}))
    if killed:
        rank, code, sig = killed[0]
        phase = ranks[rank].phase
        victims = _victims(raw, rank, failures)
        return _fail(raw, phase, "killed", f"rank {rank} died in {phase} ({sig or f'signal {-code}'}) without an error",
                     rank=rank, signal=sig or f"signal {-code}", victims=victims)
    if silent:
        rank = silent[0]
        phase = ranks[rank].phase
        sig = failures.get(rank, (None, None))[1]
        return _fail(raw, phase, "killed", f"rank {rank} died in {phase} without an error (launcher exit {raw.exit_code})",
                     rank=rank, signal=sig, victims=_victims(raw, rank, failures))
    if len(raw.ranks) < raw.expected_ranks:
        return _startup_failure(raw)
    finished = list(ranks.values())
    wrong = max((s.wrong_total for s in finished), default=0)
    if wrong:
        return _wrong(raw, wrong, seconds)
    if raw.exit_code not in (0, None):
        return _fail(raw, "teardown", "launcher", f"every rank finished but the launcher exited with {raw.exit_code}")
    busbw = max((s.largest_busbw_gbs for s in finished), default=0)
    if len(finished) == 1:
        # the one-GPU H200 machine: each phase passed, and nothing crossed from one GPU to another
        return Outcome(status="pass", reason="one rank: every phase passed; no GPU-to-GPU (or rank-to-rank) path was "
                       "exercised, so there is no bus bandwidth (it needs two or more ranks)", seconds=seconds)
    if min_busbw is not None and busbw < min_busbw:
        return Outcome(status="slow", reason=f"busbw {busbw:.2f} GB/s at the largest size, below the {min_busbw:g} GB/s floor",
                       seconds=seconds, phase="bandwidth", error_class=None, detail={"busbw_gbs": busbw, "min_busbw": min_busbw})
    return Outcome(status="pass", reason=f"busbw {busbw:.2f} GB/s at the largest size", seconds=seconds,
                   detail={"busbw_gbs": busbw})


def _wrong(raw: RawAttempt, wrong: int, seconds: float) -> Outcome:
    """Data that came back wrong: the check's all-reduce, or the collectives and sizes of the sweep whose
    rows say so (a wrong all-gather alone is said as that: the all-reduce column may be exact)."""
    check = raw.phases.get("check")
    in_check = int((check.model_extra or {}).get("wrong_total") or 0) if check else 0
    swept = {(name, row.bytes): row.wrong for name, rows in raw.collective_rows.items() for row in rows if row.wrong}
    names = sorted({name for name, _ in swept}, key=lambda n: (n != "all_reduce", n))
    parts = ([f"all_reduce returned {in_check} wrong element(s) in the check"] if in_check else []) + [
        f"{name} returned {sum(n for (c, _), n in swept.items() if c == name)} wrong element(s) at "
        + ", ".join(size_label(b) for (c, b) in sorted(swept) if c == name) for name in names]
    reason = "; ".join(parts) or f"all-reduce returned {wrong} wrong element(s)"
    phase = "check" if in_check or not swept else "bandwidth"
    return Outcome(status="wrong", reason=reason, seconds=seconds, phase=phase,
                   detail={"wrong": wrong} | ({"collectives": names} if names else {}))


def _rank_on(raw: RawAttempt, rank: int) -> str:
    """"rank R", and its node where the ranks ran on more than one (on one machine the host says it)."""
    nodes = raw.nodes
    node = next((n for n, ranks in nodes.items() if rank in ranks), None)
    return f"rank {rank} on {node}" if len(nodes) > 1 and node else f"rank {rank}"


def _hang(raw: RawAttempt, stall: Stall) -> Outcome:
    """The supervisor stopped a cell in which no rank said anything of its own: a hang in the phase the
    leading rank was in, the ranks behind named."""
    why = {str(r): text for r, text in stall.why_behind.items()}
    what = (f"hard cap of {stall.threshold:.0f}s for the cell reached" if raw.ended_by == "cap"
            else f"no progress for {stall.since_progress:.0f}s in {stall.phase}"
            + (f" ({stall.step})" if stall.step else "") + f" (threshold {stall.threshold:.0f}s)")
    who = "; ".join(f"{_rank_on(raw, r)} {why.get(str(r), '')}".strip() for r in stall.ranks_behind) or "all ranks waiting"
    inside = positions(raw)
    # a rank the flight recorder shows never entered the collective the others wait in is behind, though
    # alive: its heartbeats go on, so the stall alone called every rank waiting
    behind = sorted({*stall.ranks_behind, *inside.behind})
    for rank in inside.behind:
        why.setdefault(str(rank), "never entered the collective the others wait in (flight recorder)")
    said = [who] if stall.ranks_behind or not inside.behind else []  # else the flight line names who is behind
    return Outcome(status="hang", reason="; ".join([what, *said, *([f"flight recorder: {inside.text}"] if inside.text else [])]),
                   seconds=raw.seconds, phase=stall.phase, error_class=None,
                   detail={"ranks_behind": behind, "why_behind": why} | ({"flight": inside.text} if inside.text else {}))


def flight_text(raw: RawAttempt) -> str | None:
    """Which collective each rank was in (flight.summary), from the records the ranks wrote at the
    supervisor's request; None for an attempt from before the request was made."""
    return positions(raw).text


def positions(raw: RawAttempt) -> flight.Positions:
    """flight.read of the attempt; a rank without a record is said with what the stall knows of it
    (silent: stopped or frozen) and where its native stack shows its main thread."""
    dumps = raw.forensics.flight
    if dumps is None:
        return flight.Positions(None)
    silent = dict(raw.stall.why_behind) if raw.stall else {}
    for rank, text in (raw.forensics.native or {}).items():
        found = nativestack.where(text) if rank.isdigit() else None
        if found:
            silent[int(rank)] = "; ".join(x for x in (silent.get(int(rank)), f"its main thread {found}") if x)
    return flight.read({int(r): d for r, d in dumps.items() if r.isdigit()}, raw.expected_ranks, silent)


def _timed_out(raw: RawAttempt, watchdog: dict[str, Any]) -> set[int]:
    """The ranks that reported the same timeout themselves: they were waiting inside that collective, not
    behind (issue 23: when every rank did, the path between them is what broke, not a slow rank)."""
    texts = [s.error.message for s in raw.rank_states.values() if s.error and s.error.message]
    found = {int(m.group(1)) for text in [*texts, raw.launcher_tail, *raw.nccl_tails] for m in _WATCHDOG.finditer(text or "")
             if m.group(1) and int(m.group(2)) == watchdog["seq_num"] and m.group(3) == watchdog["op_type"]}
    return found | {r for r, s in raw.rank_states.items() if s.error and _GLOO_TIMEOUT.search(s.error.message or "")}


def _caught_by_watchdog(raw: RawAttempt, watchdog: dict[str, Any]) -> Outcome:
    """A rank torn down by torch's watchdog was waiting in a collective that never completed: a hang in
    its phase, whatever torch did next. The ranks that did not report the timeout are the ones behind."""
    ranks = raw.rank_states
    waiting = watchdog["rank"]
    phase = ranks[waiting].phase if waiting in ranks else None
    lead = max((s.phase for s in ranks.values() if s.phase), key=phase_index, default=None)
    phase = phase or lead or STARTUP
    timed_out = _timed_out(raw, watchdog)
    behind = {str(r): f"still in {s.phase or STARTUP}" if s.phase is None or phase_index(s.phase) < phase_index(phase)
              else f"did not join the {watchdog['op_type']} in {s.phase}"
              for r, s in sorted(ranks.items()) if r != waiting and not s.result and r not in timed_out}
    for rank in range(raw.expected_ranks):
        if rank not in ranks:
            behind[str(rank)] = "never started (no events)"
    after = f" after {watchdog['timeout_s']:.0f}s" if watchdog.get("timeout_s") else ""
    on = f" on rank {waiting}" if waiting is not None else ""
    who = "; ".join(f"rank {r} {w}" for r, w in behind.items()) or "all ranks waiting"
    seq = f" (SeqNum={watchdog['seq_num']})" if watchdog.get("seq_num") is not None else ""
    return Outcome(status="hang", reason=f"{watchdog['op_type']}{seq} did not complete in {phase}: "
                   f"caught by {watchdog['by']}{after}{on}; {who}", seconds=raw.seconds, phase=phase, error_class=None,
                   detail={"ranks_behind": [int(r) for r in behind], "why_behind": behind, "watchdog": watchdog})
