"""Golden files: a small run folder committed under tests/fixtures/golden-run (written by `build_run`
below through the real record types and results.write_json, so it stays in the real layout) and its
report under tests/golden/report.md, compared byte for byte. Rendering the same run twice gives the
same bytes (the report takes its time from run.json, not the clock).

After an intended change to the record layout or the report: UPDATE_GOLDEN=1 python -m pytest
tests/test_report_golden.py, then review the diff of tests/fixtures and tests/golden."""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest

from harness import report, results
from harness.images import BuildResult
from harness.matrix import Cell, Stack, Variant
from harness.outcome import classify
from harness.record import AttemptRecord, CellFields, CellRecord, RawAttempt, Stall, build_error, not_applicable

from .goldens import assert_golden

HERE = Path(__file__).parent
RUN = HERE / "fixtures" / "golden-run"
HINTS = HERE / "fixtures" / "golden-hints.yaml"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

# torch with a local version: a cell id holds more than one "+", so ids cannot be parsed back
STACK = Stack(cuda="12.4.1", torch="2.5.1+cu124", accelerate="1.2.1", base="nvidia/cuda:12.4.1-runtime-ubuntu22.04",
              python="3.10", torch_index="https://download.pytorch.org/whl/cu124", template="cuda")
NO_WHEEL = Stack(cuda="12.6.3", torch="2.5.1", accelerate="1.2.1", base="nvidia/cuda:12.6.3-runtime-ubuntu22.04",
                 python="3.10", torch_index="https://download.pytorch.org/whl/cu126", template="cuda")
PINNED = Stack(cuda="12.4.1", torch="2.8.0", accelerate="1.10.0", nccl="2.21.5", nccl_via="pip",
               base="nvidia/cuda:12.4.1-runtime-ubuntu22.04", python="3.10",
               torch_index="https://download.pytorch.org/whl/cu124", template="cuda")
DEFAULT = Variant("default")
P2P_OFF = Variant("p2p-off", (("NCCL_P2P_DISABLE", "1"),))
SHM_OFF = Variant("shm-off", (("NCCL_SHM_DISABLE", "1"),))
NET_ONLY = Variant("net-only", (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1")))

HANG = Cell(STACK, DEFAULT)
PASS = Cell(STACK, P2P_OFF)
FAIL = Cell(STACK, SHM_OFF)
CORRUPT = Cell(STACK, NET_ONLY)
TORCHRUN = Cell(STACK, P2P_OFF, "torchrun")
NA = Cell(NO_WHEEL, DEFAULT, na_reason="torch 2.5.1 has no wheel for CUDA 12.6 (cu126 starts at 2.6.0)")
BUILD = Cell(PINNED, DEFAULT)
CELLS = [HANG, PASS, FAIL, CORRUPT, TORCHRUN, NA, BUILD]
GPUS = ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"]


def _fingerprint(cell: Cell, changed: dict | None = None) -> dict:
    return {"phase": "fingerprint", "seconds": 3.2, "fingerprint": {
        "python": "3.10.12", "torch": "2.5.1+cu124", "accelerate": "1.2.1", "nccl_compiled": "2.21.5",
        "nccl_loaded": {"version": "2.21.5", "path": "/opt/venv/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"},
        "driver": {"version": "550.54.15", "source": "/proc/driver/nvidia/version"},
        "device_count": 2, "gpus": [{"index": i, "name": n, "capability": "8.9"} for i, n in enumerate(GPUS)],
        "peer_access": [{"src": 0, "dst": 1, "claimed": True, "verified": True}],
        "shm": {"bytes": 34359738368}, "memlock": {"soft": "unlimited", "hard": "unlimited"},
        "env": dict(cell.variant.env), "nccl_env_changed": changed or {}, "launcher": cell.launcher}}


def _rows(scale: float, trials: bool = True) -> list[dict]:
    """Bandwidth rows as the workload writes them: with repeated trials (median, every trial, min and
    max, torch's eager latency, the timing mode, wrong elements), or as older records hold them."""
    rows = []
    for size, t, eager_us in ((1 << 20, 120e-6, 135.5), (16 << 20, 1.1e-3, 1120.0), (256 << 20, 16.5e-3, 16530.0)):
        busbw = size / t / 1e9 * scale
        row = {"bytes": size, "dtype": "float32", "iters": 20, "time_s": t, "algbw_gbs": size / t / 1e9,
               "busbw_gbs": busbw, "first_call_s": 0.0021}
        if trials:
            spread = [round(busbw * f, 4) for f in (0.99, 1.0, 1.006)]
            row |= {"busbw_trials": spread, "busbw_min": min(spread), "busbw_max": max(spread), "eager_us": eager_us,
                    "timing": "cuda-graph", "wrong": 0}
        rows.append(row)
    return rows


def _rank(phase: str, done: list[str], error: dict | None = None, busbw: float | None = None) -> dict:
    result = None if busbw is None else {"event": "result", "status": "ok", "wrong_total": 0, "largest_busbw_gbs": busbw}
    return {"phase": phase, "in_phase": result is None, "phases_done": done, "pid": 100, "events": 12,
            "error": error, "result": result}


ALL = ["fingerprint", "init", "prepare", "step", "check", "bandwidth", "teardown"]


def _nccl(transports: dict, warnings: tuple[str, ...] = ()) -> dict:
    return {"version": "2.21.5", "transports": transports, "p2p_disabled": [], "env": {}, "warnings": list(warnings),
            "errors": [], "init_complete": True}


def _raw(cell: Cell, **kw) -> RawAttempt:
    kw = {"seconds": 30.0, "started_wall": 1768471200.0, "out_dir": f"results/golden-run/cells/{cell.id}/attempt-1"} | kw
    return RawAttempt(cell.id, "docker", 1, 2, **kw)


def _record(cell: Cell, raw: RawAttempt) -> CellRecord:
    argv = ("accelerate", "launch", "--num_processes", "2", "/opt/harness/workload/run.py", "--out", "/out")
    attempt = AttemptRecord(1, classify(raw), raw, argv)
    return CellRecord.of(cell, attempt.outcome, [attempt], {"tag": f"nccl-harness/{cell.stack.id}:0123456789ab",
                                                           "id": "sha256:feedface"})


def _passing(cell: Cell, scale: float, trials: bool = True) -> CellRecord:
    rows = _rows(scale, trials)
    phases = {p: {"phase": p, "seconds": 0.5} for p in ALL}
    phases["fingerprint"] = _fingerprint(cell)
    phases["bandwidth"] = {"phase": "bandwidth", "seconds": 2.4, "rows": rows, "bus_factor": 1.0}
    busbw = rows[-1]["busbw_gbs"]
    return _record(cell, _raw(cell, ended_by="exited", exit_code=0, phases=phases,
                              ranks={"0": _rank("teardown", ALL, busbw=busbw), "1": _rank("teardown", ALL, busbw=busbw)},
                              nccl={"0": _nccl({"SHM": 2}), "1": _nccl({"SHM": 2})}))


def build_run(folder: Path) -> None:
    """Write the fixture run (run.json and a record per cell) the way `invoke matrix` writes them."""
    if folder.exists():
        shutil.rmtree(folder)
    results.write_json(folder / "run.json", {
        "run_id": folder.name, "started": "2026-01-15T10:00:00+0000",
        "host": {"hostname": "rtx-box", "os": "Ubuntu 22.04.4 LTS", "kernel": "6.5.0-35-generic", "driver": "550.54.15",
                 "gpus": GPUS, "topo": None, "topo_p2p_read": None, "harness_version": "0.1.0",
                 "git_commit": "0123456789ab",
                 "engine": {"name": "docker", "version": "27.1.1", "api": "1.46", "runtimes": ["nvidia", "runc"]}},
        "engine": "docker", "gpus": ["0", "1"], "harness_version": "0.1.0",
        "matrix": {"path": "matrix.yaml", "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                   "timeouts": {}, "bandwidth_sizes": [1 << 20, 16 << 20, 256 << 20]},
        "cells": [CellFields.from_cell(c).to_json() for c in CELLS],
    })
    hang_phases = {"fingerprint": _fingerprint(HANG), "init": {"phase": "init", "seconds": 1.1}}
    hang = _record(HANG, _raw(
        HANG, ended_by="stall", seconds=131.0, phases=hang_phases,
        stall=Stall("prepare", 120.0, 121.4, (1,), {1: "silent for 119s (stopped or frozen)"}).to_json(),
        ranks={"0": _rank("prepare", ["fingerprint", "init"]), "1": _rank("prepare", ["fingerprint", "init"])},
        nccl={"0": _nccl({"P2P": 2}), "1": _nccl({"P2P": 2})},
        forensics={"stacks": {"0": "Thread 0x1 (most recent call first):\n  File \"ddp.py\", line 1 in broadcast"}}))
    fail_phases = {"fingerprint": _fingerprint(FAIL)}
    error = {"phase": "init", "error_class": "nccl", "type": "DistBackendError",
             "message": "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error | NCCL version 2.21.5",
             "wall": 1768471210.0}
    fail = _record(FAIL, _raw(
        FAIL, ended_by="exited", exit_code=1, phases=fail_phases,
        ranks={"0": _rank("init", ["fingerprint"], error), "1": _rank("init", ["fingerprint"], error | {"wall": 1768471211.0})},
        launcher_tail="torch.distributed.DistBackendError: NCCL error\nERROR: accelerate launch failed",
        nccl={"0": _nccl({}, ("NCCL WARN Error while creating shared memory segment",))}))
    built = BuildResult(PINNED.id, f"nccl-harness/{PINNED.id}:0123456789ab", "build-error",
                        "pip install failed: No matching distribution for nvidia-nccl-cu12==2.21.5", 42.0,
                        f"results/golden-run/builds/{PINNED.id}.log")
    for record in (hang, _passing(PASS, 0.8), fail, _passing(TORCHRUN, 0.75, trials=False), not_applicable(NA), build_error(BUILD, built)):
        results.save_record(folder.parent, folder.name, record)
    corrupt = results.cell_dir(folder.parent, folder.name, CORRUPT.id) / "record.json"
    corrupt.write_text('{"schema": 1, "cell": {"id": "' + CORRUPT.id + '"}, "outcome": "pass"}\n')


def _compare(expected: Path, actual: bytes) -> None:
    """A fixture file byte for byte, with a readable diff when they differ (UPDATE_GOLDEN=1 rewrites it)."""
    if UPDATE:
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_bytes(actual)
        return
    want = expected.read_bytes() if expected.exists() else b""
    if want != actual:
        diff = "".join(difflib.unified_diff(want.decode(errors="replace").splitlines(True),
                                            actual.decode(errors="replace").splitlines(True),
                                            f"{expected} (golden)", "rendered now", n=2))
        pytest.fail(f"{expected} differs from what the harness writes now; if the change is intended, rerun with "
                    f"UPDATE_GOLDEN=1 and review the diff.\n{diff}", pytrace=False)


@pytest.fixture
def fixture_hints(monkeypatch):
    """A hints file of the fixture's own, so that edits to the packaged hints leave the golden report alone."""
    monkeypatch.setenv("HARNESS_HINTS", str(HINTS))


def test_fixture_run_is_what_the_harness_writes(tmp_path):
    """The committed fixture is exactly what build_run writes now through the real record types."""
    fresh = tmp_path / RUN.name
    build_run(fresh)
    if UPDATE:
        build_run(RUN)
    written = sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(RUN) for p in RUN.rglob("*") if p.is_file())
    assert written == committed
    for rel in written:
        _compare(RUN / rel, (fresh / rel).read_bytes())


def test_report_of_the_fixture_run_matches_the_golden_file(fixture_hints):
    data = results.load_run(RUN)
    assert set(data.problems) == {CORRUPT.id}
    assert data.problems[CORRUPT.id].startswith(f"corrupt record cells/{CORRUPT.id}/record.json: outcome should be an object")
    text = report.render(data)
    assert report.render(results.load_run(RUN)) == text  # no clock, no local path: the same bytes every time
    assert_golden("report.md", text)


def test_the_corrupt_cell_is_placed_by_its_fields_from_run_json(fixture_hints):
    text = report.render(results.load_run(RUN))
    row = next(l for l in text.splitlines() if l.startswith("| 12.4.1 | 2.21.5 (bundled) | 2.5.1+cu124 | 1.2.1 | accelerate |"))
    assert "❓ missing (note" in row and row.count(" | ") == 9  # 10 columns: 5 keys, 4 variants, the recommendation


def test_an_old_run_json_with_ids_only_names_the_cell_but_does_not_place_it(tmp_path, fixture_hints):
    old = tmp_path / "old"
    shutil.copytree(RUN, old)
    run = results.load_run(old).run
    results.write_json(old / "run.json", {k: v for k, v in run.items() if k != "schema"}
                       | {"cells": [c["id"] for c in run["cells"]]})
    shutil.rmtree(old / "cells" / CORRUPT.id)  # missing now, and known only by its id in run.json
    data = results.load_run(old)
    assert data.problems == {CORRUPT.id: "no record.json (the cell never finished, or the run was stopped first)"}
    text = report.render(data)
    assert f"Unreadable records: `{CORRUPT.id}`: no record.json" in text
    assert "❓ missing" not in text
    head = next(l for l in text.splitlines() if l.startswith("| CUDA |"))
    assert "net-only" not in head
