"""The results store writes through a temporary file and a rename; what it writes is as readable as
any other file written here (mkstemp alone made run.json 0600 beside 0644 logs)."""

from __future__ import annotations

import os

from harness import results


def test_atomic_writes_keep_the_usual_permissions(tmp_path):
    results.write_json(tmp_path / "run.json", {"run_id": "r"})
    (tmp_path / "plain.log").write_text("")
    mode = lambda p: os.stat(p).st_mode & 0o777  # noqa: E731
    assert mode(tmp_path / "run.json") == mode(tmp_path / "plain.log")
    assert not list(tmp_path.glob(".run.json.*.tmp"))
