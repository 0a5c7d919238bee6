"""Golden files: a rendered text compared byte for byte with tests/golden/<name>. On a difference the
test shows a unified diff; UPDATE_GOLDEN=1 rewrites the file (review the change in git before commit)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run once with UPDATE_GOLDEN=1 and review it"
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{name}", "rendered"))
        raise AssertionError(f"{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it):\n{diff}")
