"""Bandwidth fidelity on GPUs: the harness's busbw against nccl-tests' all_reduce_perf, built from
source here, on the same GPUs, the same libnccl (torch's own, through LD_LIBRARY_PATH), the same sizes,
in one run. Per size: nccl-tests' busbw in its default mode (eager launches) and with -G (CUDA graph),
the harness's busbw (median of its trials, with the min-max) and the ratios, and torch's eager per-call
latency (what DDP pays per call) as its own column. Target: harness / nccl-tests >= 0.95 from 64 KiB up.
Also prints where the cell's wall time goes, per phase. Exits 1 when a target is missed.

    python3 bench/bandwidth_fidelity.py --gpus 0,1 --nccl-tests .nccl-tests [--json OUT]

--nccl-tests is a checkout of NVIDIA/nccl-tests (built here with `make -j CUDA_HOME=/usr/local/cuda
NCCL_HOME=/usr`, about 2.5 minutes; a build already there is reused).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIN_BYTES, MAX_BYTES = 8 << 10, 1 << 30
TARGET, FROM_BYTES = 0.95, 64 << 10


def torch_nccl_dir() -> str:
    """The folder of the libnccl torch loads through its RPATH (the nvidia-nccl-cuXX wheel)."""
    import nvidia.nccl  # noqa: F401 - the wheel torch depends on

    (path,) = [p for p in nvidia.nccl.__path__]
    return str(Path(path) / "lib")


def build(src: Path) -> Path:
    binary = src / "build" / "all_reduce_perf"
    if not binary.exists():
        cuda = "/usr/local/cuda"
        started = time.monotonic()
        subprocess.run(["make", "-j", f"CUDA_HOME={cuda}", "NCCL_HOME=/usr"], cwd=src, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=900)
        print(f"built nccl-tests in {time.monotonic() - started:.0f} s", flush=True)
    return binary


def nccl_tests(binary: Path, gpus: list[str], graph: bool, iters: int, warmup: int, trials: int) -> dict[int, list]:
    """{bytes: [(time_us, busbw, wrong) per trial]} of the in-place columns, `trials` runs of the binary."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus), "LD_LIBRARY_PATH": torch_nccl_dir()}
    argv = [str(binary), "-b", str(MIN_BYTES), "-e", str(MAX_BYTES), "-f", "2", "-g", str(len(gpus)),
            "-n", str(iters), "-w", str(warmup)] + (["-G", "1"] if graph else [])
    rows: dict[int, list] = {}
    for _ in range(trials):
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=True).stdout
        for line in out.splitlines():
            cols = line.split()
            if len(cols) >= 13 and cols[0].isdigit():
                rows.setdefault(int(cols[0]), []).append((float(cols[-4]), float(cols[-2]), int(cols[-1])))
    return rows


def harness(gpus: list[str], sizes: list[int], work: Path, trials: int) -> dict:
    """One cell through `python -m harness matrix` on the host engine, with the same sizes."""
    matrix_path = work / "m.yaml"
    sizes_text = ", ".join(f'"{s}"' for s in sizes)
    matrix_path.write_text(
        'version: 1\nstacks:\n  matrix: {cuda: ["12.4.1"], torch: ["2.5.1"], accelerate: ["1.2.1"]}\n'
        f"variants: [default]\nlaunchers: [accelerate]\n"
        f"bandwidth: {{sizes: [{sizes_text}], iters: 20, warmup: 5, trials: {trials}}}\n")
    argv = [sys.executable, "-m", "harness", "matrix", "--engine", "host", "--matrix", str(matrix_path),
            "--gpus", ",".join(gpus), "--results", str(work), "--run-id", "fidelity"]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1200)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"the harness cell failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (record,) = [json.loads(p.read_text()) for p in (work / "fidelity" / "cells").glob("*/record.json")]
    record["_wall_s"] = wall
    return record


def _median(rows: list, i: int) -> float:
    return statistics.median(r[i] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", required=True)
    ap.add_argument("--nccl-tests", type=Path, required=True, help="an NVIDIA/nccl-tests source tree")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    gpus = args.gpus.split(",")
    if len(gpus) < 2:
        raise SystemExit("--gpus: bus bandwidth needs two or more GPUs")
    binary = build(args.nccl_tests.resolve())
    ref = nccl_tests(binary, gpus, False, 20, 5, args.trials)
    ref_graph = nccl_tests(binary, gpus, True, 20, 5, args.trials)
    sizes = sorted(ref)
    work = Path(tempfile.mkdtemp(prefix="fidelity-"))
    record = harness(gpus, sizes, work, args.trials)
    raw = record["attempts"][-1]["raw"]
    mine = {r["bytes"]: r for r in raw["phases"]["bandwidth"]["rows"]}
    fp = raw["phases"]["fingerprint"]["fingerprint"]
    rows = []
    for size in sizes:
        h, nt, ntg = mine.get(size, {}), ref[size], ref_graph.get(size, [])
        nt_bw, ntg_bw = _median(nt, 1), (_median(ntg, 1) if ntg else None)
        rows.append({
            "bytes": size, "nccl_tests_us": round(_median(nt, 0), 2), "nccl_tests_busbw": round(nt_bw, 2),
            "nccl_tests_busbw_range": [min(r[1] for r in nt), max(r[1] for r in nt)],
            "nccl_tests_graph_busbw": round(ntg_bw, 2) if ntg_bw else None,
            "harness_us": round(h.get("time_s", 0) * 1e6, 2), "harness_busbw": round(h.get("busbw_gbs") or 0, 2),
            "harness_busbw_range": [h.get("busbw_min"), h.get("busbw_max")], "harness_timing": h.get("timing"),
            "harness_eager_us": round(h["eager_us"], 2) if h.get("eager_us") else None,
            "wrong": h.get("wrong"), "nccl_tests_wrong": max(r[2] for r in nt),
            "ratio": round(h["busbw_gbs"] / nt_bw, 3) if h.get("busbw_gbs") and nt_bw else None,
            "ratio_graph": round(h["busbw_gbs"] / ntg_bw, 3) if h.get("busbw_gbs") and ntg_bw else None})
    summary = {"gpus": gpus, "gpu_names": [g["name"] for g in fp.get("gpus", [])],
               "nccl_loaded": (fp.get("nccl_loaded") or {}).get("version"), "nccl_tests_binary": str(binary),
               "trials": args.trials, "cell_wall_s": round(record["_wall_s"], 2),
               "cell_seconds": round(record["outcome"]["seconds"], 2),
               "phases_s": {p: round(v["seconds"], 3) for p, v in raw["phases"].items()}, "rows": rows}
    print(json.dumps(summary, indent=1))
    print(f"\n{'size':>10} {'nccl-tests us':>13} {'busbw':>8} {'-G busbw':>8} {'harness us':>10} {'busbw':>8} "
          f"{'ratio':>6} {'ratio -G':>8} {'eager us':>8}")
    for r in rows:
        print(f"{r['bytes']:>10} {r['nccl_tests_us']:>13} {r['nccl_tests_busbw']:>8} {r['nccl_tests_graph_busbw']!s:>8} "
              f"{r['harness_us']:>10} {r['harness_busbw']:>8} {r['ratio']!s:>6} {r['ratio_graph']!s:>8} "
              f"{r['harness_eager_us']!s:>8}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    ok = all(r["ratio"] is not None and r["ratio"] >= TARGET for r in rows if r["bytes"] >= FROM_BYTES)
    print("TARGETS MET" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
