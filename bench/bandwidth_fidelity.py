"""Bandwidth fidelity on GPUs: the harness's busbw against a reference outside it, on the same GPUs,
the same libnccl, the same NCCL variables and sizes. The reference is a torch-free all-reduce loop
through CuPy's NCCL binding (one process per GPU, nccl-tests' method: warm-up, N back-to-back
all-reduces, one synchronise, time = max over ranks). Target: ratio >= 0.95 from 256 MiB up.

With one GPU the ratio means nothing (a one-rank all-reduce moves no data), so the script reports
NCCL init time and prepare() time from the harness's record instead, and checks the reference loop
runs. Exits 1 when a target is missed.

    python3 bench/bandwidth_fidelity.py --gpus 0,1 [--json OUT]     # host engine, this Python's stack
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIZES = [1 << 20, 16 << 20, 256 << 20, 1 << 30]
TARGET, FROM_BYTES = 0.95, 256 << 20


def _rank(rank: int, world: int, uid, sizes: list[int], iters: int, warmup: int, queue) -> None:
    import cupy as cp
    from cupy.cuda import nccl

    cp.cuda.Device(rank).use()
    comm = nccl.NcclCommunicator(world, uid, rank)
    stream = cp.cuda.Stream.null
    rows = []
    for size in sizes:
        buf = cp.ones(size // 4, dtype=cp.float32)
        for _ in range(warmup):
            comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
        stream.synchronize()
        started = time.perf_counter()
        for _ in range(iters):
            comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
        stream.synchronize()
        rows.append((size, (time.perf_counter() - started) / iters))
    queue.put((rank, rows))


def reference(gpus: list[str], sizes: list[int], iters: int = 20, warmup: int = 5) -> dict[int, float]:
    """busbw (GB/s) per size from the CuPy/NCCL loop; time per size is the max over ranks."""
    from cupy.cuda import nccl

    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    world = len(gpus)
    uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, world, uid, sizes, iters, warmup, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    worst = {size: max(dict(rows)[size] for _, rows in results) for size in sizes}
    factor = 2 * (world - 1) / world
    return {size: size / t / 1e9 * factor for size, t in worst.items()}


def harness(gpus: list[str], sizes: list[int], work: Path) -> dict:
    """One cell through `invoke matrix` on the host engine, with the same sizes; returns its record."""
    matrix_path = work / "m.yaml"
    sizes_text = ", ".join(f'"{s}"' for s in sizes)
    matrix_path.write_text(
        'version: 1\nstacks:\n  matrix: {cuda: ["12.4.1"], torch: ["2.5.1"], accelerate: ["1.2.1"]}\n'
        f"variants: [default]\nlaunchers: [accelerate]\nbandwidth: {{sizes: [{sizes_text}], iters: 20, warmup: 5}}\n")
    argv = [sys.executable, "-m", "harness", "matrix", "--engine", "host", "--matrix", str(matrix_path),
            "--gpus", ",".join(gpus), "--results", str(work), "--run-id", "fidelity"]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"the harness cell failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (record,) = [json.loads(p.read_text()) for p in (work / "fidelity" / "cells").glob("*/record.json")]
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", required=True)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    gpus = args.gpus.split(",")
    work = Path(tempfile.mkdtemp(prefix="fidelity-"))
    record = harness(gpus, SIZES, work)
    raw = record["attempts"][-1]["raw"]
    phases = {p: round(v["seconds"], 3) for p, v in raw["phases"].items()}
    mine = {r["bytes"]: r["busbw_gbs"] for r in raw["phases"]["bandwidth"]["rows"]}
    ref = reference(gpus, SIZES)
    summary = {"gpus": gpus, "gpu_names": [g["name"] for g in raw["phases"]["fingerprint"]["fingerprint"]["gpus"]],
               "nccl_loaded": raw["phases"]["fingerprint"]["fingerprint"]["nccl_loaded"].get("version"),
               "nccl_init_s": phases.get("init"), "prepare_s": phases.get("prepare"), "phases_s": phases,
               "rows": [{"bytes": s, "harness_busbw": round(mine.get(s, 0), 2), "reference_busbw": round(ref[s], 2),
                         "ratio": round(mine[s] / ref[s], 3) if ref[s] else None} for s in SIZES]}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    if len(gpus) < 2:
        print("one GPU: no bus bandwidth to compare; NCCL init and prepare() times reported above")
        print("TARGETS MET" if record["outcome"]["status"] == "pass" else "TARGET MISSED")
        return 0 if record["outcome"]["status"] == "pass" else 1
    ok = all(r["ratio"] is not None and r["ratio"] >= TARGET for r in summary["rows"] if r["bytes"] >= FROM_BYTES)
    print("TARGETS MET" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
