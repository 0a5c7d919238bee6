"""The results store: one folder per run under results/, owned by one harness at a time (a lock), every
file written atomically (temporary file, fsync, rename), so a killed run never leaves a half-written
record, and a write that fails (full disk, read-only folder) is a WriteError naming the path and the
fix, not a traceback."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from . import owner, statefile
from .codec import shown
from .errors import HarnessError, WriteError
from .record import CellRecord
from .runfacts import RunFacts

SCHEMA_VERSION = 1
_UMASK = os.umask(0o022)
os.umask(_UMASK)
DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "results"
# A run id is a folder name under --results, never a path: issue 14 saw `../../escape1` and absolute ids
# written outside --results, `.` write into the results root, a newline accepted, and the rerun cleanup
# delete cells/<cell>/attempt-N under whatever the id resolved to.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


PROBE_BYTES = 4 << 20  # the start-up write: a record with its attempt files is this big (a 2 MB tmpfs failed mid-cell)
LOCK = ".lock"
STARTED = "%Y-%m-%dT%H:%M:%S%z"  # run.json's `started` (local time with its offset), written by pipeline

_FIXES = {
    errno.ENOSPC: "free space on that disk, or pass --results on one with room",
    errno.EDQUOT: "free space within your quota, or pass --results on another disk",
    errno.EROFS: "remount that file system read-write, or pass --results on a writable one",
    errno.EACCES: "give this user write permission on that folder, or pass --results on a writable one",
    errno.EPERM: "give this user write permission on that folder, or pass --results on a writable one",
}
_NOT_A_FOLDER = frozenset((errno.ENOTDIR, errno.ENAMETOOLONG, errno.EEXIST, errno.ELOOP))
WRITE_ERRNOS = frozenset((*_FIXES, errno.EIO, errno.EFBIG))


def write_error(path: Path | str, exc: OSError) -> WriteError:
    """A failed write as the error a run stops with: the path, the cause and the fix."""
    fix = _FIXES.get(exc.errno or 0, "check that disk (dmesg), or pass --results on another one")
    return WriteError(f"cannot write {path} ({exc.strerror or exc}). Fix: {fix}.")


def check_run_id(run_id: str, flag: str = "--run-id") -> str:
    """The run id itself, or bad input naming the flag: letters, digits, '.', '_', '-', at most 100,
    starting with a letter or digit (so never `.`, `..`, a path, or a hidden folder)."""
    if not RUN_ID.fullmatch(run_id):
        shown = repr(run_id) if len(run_id) <= 60 else repr(run_id[:57]) + "..."
        raise HarnessError(f"{flag} {shown}: a run id is a folder name under --results, not a path: letters, digits, "
                           "'.', '_' and '-', at most 100, starting with a letter or digit. "
                           f"Fix: e.g. {flag} before-driver-upgrade (or leave it out for a timestamped one).")
    return run_id


def run_dir(results: Path, run_id: str) -> Path:
    """Create (or reuse) results/<run-id> and try a real write of a realistic size there: a run id that is
    not a name is bad input (exit 2); a folder that cannot take a run's files is said now, not after the
    first cell (a WriteError, exit 4)."""
    path = Path(results) / check_run_id(run_id)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-test.")
        try:
            with os.fdopen(fd, "wb") as fh:
                chunk = b"\0" * (1 << 20)
                for _ in range(PROBE_BYTES // len(chunk)):
                    fh.write(chunk)
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            Path(probe).unlink(missing_ok=True)
    except OSError as exc:
        if exc.errno in _NOT_A_FOLDER:  # a typo, not a disk problem: bad input
            if Path(results).is_dir() and (path.is_symlink() or path.exists()):  # --results is fine: the run id names a file
                raise HarnessError(
                    f"--run-id {run_id}: {path} is a file, not a run folder. Fix: pass another --run-id (or move "
                    "that file away).") from None
            raise HarnessError(
                f"--results {results}: {path} cannot write there: not a folder ({exc.strerror}). "
                "Fix: pass a folder path with --results."
            ) from None
        raise write_error(exc.filename or path, exc) from None
    return path


@contextmanager
def owned(run: Path) -> Iterator[str | None]:
    """Own a run folder while writing into it: an exclusive flock on <run>/.lock, which holds its owner.
    Another live harness's lock is exit 2 naming it (seen before: a second run with the same --run-id
    deleted the first one's live attempt folder, and the first recorded a FAIL for a cell that had
    passed). The kernel drops the lock of a process that dies, so a dead harness's lock is taken over;
    yields the dead holder's description then (its file still names it), else None."""
    path = run / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd) or "another harness"
            raise HarnessError(
                f"run folder {run} is in use by {holder}. Fix: wait for that run to end (then --resume "
                f"--run-id {run.name} continues it), or pass another --run-id.") from None
        stale = _holder(fd)
        me = owner.current()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{me.marker} harness {me.describe()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        try:
            yield stale
        finally:
            try:
                os.ftruncate(fd, 0)  # an empty lock file: its last holder ended well
            except OSError:
                pass  # a folder gone read-only or full: the stale text only names this harness later
    finally:
        os.close(fd)


def _holder(fd: int) -> str | None:
    """The lock file's text without its owner marker ("harness pid 12 on host, since ...")."""
    text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    return text.partition(" ")[2] or None if text else None


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary file and rename, with the schema version stamped in."""
    if isinstance(data, dict):
        data = {"schema": SCHEMA_VERSION, **data}
    write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    """The one way results files are written: a temporary file beside `path`, fsync'd, renamed over it,
    so a reader (or a killed run) sees the old file or the new one, never half of one; a failure to
    write is a WriteError naming `path`, and leaves no temporary file behind."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are as readable as any file written here
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(path, exc) from None
    finally:
        if tmp is not None and Path(tmp).exists():
            Path(tmp).unlink(missing_ok=True)


def cell_dir(results: Path, run_id: str, cell_id: str) -> Path:
    path = Path(results) / check_run_id(run_id) / "cells" / cell_id
    make_dir(path)
    return path


def make_dir(path: Path) -> None:
    """mkdir -p, a failure being a WriteError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path, exc) from None


def save_record(results: Path, run_id: str, record: CellRecord) -> Path:
    """Write a cell's record.json (atomically): the one place cell records are written."""
    if not record.id:
        raise ValueError("a cell record without a cell id cannot be saved")
    path = cell_dir(results, run_id, record.id) / "record.json"
    write_json(path, record.to_json())
    return path


@dataclass(frozen=True)
class RunData:
    """One run as read back: its facts and its cell records, with what could not be read named."""

    path: Path
    run: dict[str, Any]  # run.json as written; read it through `facts`
    records: dict[str, CellRecord]  # cell id -> record
    problems: dict[str, str]  # cell id (or "run.json") -> what is wrong with it

    @property
    def run_id(self) -> str:
        return self.path.name

    @cached_property
    def facts(self) -> RunFacts:
        """Host, driver, GPUs, engine, matrix path, start time and planned cells, from run.json."""
        return RunFacts.from_json(self.run)

    @property
    def started(self) -> str | None:
        return self.facts.started

    @property
    def hostname(self) -> str | None:
        return self.facts.hostname

    @property
    def driver(self) -> str | None:
        return self.facts.driver


def epoch(started: str) -> float | None:
    """run.json's `started` (STARTED) in seconds since the epoch; None when it is not such a time."""
    try:
        return datetime.strptime(started, STARTED).timestamp()
    except ValueError:
        return None


def started_at(run: Path) -> float:
    """When a run started, in seconds since the epoch: run.json's `started` (read with the records' bounds),
    else (no run.json, a damaged one) the folder's modification time."""
    try:
        started = _read(run / "run.json").get("started")
        when = epoch(started) if isinstance(started, str) else None
        if when is not None:
            return when
    except (OSError, ValueError):
        pass
    try:
        return run.stat().st_mtime
    except OSError:
        return 0.0


def runs(results: Path) -> list[str]:
    """Run ids under `results`, oldest first by when each started. Not by name: issue 22 saw the README's
    own `--run-id before-driver-upgrade` then `after-driver-upgrade`, and "the latest" (report, publish,
    --resume) took `before-...` by name order."""
    if not Path(results).is_dir():
        return []
    found = [p for p in Path(results).iterdir() if p.is_dir() and ((p / "run.json").exists() or (p / "cells").is_dir())]
    return [p.name for p in sorted(found, key=lambda p: (started_at(p), p.name))]


def resolve_run(results: Path, run: str | None) -> Path:
    """A run id, a folder, or None for the latest; an unknown one lists those that exist."""
    if run and Path(run).is_dir() and ((Path(run) / "run.json").exists() or (Path(run) / "cells").is_dir()):
        return Path(run)
    known = runs(results)
    if run is None:
        if not known:
            raise HarnessError(f"{results}: no runs yet. Fix: run `invoke matrix` first, or pass --results DIR.")
        return Path(results) / known[-1]
    if run in known:  # the folder names under `results`: a path or `..` is never among them
        return Path(results) / run
    listing = ", ".join(known[-10:]) if known else "none"
    shown = f"`{run}`" if RUN_ID.fullmatch(run) else repr(run[:60])
    raise HarnessError(f"run {shown} not found in {results} (runs there: {listing}). Fix: pass one of those ids or a run folder.")


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record to the current schema, or say why it cannot be read."""
    schema = record.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ValueError(f"no schema version ({shown(schema)}); not a harness record")
    if schema > SCHEMA_VERSION:
        raise ValueError(f"schema {schema} is newer than this harness reads ({SCHEMA_VERSION}); update the harness")
    return record  # schema 1 is the first: nothing to migrate yet


# A record.json of a real run is a few hundred KB (the largest seen, a hang with thread dumps and NCCL
# log tails of 8 ranks, under 2 MB) and a dozen levels deep (statefile.MAX_DEPTH); beyond these it is damage,
# not a record.
MAX_RECORD_BYTES = 64 << 20


def _read(path: Path) -> dict[str, Any]:
    """A record file's JSON object, or ValueError saying what is wrong with it (OSError when unreadable):
    read as statefile reads (a regular file, without blocking: a FIFO in its place is refused, not waited
    on; bounded in size and depth)."""
    data = statefile.read_json(path, MAX_RECORD_BYTES)
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {type(data).__name__}")
    return upgrade(data)


def load_run(path: Path) -> RunData:
    """Read run.json and every cells/*/record.json; a missing file, or one that is not a record (not
    JSON, of the wrong shape or types, of a newer schema), becomes a problem that names the file and
    what is wrong with it: readers show it as a corrupt record, never a traceback."""
    problems: dict[str, str] = {}
    run: dict[str, Any] = {}
    try:
        run = _read(path / "run.json")
    except FileNotFoundError:
        problems["run.json"] = "missing"
    except (ValueError, OSError) as exc:
        problems["run.json"] = _corrupt("run.json", exc)
    wrong: list[str] = []
    expected = list(RunFacts.from_json(run, wrong).cell_ids)  # run.json's `cells`: ids (early runs) or cell fields
    if wrong:
        problems["run.json"] = _corrupt("run.json",
                                        "; ".join(wrong[:3]) + (f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""))
    records: dict[str, CellRecord] = {}
    cells_dir = path / "cells"
    present = sorted(p.name for p in cells_dir.iterdir() if p.is_dir()) if cells_dir.is_dir() else []
    for cell_id in dict.fromkeys(present + expected):
        if not _is_name(cell_id):
            problems[cell_id] = _corrupt("run.json", f"cell id {cell_id!r} is not a folder name")
            continue
        record_path = cells_dir / cell_id / "record.json"
        try:
            records[cell_id] = CellRecord.from_json(_read(record_path))
        except FileNotFoundError:
            problems[cell_id] = "no record.json (the cell never finished, or the run was stopped first)"
        except (ValueError, OSError) as exc:
            problems[cell_id] = _corrupt(f"cells/{cell_id}/record.json", exc)
    return RunData(path, run, records, problems)


def _is_name(cell_id: str) -> bool:
    """A cell id that names a folder inside cells/ (run.json could hold any string)."""
    return bool(cell_id) and cell_id not in (".", "..") and "/" not in cell_id and "\\" not in cell_id and "\0" not in cell_id


def _corrupt(file: str, what: Any) -> str:
    """The note readers show for a file that is not a record: the file and what is wrong, cut short."""
    text = str(what.strerror if isinstance(what, OSError) and what.strerror else what)
    kind = "unreadable" if isinstance(what, OSError) else "corrupt record"
    return f"{kind} {file}: {text[:300]}"
