"""Damaged runs (issue 14, item 6): every record file of a real recorded run (tests/fixtures/golden-run)
damaged one way at a time: wrong types, nulls, lists for objects, strings in numeric bandwidth rows,
NaN and huge numbers, unknown closed-set values, JSON nested past Python's stack, empty, truncated and
non-UTF-8 files, a run.json with a list `host`. report, compare (the damaged run as base and as new) and
publish, through the guarded entry every CLI uses, never raise: each exits with its documented code,
and its output names the damaged file and what is wrong with it ("corrupt record <file>: ...")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import commands, results
from harness.errors import EXIT_CELLS_FAILED, EXIT_OK, guarded

from .conftest import REPO

GOLDEN = Path(__file__).parent / "fixtures" / "golden-run"
HINTS = Path(__file__).parent / "fixtures" / "golden-hints.yaml"
PASS = "cu12.4.1-torch2.5.1+cu124-acc1.2.1+p2p-off"
HANG = "cu12.4.1-torch2.5.1+cu124-acc1.2.1+default"
FAIL = "cu12.4.1-torch2.5.1+cu124-acc1.2.1+shm-off"
UNREADABLE = "cu12.4.1-torch2.5.1+cu124-acc1.2.1+net-only"  # the fixture's own corrupt record: left out here
RAW = ("attempts", 0, "raw")
FP = (*RAW, "phases", "fingerprint", "fingerprint")
ROW = (*RAW, "phases", "bandwidth", "rows", 2)

# name -> (cell id or "run.json", key path, the value put there)
FIELDS: dict[str, tuple[str, tuple, object]] = {
    "outcome a string": (PASS, ("outcome",), "pass"),
    "status null": (PASS, ("outcome", "status"), None),
    "status a list": (PASS, ("outcome", "status"), ["pass"]),
    "status unknown": (PASS, ("outcome", "status"), "passed"),
    "phase unknown": (HANG, ("outcome", "phase"), "nowhere"),
    "error class a number": (FAIL, ("outcome", "error_class"), 7),
    "error class unknown": (FAIL, ("outcome", "error_class"), "cosmic-ray"),
    "launcher unknown": (PASS, ("cell", "launcher"), "mpirun"),
    "seconds a string": (PASS, ("outcome", "seconds"), "30"),
    "seconds NaN": (PASS, ("outcome", "seconds"), float("nan")),
    "seconds Infinity": (PASS, ("outcome", "seconds"), float("inf")),
    "reason an object": (PASS, ("outcome", "reason"), {"x": 1}),
    "attempts a string": (PASS, ("attempts",), "x"),
    "attempt a string": (PASS, ("attempts", 0), "x"),
    "attempt number a string": (PASS, ("attempts", 0, "attempt"), "1"),
    "command an object list": (PASS, ("attempts", 0, "command"), [{"a": [1]}]),
    "raw a list": (PASS, RAW, []),
    "cell a list": (PASS, ("cell",), []),
    "cell id a number": (PASS, ("cell", "id"), 5),
    "env a list": (PASS, ("env",), ["NCCL_P2P_DISABLE=1"]),
    "env value an object": (PASS, ("env", "NCCL_P2P_DISABLE"), {"x": 1}),
    "image a string": (PASS, ("image",), "nccl-harness/x"),
    "busbw a string": (PASS, (*ROW, "busbw_gbs"), "fast"),
    "busbw NaN": (PASS, (*ROW, "busbw_gbs"), float("nan")),
    "busbw huge": (PASS, (*ROW, "busbw_gbs"), 1e308),
    "busbw negative": (PASS, (*ROW, "busbw_gbs"), -13.0),
    "bytes a string": (PASS, (*ROW, "bytes"), "256MiB"),
    "bytes past any float": (PASS, (*ROW, "bytes"), 10**400),
    "trials strings": (PASS, (*ROW, "busbw_trials"), ["a", "b"]),
    "rows a string": (PASS, (*RAW, "phases", "bandwidth", "rows"), "rows"),
    "row null": (PASS, (*RAW, "phases", "bandwidth", "rows", 0), None),
    "time per op huge": (PASS, (*ROW, "time_s"), 1e308),
    "fingerprint a string": (PASS, FP, "x"),
    "fingerprint env a list": (PASS, (*FP, "env"), []),
    "launcher change a string": (PASS, (*FP, "nccl_env_changed"), {"NCCL_P2P_DISABLE": "1"}),
    "gpus a string": (PASS, (*FP, "gpus"), "two"),
    "rank state a string": (PASS, (*RAW, "ranks", "0"), "teardown"),
    "phases a list": (PASS, (*RAW, "phases"), []),
    "phase seconds a string": (PASS, (*RAW, "phases", "init", "seconds"), "fast"),
    "stall a string": (HANG, (*RAW, "stall"), "x"),
    "ranks behind a string": (HANG, (*RAW, "stall", "ranks_behind"), "1"),
    "exit code a fraction": (PASS, (*RAW, "exit_code"), 1.5),
    "ended by unknown": (PASS, (*RAW, "ended_by"), "aliens"),
    "schema a string": (PASS, ("schema",), "1"),
    "rescue step a string": (PASS, ("attempts", 0, "step"), "p2p-off"),
    "rescue step value a number": (PASS, ("attempts", 0, "step"), {"name": "p2p-off", "env": {"NCCL_P2P_DISABLE": 1}}),
    "attempt kind unknown": (PASS, (*RAW, "kind"), "miracle"),
    "run.json host a list": ("run.json", ("host",), ["a", "b"]),
    "run.json hostname an object": ("run.json", ("host", "hostname"), {"a": 1}),
    "run.json engine a string": ("run.json", ("host", "engine"), "docker"),
    "run.json gpus numbers": ("run.json", ("gpus",), [0, 1]),
    "run.json cells a string": ("run.json", ("cells",), "x"),
    "run.json cell id a path": ("run.json", ("cells",), [{"id": "../../x"}]),
    "run.json matrix a list": ("run.json", ("matrix",), []),
}
# name -> (cell id or "run.json", the file's bytes; None: its first half)
FILES: dict[str, tuple[str, bytes | None]] = {
    "record empty": (PASS, b""),
    "record truncated": (PASS, None),
    "record a list": (PASS, b"[1, 2]"),
    "record NaN": (PASS, b"NaN"),
    "record not UTF-8": (PASS, b'{"schema": 1, "x": "\xff\xfe"}'),
    "record 100000 nested lists": (PASS, b"[" * 100_000 + b"]" * 100_000),
    "record 100000 nested objects": (PASS, b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
    "record nested 200 deep": (PASS, json.dumps({"schema": 1, "outcome": {"status": "pass", "detail": {
        "x": json.loads("[" * 200 + "]" * 200)}}}).encode()),
    "run.json empty": ("run.json", b""),
    "run.json 100000 nested lists": ("run.json", b"[" * 100_000 + b"]" * 100_000),
    "run.json a list": ("run.json", b"[]"),
}
DAMAGES = [*FIELDS, *FILES]


def _file(run: Path, target: str) -> Path:
    return run / "run.json" if target == "run.json" else run / "cells" / target / "record.json"


def _damage(run: Path, name: str) -> str:
    """Damage one file of `run` as `name` says; returns the file's name as messages give it."""
    if name in FIELDS:
        target, path, value = FIELDS[name]
        data = json.loads(_file(run, target).read_text())
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
        _file(run, target).write_text(json.dumps(data))
    else:
        target, content = FILES[name]
        whole = _file(run, target).read_bytes()
        _file(run, target).write_bytes(whole[: len(whole) // 2] if content is None else content)
    return "run.json" if target == "run.json" else f"cells/{target}/record.json"


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A results folder: `good` (the golden run without its own unreadable record) and one run per
    damage; name -> the damaged file."""
    root = tmp_path_factory.mktemp("damaged")
    good = root / "good"
    shutil.copytree(GOLDEN, good)
    shutil.rmtree(good / "cells" / UNREADABLE)
    run = json.loads((good / "run.json").read_text())
    run["cells"] = [c for c in run["cells"] if c["id"] != UNREADABLE]
    (good / "run.json").write_text(json.dumps(run))
    files = {}
    for n, name in enumerate(DAMAGES):
        shutil.copytree(good, root / f"d{n:02d}")
        files[name] = _damage(root / f"d{n:02d}", name)
    return root, files


@pytest.fixture(autouse=True)
def _hints(monkeypatch):
    monkeypatch.setenv("HARNESS_HINTS", str(HINTS))


def _call(capsys, fn) -> tuple[int, str]:
    code = guarded(fn)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_undamaged_run_reads_clean(damaged):
    root, _ = damaged
    data = results.load_run(root / "good")
    assert data.problems == {} and len(data.records) == 6


def test_there_are_at_least_thirty_damages():
    assert len(DAMAGES) >= 30


@pytest.mark.parametrize("name", DAMAGES)
def test_a_damaged_run_is_reported_compared_and_published_naming_the_file(damaged, name, capsys):
    root, files = damaged
    run = f"d{DAMAGES.index(name):02d}"
    file = files[name]
    problems = results.load_run(root / run).problems
    assert any(p.startswith(f"corrupt record {file}: ") for p in problems.values()), problems

    code, text = _call(capsys, lambda: commands.report(run, root))
    assert code == EXIT_OK and f"corrupt record {file}: " in text

    code, text = _call(capsys, lambda: commands.compare(run, "good", root))
    assert code == EXIT_OK and "## Unreadable records" in text and f"corrupt record {file}: " in text

    code, text = _call(capsys, lambda: commands.compare("good", run, root))
    damaged_cell = file != "run.json"  # the cell is missing from the new run: a regression
    assert code == (EXIT_CELLS_FAILED if damaged_cell else EXIT_OK) and f"corrupt record {file}: " in text

    code, text = _call(capsys, lambda: commands.publish(run, root / "docs", root))
    page = next((root / "docs").glob(f"*/{run}.md"))
    assert code == EXIT_OK and f"corrupt record {file}: " in page.read_text()
    assert page.resolve().is_relative_to((root / "docs").resolve())


def test_a_hostname_of_dots_publishes_inside_the_docs_tree(damaged, capsys):
    root, _ = damaged
    run = root / "dots"
    shutil.copytree(root / "good", run)
    facts = json.loads((run / "run.json").read_text())
    facts["host"]["hostname"] = ".."
    (run / "run.json").write_text(json.dumps(facts))
    code, _ = _call(capsys, lambda: commands.publish("dots", root / "docs-dots", root))
    assert code == EXIT_OK and [p.name for p in (root / "docs-dots").glob("*/dots.md")] == ["dots.md"]
    assert not (root / "dots.md").exists()


@pytest.mark.parametrize("args", [["report", "--run", "{run}"], ["compare", "good", "{run}"],
                                  ["publish", "--run", "{run}", "--to", "{root}/docs-cli"]])
def test_python_m_harness_names_the_damage_without_a_traceback(damaged, args):
    root, _files = damaged
    run = f"d{DAMAGES.index('run.json host a list'):02d}"
    nested = f"d{DAMAGES.index('record 100000 nested lists'):02d}"
    for damaged_run in (run, nested):
        argv = [a.format(run=damaged_run, root=root) for a in args]
        proc = subprocess.run([sys.executable, "-m", "harness", *argv, "--results", str(root)], cwd=REPO,
                              capture_output=True, text=True, timeout=120, env={**_env(), "HARNESS_HINTS": str(HINTS)})
        assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
        expected = EXIT_CELLS_FAILED if args[0] == "compare" and damaged_run == nested else EXIT_OK
        assert proc.returncode == expected, proc.stderr[-2000:]
        shown = proc.stdout if args[0] != "publish" else next(Path(root / "docs-cli").glob(f"*/{damaged_run}.md")).read_text()
        assert "corrupt record " in shown


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_resume_runs_a_cell_with_a_corrupt_record_again_and_says_so(tmp_path):
    pytest.importorskip("torch")
    from harness import matrix
    from harness.engines import host

    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.variant.name == "default" and c.launcher == "accelerate")
    run = tmp_path / "R"
    (run / "cells" / cell.id).mkdir(parents=True)
    (run / "cells" / cell.id / "record.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (run / "run.json").write_text(json.dumps({"schema": 1, "host": ["a", "b"]}))
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", "host", "--matrix",
                           str(matrix.DEFAULT_CPU_MATRIX), "--only", "variant=default", "--exclude", "launcher=torchrun",
                           "--results", str(tmp_path), "--run-id", "R", "--resume"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env={**_env(), "HARNESS_HINTS": str(HINTS)})
    assert proc.returncode == EXIT_OK and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert (f"--resume: corrupt record cells/{cell.id}/record.json: JSON nested too deeply (more than 64 levels); "
            "the cell runs again") in proc.stderr
    assert "--resume: corrupt record run.json: host should be an object, not list" in proc.stderr
    data = results.load_run(run)
    assert data.problems == {} and data.records[cell.id].status == "pass"
