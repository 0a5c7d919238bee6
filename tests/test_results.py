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


def test_the_latest_run_is_the_one_that_started_last_not_the_last_name(tmp_path):
    """The README's own before/after run ids: `before-driver-upgrade` sorts after `after-driver-upgrade`, and
    "the latest" (report, publish, --resume) took it (issue 22). A run without run.json, or with a damaged
    one, counts from its folder's time."""
    for run_id, started in (("before-driver-upgrade", "2026-12-01T10:00:00+0000"),
                            ("after-driver-upgrade", "2026-12-01T11:30:00+0100")):  # 10:30 UTC: still the later one
        (tmp_path / run_id).mkdir()
        results.write_json(tmp_path / run_id / "run.json", {"run_id": run_id, "started": started})
    assert results.runs(tmp_path) == ["before-driver-upgrade", "after-driver-upgrade"]
    assert results.resolve_run(tmp_path, None) == tmp_path / "after-driver-upgrade"
    (tmp_path / "a-damaged-one" / "cells").mkdir(parents=True)
    (tmp_path / "a-damaged-one" / "run.json").write_text("{not json")
    os.utime(tmp_path / "a-damaged-one", (0, 0))  # its folder says 1970: the oldest
    (tmp_path / "no-run-json" / "cells").mkdir(parents=True)  # its folder says now: the newest
    assert results.runs(tmp_path) == ["a-damaged-one", "before-driver-upgrade", "after-driver-upgrade", "no-run-json"]


def test_a_fifo_in_place_of_a_record_is_a_problem_not_a_wait(tmp_path):
    """A FIFO opened for reading waits for a writer that never comes: report, compare and publish hung on one."""
    import threading

    run = tmp_path / "r"
    (run / "cells" / "c").mkdir(parents=True)
    os.mkfifo(run / "run.json")
    os.mkfifo(run / "cells" / "c" / "record.json")
    found: list[results.RunData] = []
    reader = threading.Thread(target=lambda: found.append(results.load_run(run)), daemon=True)
    reader.start()
    reader.join(30)
    assert found, "load_run waited on a FIFO"
    assert "not a regular file" in found[0].problems["run.json"] and "not a regular file" in found[0].problems["c"]
