"""Hand-built runs with bandwidth rows, made through the real record types (matrix cells, RawAttempt,
CellRecord, RunData), for the compare, recommendation and plot tests: new rows with repeated trials
(as the workload writes them now) and older rows without."""

from __future__ import annotations

import statistics
from pathlib import Path

from harness import results
from harness.matrix import Cell, Stack, Variant
from harness.record import AttemptRecord, CellRecord, Outcome, RawAttempt

GIB = 1 << 30
H200 = Stack(cuda="13.0", torch="2.11.0", accelerate="1.15.0", base="host", python="3.12", template="cuda")
CPU = Stack(cuda="cpu", torch="2.13.0", accelerate="1.15.0", base="harness-base:bookworm", python="3.11", template="cpu")
CPU_OLD_ACC = Stack(cuda="cpu", torch="2.13.0", accelerate="0.34.2", base="harness-base:bookworm", python="3.11",
                    template="cpu")
VARIANTS = {v.name: v for v in (Variant("default"), Variant("p2p-off", (("NCCL_P2P_DISABLE", "1"),)),
                                Variant("p2p-nvl", (("NCCL_P2P_LEVEL", "NVL"),)),
                                Variant("net-only", (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"))))}


def row(size: int, trials: list[float] | None = None, busbw: float | None = None) -> dict:
    """A bandwidth row: with `trials`, the new layout (medians over trials, min, max, eager latency,
    timing, wrong); with `busbw` alone, an older record's row (no trials: spread unknown)."""
    median = statistics.median(trials) if trials else busbw
    time_s = size / median / 1e9  # two ranks: busbw = algbw
    data = {"bytes": size, "dtype": "float32", "iters": 20, "time_s": time_s, "algbw_gbs": median, "busbw_gbs": median,
            "first_call_s": 0.35}
    if trials:
        data |= {"busbw_trials": list(trials), "busbw_min": min(trials), "busbw_max": max(trials),
                 "eager_us": time_s * 1e6 + 15.0, "timing": "cuda-graph", "wrong": 0}
    return data


def cell_record(stack: Stack, variant: str, rows: list[dict] | None = None, status: str = "pass",
                launcher: str = "accelerate", others: dict[str, list[dict]] | None = None) -> CellRecord:
    """A cell's record as runner.run_cell writes it, read back from its JSON; `others`: the sweep's other
    collectives' rows by name."""
    cell = Cell(stack, VARIANTS[variant], launcher)
    phases = {"bandwidth": {"phase": "bandwidth", "seconds": 2.0, "rows": rows or []}} if rows else {}
    if others:
        phases["bandwidth"]["collectives"] = {name: {"rows": [dict(r, collective=name) for r in found]}
                                              for name, found in others.items()}
    raw = RawAttempt(cell.id, "docker", 1, 2, ended_by="exited", exit_code=0 if status == "pass" else 1, phases=phases)
    outcome = Outcome(status, "busbw" if status == "pass" else f"{status} in prepare",
                      phase=None if status == "pass" else "prepare")
    record = CellRecord.of(cell, outcome, [AttemptRecord(1, outcome, raw, ("accelerate", "launch"))])
    return CellRecord.from_json(record.to_json())


def run_data(name: str, records: list[CellRecord], host: str = "h200-box") -> results.RunData:
    return results.RunData(Path("/results") / name, {"run_id": name, "host": {"hostname": host, "driver": "580.159.04"}},
                           {r.id: r for r in records}, {})


def save_run(root: Path, name: str, records: list[CellRecord], host: str = "h200-box") -> Path:
    """Write a run folder the way `invoke matrix` does (run.json and a record.json per cell)."""
    results.write_json(root / name / "run.json", {"run_id": name, "started": "2026-01-15T10:00:00+0000",
                                                  "host": {"hostname": host, "driver": "580.159.04"}})
    for record in records:
        results.save_record(root, name, record)
    return root / name
