"""The results store: one folder per run under results/, JSON written atomically, so a killed run
never leaves a half-written record."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from .errors import HarnessError

SCHEMA_VERSION = 1
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
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cell_dir(results: Path, run_id: str, cell_id: str) -> Path:
    path = Path(results) / run_id / "cells" / cell_id
    path.mkdir(parents=True, exist_ok=True)
    return path
