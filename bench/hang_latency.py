"""Hang detection latency and false hangs, measured on real cells.

For each hang: run a cell whose ranks hold at the start of a random phase, stop one rank with SIGSTOP,
release, and let the supervisor find it. Latency = (time from the last progress event to the verdict)
minus the stall threshold; the target is <= 2 s at the 95th percentile. Healthy cells must never be
called hangs. Exits 1 when a target is missed.

    python bench/hang_latency.py --engine host --hangs 20 --healthy 10 [--gpus 0] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import engines, images, matrix, matrixfile, outcome, pipeline, runner, selection, supervise  # noqa: E402
from harness.progress import Progress  # noqa: E402

from common import stop_rank  # noqa: E402

PHASES = ("prepare", "step", "check", "bandwidth")
TARGET_P95_S = 2.0


def one(engine, m: matrix.Matrix, cell: matrix.Cell, opts: runner.RunOptions, image: str, out: Path,
        phase: str | None, rank: int) -> tuple[outcome.Outcome, supervise.RawAttempt]:
    extra = ("--hold-at", phase) if phase else ()
    ropts = runner.RunOptions(opts.run_id, opts.results, opts.gpus, opts.ranks, 0, extra, (("HARNESS_TEST_FAULTS", "1"),),
                              gpu_api=opts.gpu_api)
    spec = runner.spec_for(cell, m, engine, ropts, image, 1, out)
    fault, start = stop_rank(rank, phase, out) if phase else ((lambda r, e: None), (lambda running: None))
    record = supervise.supervise(engine, spec, m.timeouts, on_event=fault, on_start=start)
    assert not record.leftovers, record.leftovers
    return outcome.classify(record.to_json()), record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="host", choices=("host", "docker"))
    ap.add_argument("--matrix", default=None)
    ap.add_argument("--gpus", default=None, help="GPU ids (GPU cells); default: the CPU matrix with 2 gloo ranks")
    ap.add_argument("--hangs", type=int, default=20)
    ap.add_argument("--healthy", type=int, default=10)
    ap.add_argument("--threshold", type=float, default=5.0, help="stall threshold of every phase, seconds")
    ap.add_argument("--wheelhouse", type=Path, default=None, help="docker engine: build the cell's image from this wheelhouse")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    gpus = selection.check_gpus(args.gpus)
    path = args.matrix or (matrix.DEFAULT_GPU_MATRIX if gpus else matrix.DEFAULT_CPU_MATRIX)
    m = matrix.load(path)
    t = args.threshold
    m = matrix.Matrix(**{**m.__dict__, "timeouts": matrixfile.Timeouts(
        fingerprint=max(60, t), init=t, prepare=t, step=t, check=t, bandwidth=t, teardown=max(30, t), cell=600)})
    engine = engines.choose(args.engine, Progress())
    # a user's image (`image:` stack) is read first, as `invoke matrix` reads it
    cells = pipeline.read_images(engine, engine.cells(m, list(m.runnable), Progress()), m, Progress())
    cell = next(c for c in cells if c.launcher == "accelerate")
    image = ""
    if engine.builds_images and engine.builder is not None:
        built = images.build_all([cell.stack], engine.builder, images.BuildOptions(wheelhouse=args.wheelhouse),
                                 Path(tempfile.mkdtemp(prefix="hang-bench-build-")), Progress())[cell.stack.id]
        if not built.ok:
            raise SystemExit(f"cannot build {cell.stack.id}: {built.reason}")
        image = built.tag
    ranks = len(gpus) if gpus else m.ranks
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="hang-bench-"))
    # the docker engine's GPU cells: CDI or the NVIDIA runtime, probed once as `invoke matrix` does
    opts = runner.RunOptions("bench", work, gpus, m.ranks, gpu_api=engine.gpu_api(gpus, image))
    rows, false_hangs = [], 0
    for i in range(args.hangs):
        phase, rank = rng.choice(PHASES), rng.randrange(ranks)
        result, record = one(engine, m, cell, opts, image, work / f"hang-{i}", phase, rank)
        latency = record.verdict_after_progress - t
        found = record.forensics
        rows.append({"phase": phase, "rank": rank, "status": result.status, "hang_phase": result.phase,
                     "latency_s": round(latency, 3), "detect_s": round(record.stall.since_progress - t, 3)
                     if record.stall else None, "reason": result.reason,
                     "forensics": {"stacks_of_ranks": sorted(found.stacks or {}), "processes": bool(found.processes),
                                   "nccl_tail_of_ranks": sorted(found.nccl_tail or {})} if found else None})
        print(f"hang {i + 1}/{args.hangs}: stopped rank {rank} in {phase}: {result.status} in {result.phase}, "
              f"verdict {latency:.2f}s after the threshold", flush=True)
    for i in range(args.healthy):
        result, _ = one(engine, m, cell, opts, image, work / f"ok-{i}", None, 0)
        false_hangs += result.status == "hang"
        print(f"healthy {i + 1}/{args.healthy}: {result.status} ({result.reason})", flush=True)

    wrong = [r for r in rows if r["status"] != "hang" or r["hang_phase"] != r["phase"]]
    lat = sorted(r["latency_s"] for r in rows)
    p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))] if lat else 0.0
    summary = {"engine": engine.name, "cell": cell.id, "ranks": ranks, "threshold_s": t, "hangs": len(rows),
               "misclassified": len(wrong), "latency_p50_s": statistics.median(lat) if lat else None,
               "latency_p95_s": p95, "latency_max_s": lat[-1] if lat else None, "healthy": args.healthy,
               "false_hangs": false_hangs, "target_p95_s": TARGET_P95_S, "rows": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    ok = p95 <= TARGET_P95_S and not wrong and not false_hangs
    print("TARGETS MET" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
