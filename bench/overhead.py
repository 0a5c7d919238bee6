"""Per-cell overhead of the harness: the same CPU cell in the same image, run (a) through
`invoke matrix --only <cell>` and (b) as the bare `docker run ... accelerate launch ...` line the
harness prints with --dry-run; pairs interleaved, medians compared. Target: a/b <= 1.15.
Also the breakdown of a cell's time, from the harness's own record.

    python bench/overhead.py --pairs 5 --wheelhouse .cache/wheels [--json docs/overhead.json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from pathlib import Path

from common import CPU_CELL, CPU_STACK, invoke, median, timed, verdict

TARGET = 1.15


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--wheelhouse", default=".cache/wheels")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="overhead-"))
    select = ["--matrix", "matrix-cpu.yaml", "--only", CPU_CELL, "--wheelhouse", args.wheelhouse]
    timed(invoke("build", "--matrix", "matrix-cpu.yaml", "--only", f"stack={CPU_STACK}", "--wheelhouse",
                 args.wheelhouse, "--results", str(work / "build")))
    _, dry = timed(invoke("matrix", "--dry-run", *select, "--results", str(work / "bare"), "--run-id", "bare"))
    bare_line = next(l for l in dry.stdout.splitlines() if l.startswith("docker run "))
    harness_s, bare_s, records = [], [], []
    for i in range(args.pairs):
        seconds, _ = timed(invoke("matrix", *select, "--results", str(work / "h"), "--run-id", f"h{i}"))
        harness_s.append(seconds)
        records.append(json.loads((work / "h" / f"h{i}" / "cells" / CPU_CELL / "record.json").read_text()))
        argv = shlex.split(bare_line)
        vol = argv.index("-v") + 1
        argv[vol] = f"{work / 'bare' / str(i)}:/out"
        seconds, _ = timed(argv)
        bare_s.append(seconds)
        print(f"pair {i + 1}/{args.pairs}: harness {harness_s[-1]:.2f}s, bare docker run {bare_s[-1]:.2f}s", flush=True)
    ratio = median(harness_s) / median(bare_s)
    raw = records[len(records) // 2]["attempts"][-1]["raw"]
    first_event = min(json.loads(Path(raw["out_dir"], f"events-rank{r}.jsonl").read_text().splitlines()[0])["wall"]
                      for r in (0, 1))
    phases = {p: round(v["seconds"], 3) for p, v in raw["phases"].items()}
    breakdown = {
        "container start to the first event (launcher, python start)": round(first_event - raw["started_wall"], 3),
        **{f"phase {p}": s for p, s in phases.items()},
        "cell under supervision (total)": round(raw["seconds"], 3),
        "harness outside the cell (invoke, matrix, engine, records, report)": round(
            median(harness_s) - raw["seconds"], 3),
    }
    summary = {"pairs": args.pairs, "harness_median_s": round(median(harness_s), 3),
               "bare_median_s": round(median(bare_s), 3), "ratio": round(ratio, 3), "target": TARGET,
               "breakdown": breakdown, "harness_s": harness_s, "bare_s": bare_s}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return verdict(ratio <= TARGET)


if __name__ == "__main__":
    raise SystemExit(main())
