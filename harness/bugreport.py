"""The body of an upstream bug report for one recorded cell (issue 24, item 5): what people are asked
for when they file an NCCL, PyTorch or Accelerate issue, from the record alone: what failed, the stack
and the driver, the NCCL variables by origin, the key lines, the stacks of the ranks that were behind,
NCCL's log around its first WARN, the rescue search and the NCCL-only control, and the lines that
reproduce it. Each tracker's template asks for these in its own order (TEMPLATES).

Pure: render() reads a RunData and the NCCL logs the caller read, and returns markdown. Secrets never
reach it unmasked: values are shown through workload/redact.shown, as everywhere a value is written."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import advice, hints, nativestack, outcome, report
from .errors import HarnessError
from .escape import esc
from .record import CellRecord
from .results import RunData
from .runfacts import RunFacts
from .workload.redact import shown, strip_url_credentials

# Section order per tracker, from their issue templates: NVIDIA/nccl's bug form (description, NCCL
# version and environment, then the NCCL_DEBUG=INFO log), pytorch/pytorch's (the bug with its
# reproduction, then the versions collect_env prints), huggingface/accelerate's (system info first, then
# the reproduction, then what was expected).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "nccl": ("failed", "environment", "variables", "nccl_log", "key_lines", "stacks", "diagnosis", "reproduction"),
    "pytorch": ("failed", "reproduction", "key_lines", "stacks", "nccl_log", "diagnosis", "environment", "variables"),
    "accelerate": ("environment", "variables", "reproduction", "failed", "key_lines", "stacks", "nccl_log", "diagnosis"),
}
LOG_BEFORE, LOG_AFTER = 20, 10  # lines of NCCL's log kept around its first WARN
STACK_LINES = 60  # lines kept of each stack dump
_WARN = re.compile(r"\bNCCL WARN\b")
_ASSIGNMENT = re.compile(r"^(-e|--env=)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


@dataclass(frozen=True)
class Logs:
    """Each rank's NCCL_DEBUG log of the cell's last attempt, as the caller read it (rank -> text)."""

    nccl: Mapping[str, str]


def render(data: RunData, cell_id: str, template: str = "nccl", logs: Logs | None = None) -> str:
    """The report body for `cell_id` of `data`, its sections in `template`'s order."""
    if template not in TEMPLATES:
        raise HarnessError(f"--for {template!r}: no such template. Fix: one of {', '.join(TEMPLATES)}.")
    record = data.records.get(cell_id)
    if record is None:
        why = data.problems.get(cell_id)
        known = ", ".join(sorted(data.records)[:5]) or "none"
        raise HarnessError(f"cell {cell_id!r}: {'its record cannot be read: ' + why if why else 'not in run ' + data.run_id}. "
                           f"Fix: name a cell of this run (invoke report lists them; some: {known}).")
    sections: dict[str, Callable[[], list[str]]] = {
        "failed": lambda: _failed(record),
        "environment": lambda: _environment(record, data.facts),
        "variables": lambda: _variables(record),
        "reproduction": lambda: _reproduction(record, data.facts),
        "key_lines": lambda: _key_lines(record),
        "stacks": lambda: _stacks(record),
        "nccl_log": lambda: _nccl_log(record, logs or Logs({})),
        "diagnosis": lambda: _diagnosis(record, data),
    }
    lines = [f"<!-- nccl-harness bugreport: run {data.run_id}, cell {cell_id}, template {template} -->", ""]
    for name in TEMPLATES[template]:
        lines += sections[name]()
    return "\n".join(lines).rstrip("\n") + "\n"


def _section(title: str, body: list[str]) -> list[str]:
    while body and not body[-1]:
        body = body[:-1]
    return [f"## {title}", "", *body, ""]


def _fenced(text: str) -> list[str]:
    """A block that no line of `text` can close (a longer fence than any run of backticks in it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, strip_url_credentials(text.rstrip("\n")), fence]


def _failed(record: CellRecord) -> list[str]:
    status = record.status or "missing"
    where = ", ".join(x for x in (f"phase {record.phase}" if record.phase else None,
                                  f"class {record.error_class}" if record.error_class else None,
                                  f"{record.seconds:.0f} s" if record.seconds else None,
                                  f"attempt {record.attempt_count}" if record.attempt_count else None) if x)
    body = [f"{report.SYMBOLS.get(status, status)}: {esc(record.reason or '')}" + (f" ({where})" if where else "")]
    return _section("What failed", body)


def _environment(record: CellRecord, run: RunFacts) -> list[str]:
    fp = record.fingerprint
    cell = record.cell
    gpus = ", ".join(f"{n} × {g}" for g, n in Counter(run.host_gpus).items()) if run.host_gpus else "none"
    rows = [("host", run.hostname), ("OS", run.os), ("NVIDIA driver", run.driver or "none"),
            ("GPUs", gpus + (f" (the cell used {', '.join(run.gpus)})" if run.gpus else "")),
            ("engine", report.engine_text(run)),
            ("image", record.image_tag),
            ("CUDA (image)", cell.cuda),
            ("torch / Accelerate", f"{fp.torch or cell.torch} / {fp.accelerate or cell.accelerate}"),
            ("NCCL compiled / loaded", None if cell.is_cpu else f"{fp.nccl_compiled or '?'} / {fp.nccl_loaded or '?'}"),
            ("launcher", cell.launcher),
            ("nodes", report.nodes_text(record)),
            ("harness", f"{run.harness_version} (commit {run.git_commit or '?'})")]
    return _section("Environment", [f"- {k}: {esc(v)}" for k, v in rows if v])


def _variables(record: CellRecord) -> list[str]:
    body = [f"- variables by origin: {esc(report.origins_text(record))}"]
    changed = record.launcher_changes
    if changed:
        body.append("- the launcher changed: " + esc(", ".join(
            f"{k}: {shown(k, c.expected) or 'unset'} → {shown(k, c.actual) or 'unset'}" for k, c in changed.items())))
    return _section("NCCL variables", body)


def _masked(token: str) -> str:
    """One argument of a command line, a NAME=value assignment's value shown by the one rule."""
    found = _ASSIGNMENT.match(token)
    if found:
        prefix, name, value = found.groups()
        return f"{prefix or ''}{name}={shown(name, value)}"
    return strip_url_credentials(token)


def _reproduction(record: CellRecord, run: RunFacts) -> list[str]:
    body = ["Rerun with the harness:", "", *_fenced(report.rerun_command(record, run))]
    last = record.last_attempt
    if last and last.command:
        attempt = f" (attempt {last.attempt})" if last.attempt else ""
        body += ["", f"The command the harness ran{attempt}:", "",
                 *_fenced(shlex.join(_masked(t) for t in last.command))]
    return _section("Reproduction", body)


def _key_lines(record: CellRecord) -> list[str]:
    raw = record.last_raw
    body: list[str] = []
    for rank, state in sorted(raw.ranks.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        if state.error:
            err = state.error
            head = f"rank {rank}" + (f" in {err.phase}" if err.phase else "") + (f" ({err.type})" if err.type else "")
            body += [f"{head}:", "", *_fenced(err.message or ""), ""]
    for rank, summary in sorted(raw.nccl.items()):
        first = (summary.errors or summary.warnings)[:3]
        if first:
            body += [f"rank {rank}'s NCCL log, first WARN lines:", "", *_fenced("\n".join(first)), ""]
    if raw.launcher_tail and not body:
        body += ["the launcher's output, last lines:", "", *_fenced("\n".join(raw.launcher_tail.splitlines()[-20:]))]
    return _section("Key lines", body or ["No rank recorded an error, and NCCL logged no WARN."])


def _behind(record: CellRecord) -> tuple[str, ...]:
    stall = record.last_raw.stall
    return tuple(str(r) for r in stall.ranks_behind) if stall else ()


def _stacks(record: CellRecord) -> list[str]:
    forensics = record.last_raw.forensics
    dumps = {**(forensics.stacks or {}), **{f"{r} (py-spy)": t for r, t in (forensics.py_spy or {}).items()},
             **{f"{r} (native, the threads that matter first)": nativestack.shown(t)
                for r, t in (forensics.native or {}).items()}}
    if not dumps:
        return []
    behind = _behind(record)
    # the ranks behind first: theirs is the stack that says why the others wait
    order = sorted(dumps, key=lambda key: (key.split(" ")[0] not in behind, key))
    body = [f"Ranks behind when the hang was declared: {', '.join(behind)}." if behind else
            "No rank was behind: every rank waited inside its collective."] if record.status == "hang" else []
    inside = outcome.flight_text(record.last_raw)
    if inside:
        body.append(f"Flight recorder (the collective each rank was in): {inside}.")
    if forensics.ras:
        body += ["", "NCCL's RAS service (`ncclras`), asked at the hang:", "",
                 *_fenced("\n".join(forensics.ras.splitlines()[:STACK_LINES]))]
    missing = [r for r in behind if r not in dumps]
    if missing:
        body.append(f"No stack of rank {', '.join(missing)} was taken.")
    for key in order:
        text = "\n".join(dumps[key].splitlines()[:STACK_LINES])
        body += ["", f"rank {key}:", "", *_fenced(text)]
    return _section("Stacks", body)


def nccl_excerpt(text: str) -> str | None:
    """NCCL's log around its first WARN: LOG_BEFORE lines before it, LOG_AFTER after; None without one."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _WARN.search(line)), None)
    if first is None:
        return None
    return "\n".join(lines[max(0, first - LOG_BEFORE): first + LOG_AFTER + 1])


def _nccl_log(record: CellRecord, logs: Logs) -> list[str]:
    tails = record.last_raw.forensics.nccl_tail or {}
    body: list[str] = []
    for rank in sorted(set(logs.nccl) | set(tails)):
        excerpt = nccl_excerpt(logs.nccl.get(rank, "")) or nccl_excerpt(tails.get(rank, ""))
        if excerpt:
            body += [f"rank {rank}, around the first WARN:", "", *_fenced(excerpt)]
            break  # the first rank that warned: the others' WARN lines are under Key lines
    if not body:
        for rank, tail in sorted(tails.items())[:1]:
            body += [f"rank {rank}, the end of its log (no WARN):", "", *_fenced("\n".join(tail.splitlines()[-LOG_AFTER:]))]
    return _section("NCCL log", body) if body else []


def _diagnosis(record: CellRecord, data: RunData) -> list[str]:
    matched = hints.match(record)
    body = []
    for found in matched:
        hint = found.hint
        title = f"**{esc(hint.title)}**" if found.certain else f"Possibly: **{esc(hint.title)}** ({found.caveat})"
        fix = f" Fix: {esc(hint.fix)}" if hint.fix else ""
        body.append(f"- {title}.{fix} ({esc(hint.link)})")
    if not matched:
        body.append("- No known issue matched.")
    advised = advice.advise(record, matched)
    if advised is not None:
        body.append(f"- next step: {esc(advised.text())}")
    row = {r.cell.variant or "": r for r in data.records.values() if r.row_key == record.row_key}  # its row's variants
    for label, text in (("rescue search", report.rescue_text(record, row, report.reference_size(data))),
                        ("NCCL alone", report.control_text(record))):
        if text:
            body.append(f"- {label}: {esc(text)}")
    return _section("What the harness found", body)
