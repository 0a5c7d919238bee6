"""The harness's own files, damaged for real (issue 22): wheel locks, the file-hash cache, publish's
sidecars, the Slurm job notes and builds.json, each written here the way a tampering hand, a FIFO or a
bad disk leaves it. A lock is refused with one paragraph naming the file, the key and the fix (exit 4);
a cache, a sidecar, a note and builds.json count as absent (and are said where that hides something).
Never a traceback, never a wait on a FIFO. Also: a --run-id that names a file is blamed on --run-id.

The wheel lock and the hash cache are read only by a build (and --dry-run), which needs a Docker engine:
they are driven through images.prepare, the step both take, with the store's files written for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT

from .conftest import REPO

GOLDEN = Path(__file__).parent / "fixtures" / "golden-run"
HINTS = Path(__file__).parent / "fixtures" / "golden-hints.yaml"


def _harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _damage(path: Path, how: bytes | str | None) -> None:
    """Leave `path` damaged: these bytes or this text, a FIFO (None), or a folder ("<folder>")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how is None:
        os.mkfifo(path)
    elif how == "<folder>":
        path.mkdir()
    elif isinstance(how, bytes):
        path.write_bytes(how)
    else:
        path.write_text(how)


# ------------------------------------------------------------------------------------ --run-id
def test_a_run_id_that_names_a_file_is_blamed_on_run_id(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "taken").write_text("not a run\n")
    proc = _harness("matrix", "--engine", "host", "--matrix", "matrix-cpu.yaml", "--results", str(tmp_path),
                    "--run-id", "taken")
    assert proc.returncode == EXIT_BAD_INPUT and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == (f"error: --run-id taken: {tmp_path / 'taken'} is a file, not a run folder. "
                                            "Fix: pass another --run-id (or move that file away).")
    # a --results that is a file is still --results's fault
    proc = _harness("matrix", "--engine", "host", "--matrix", "matrix-cpu.yaml", "--results", str(tmp_path / "taken"),
                    "--run-id", "r")
    assert proc.returncode == EXIT_BAD_INPUT and proc.stderr.splitlines()[-1].startswith(f"error: --results {tmp_path / 'taken'}:")
