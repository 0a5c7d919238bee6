"""The results store: one folder per run under results/, JSON written atomically, so a killed run
never leaves a half-written record."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .errors import HarnessError
from .evidence import _shown
from .record import CellRecord, RunFacts

SCHEMA_VERSION = 1
_UMASK = os.umask(0o022)
os.umask(_UMASK)
DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "results"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def run_dir(results: Path, run_id: str) -> Path:
    """Create (or reuse) results/<run-id>; an unwritable folder is bad input, said so."""
    path = Path(results) / run_id
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
    path = Path(results) / run_id / "cells" / cell_id
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
    if run in known:
        return Path(results) / run
    listing = ", ".join(known[-10:]) if known else "none"
    raise HarnessError(f"run `{run}` not found in {results} (runs there: {listing}). Fix: pass one of those ids or a run folder.")


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record to the current schema, or say why it cannot be read."""
    schema = record.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ValueError(f"no schema version ({_shown(schema)}); not a harness record")
    if schema > SCHEMA_VERSION:
        raise ValueError(f"schema {schema} is newer than this harness reads ({SCHEMA_VERSION}); update the harness")
    return record  # schema 1 is the first: nothing to migrate yet


# A record.json of a real run is a few hundred KB (the largest seen, a hang with thread dumps and NCCL
# log tails of 8 ranks, under 2 MB) and a dozen levels deep; beyond these it is damage, not a record.
MAX_RECORD_BYTES = 64 << 20
MAX_DEPTH = 64


def _depth(data: Any) -> int:
    """How deeply `data` nests (without recursion: a damaged file may nest past Python's stack)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level <= MAX_DEPTH and isinstance(item, (dict, list)):
            stack.extend((x, level + 1) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


def _read(path: Path) -> dict[str, Any]:
    """A record file's JSON object, or ValueError saying what is wrong with it (OSError when unreadable)."""
    if path.stat().st_size > MAX_RECORD_BYTES:
        raise ValueError(f"{path.stat().st_size} bytes, larger than any record ({MAX_RECORD_BYTES >> 20} MiB)")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except RecursionError:
        raise ValueError(f"JSON nested too deeply (more than {MAX_DEPTH} levels)") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})" if str(exc) else "not JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {type(data).__name__}")
    if _depth(data) > MAX_DEPTH:
        raise ValueError(f"JSON nested too deeply (more than {MAX_DEPTH} levels)")
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
        problems["run.json"] = _corrupt("run.json", "; ".join(wrong[:3]) + (f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""))
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
