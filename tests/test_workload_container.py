"""The canonical workload inside a real container built from the CPU template: two gloo ranks through
each launcher, every phase recorded in the rank files on the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import launch, matrix

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PHASES = ["fingerprint", "init", "prepare", "step", "check", "bandwidth", "teardown"]


def _events(out: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (out / f"events-rank{rank}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("launcher", ["accelerate", "torchrun"])
def test_two_gloo_ranks_run_every_phase_in_a_container(engine, cpu_image, tmp_path, launcher):
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    cell = next(c for c in m.cells if c.launcher == launcher and c.variant.name == "p2p-off"
                and c.stack.accelerate == "1.15.0")
    spec = launch.launch(cell, m, ranks=2)
    out = tmp_path / "out"
    out.mkdir()
    result = engine.client.run_once(
        cpu_image,
        list(spec.argv),
        timeout=300,
        environment={**spec.env_dict, "HF_HOME": "/tmp/hf"},
        volumes={str(out): {"bind": launch.CONTAINER_OUT, "mode": "rw"}},
        labels={"io.nccl-harness.cell": cell.id},
    )
    assert result.exit_code == 0, result.output[-3000:]

    fingerprints = []
    for rank in (0, 1):
        events = _events(out, rank)
        assert events[0]["event"] == "start" and events[-1]["event"] == "result"
        assert events[-1]["status"] == "ok"
        marks = [(e["event"], e["phase"]) for e in events if e["event"] in ("phase_start", "phase_end")]
        assert marks == [(kind, p) for p in PHASES for kind in ("phase_start", "phase_end")]
        ends = {e["phase"]: e for e in events if e["event"] == "phase_end"}
        assert all(ends[p]["seconds"] >= 0 for p in PHASES)
        assert ends["init"]["backend"] == "gloo" and ends["init"]["world_size"] == 2
        assert ends["prepare"]["distributed_type"] == "MULTI_CPU"
        assert ends["check"]["wrong_total"] == 0 and len(ends["check"]["checks"]) >= 4
        rows = ends["bandwidth"]["rows"]
        assert [r["bytes"] for r in rows] == list(m.bandwidth_sizes)
        for row in rows:
            assert row["busbw_gbs"] == pytest.approx(row["algbw_gbs"] * 2 * (2 - 1) / 2)
            assert row["time_s"] > 0 and row["first_call_s"] > 0 and row["iters"] == m.bandwidth_iters
        fingerprints.append(ends["fingerprint"]["fingerprint"])

    fp = fingerprints[0]
    assert fp["torch"] == "2.13.0+cpu" and fp["accelerate"] == "1.15.0"
    assert fp["launcher"] == launcher
    # the variant's variable reached the ranks unchanged
    assert fp["env"]["NCCL_P2P_DISABLE"] == "1"
    assert fp["nccl_env_changed"] == {}
    assert fp["shm"]["bytes"] > 0
    assert (out / "stacks-rank0.txt").exists() and (out / "pid-rank1").exists()
