"""Builds and cells overlapped on the real engine, as on a fresh host: matrix-cpu.yaml's two stacks built
from scratch (this test's own tags and label, test_images: no image and no layer of a cache serves them),
one after the other as --jobs 1 builds them; the first image's cell runs while the second image builds,
so its verdict comes before the second image is ready. The second build is a real one (pip installs
torch 2.13.0 and Accelerate 0.34.2 from the wheel store, about half a minute on the 2-core machine),
against a cell of about 5 s: the margin is a build, no sleep. The rules themselves: tests/test_schedule.py."""

from __future__ import annotations

import json

import pytest

from harness import commands, matrix
from harness.pipeline import MatrixOptions
from harness.record import CellRecord
from harness.results import load_run
from harness.selection import Selection

from .conftest import TEST_REPO

pytestmark = [pytest.mark.engine, pytest.mark.slow]

FIRST, SECOND = "cpu-torch2.13.0-acc1.15.0", "cpu-torch2.13.0-acc0.34.2"  # matrix-cpu.yaml's order


def _verdict(record: CellRecord) -> float:
    raw = record.attempts[-1].raw
    return raw.started_wall + raw.seconds


def test_the_first_verdict_comes_before_the_second_image_is_built(engine, base_image, test_images, tmp_path, capsys):
    selection = Selection(matrix.DEFAULT_CPU_MATRIX, only=("variant=default",), exclude=("launcher=torchrun",))
    code = commands.run_matrix(selection, MatrixOptions(engine="docker", results=tmp_path, run_id="fresh"))
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    run = tmp_path / "fresh"
    built = json.loads((run / "builds.json").read_text())["images"]
    assert {k: (v["status"], v["tag"].split("/")[0]) for k, v in built.items()} == {
        FIRST: ("built", TEST_REPO), SECOND: ("built", TEST_REPO)}
    ready = {k: v["started_wall"] + v["seconds"] for k, v in built.items()}
    records = load_run(run).records
    first, second = records[f"{FIRST}+default"], records[f"{SECOND}+default"]
    assert first.status == second.status == "pass"
    assert ready[FIRST] < _verdict(first) < ready[SECOND] < _verdict(second), (ready, _verdict(first), err[-3000:])
    lines = err.splitlines()
    said = [next(n for n, l in enumerate(lines) if l.startswith(start)) for start in (
        f"[1/2] {FIRST}: built in", f"[2/2] building {SECOND}", f"[1/2] {FIRST}+default: PASS", f"[2/2] {SECOND}: built in",
        f"[2/2] {SECOND}+default: PASS")]
    assert said == sorted(said), err[-3000:]
    assert engine.client.leftovers() == []
