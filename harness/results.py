"""The results store: one folder per run under results/, JSON written atomically, so a killed run
never leaves a half-written record."""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .errors import HarnessError
from .record import CellRecord, RunFacts

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
    """Create (or reuse) results/<run-id>; a run id that is not a name, or an unwritable folder, is bad
    input, said so."""
    path = Path(results) / check_run_id(run_id)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise HarnessError(
            f"--results {results}: cannot write there ({exc.strerror}). Fix: pass a writable folder with --results."
        ) from None
    return path


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary file and rename, with the schema version stamped in."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, dict):
        data = {"schema": SCHEMA_VERSION, **data}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are as readable as any file written here
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cell_dir(results: Path, run_id: str, cell_id: str) -> Path:
    path = Path(results) / check_run_id(run_id) / "cells" / cell_id
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def runs(results: Path) -> list[str]:
    """Run ids under `results`, oldest first (ids start with their timestamp)."""
    if not Path(results).is_dir():
        return []
    return sorted(p.name for p in Path(results).iterdir() if p.is_dir() and ((p / "run.json").exists() or (p / "cells").is_dir()))


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


def upgrade(record: dict[str, Any], where: str) -> dict[str, Any]:
    """Bring an older record to the current schema, or say why it cannot be read."""
    schema = record.get("schema")
    if not isinstance(schema, int):
        raise ValueError(f"{where}: no schema version; not a harness record")
    if schema > SCHEMA_VERSION:
        raise ValueError(f"{where}: schema {schema} is newer than this harness reads ({SCHEMA_VERSION}); update the harness")
    return record  # schema 1 is the first: nothing to migrate yet


def _read(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return upgrade(data, str(path))


def load_run(path: Path) -> RunData:
    """Read run.json and every cells/*/record.json; a missing or corrupt file becomes a problem, not a crash."""
    problems: dict[str, str] = {}
    try:
        run = _read(path / "run.json")
    except FileNotFoundError:
        run, problems["run.json"] = {}, "missing"
    except (ValueError, OSError) as exc:
        run, problems["run.json"] = {}, f"unreadable ({exc})"
    records: dict[str, CellRecord] = {}
    cells_dir = path / "cells"
    expected = list(RunFacts.from_json(run).cell_ids)  # run.json's `cells`: ids (early runs) or cell fields
    present = sorted(p.name for p in cells_dir.iterdir() if p.is_dir()) if cells_dir.is_dir() else []
    for cell_id in dict.fromkeys(present + expected):
        record_path = cells_dir / cell_id / "record.json"
        try:
            records[cell_id] = CellRecord.from_json(_read(record_path))
        except FileNotFoundError:
            problems[cell_id] = "no record.json (the cell never finished, or the run was stopped first)"
        except (ValueError, OSError) as exc:
            problems[cell_id] = f"corrupt record.json ({str(exc)[:200]})"
    return RunData(path, run, records, problems)
