"""What a hang's forensics say on real GPUs (issue 24 items 1 and 2): the collective each rank was in
(torch's flight recorder) and every thread's native stack (eu-stack or gdb), NCCL's own threads among
them. Host engine, the default variant of the GPU matrix's stack as installed here, one rank per GPU.

    python bench/hang_forensics.py --gpus 0 --out OUT

1. `held`: every rank is held at the start of `check` (the workload's test-only --hold-at) and never
   released: alive, in no collective; the flight records show the collectives done before it, all
   completed (on NCCL).
2. `stopped`: the last rank is stopped (SIGSTOP) as it starts `check`, the others released into check's
   all-reduce: a hang naming it, its native stack taken while it is stopped (NCCL's proxy threads and
   torch's watchdog are C++ threads: py-spy never shows them).
In both, NCCL's RAS service (NCCL >= 2.24) is asked for its status where a rank answers.
Each scenario's verdict, flight line, and where each rank's main thread was, with the threads that
matter, land in OUT/hang-forensics.json; the records in OUT/results.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import cell_matrix, stop_rank  # common puts the repo on sys.path

from harness import matrix, matrixfile, nativestack, outcome, runner  # noqa: E402
from harness.engines import host  # noqa: E402
from harness.engines.host import HostEngine  # noqa: E402
from harness.selection import check_gpus  # noqa: E402

TIMEOUTS = matrixfile.Timeouts(fingerprint=120, init=120, prepare=120, step=60, check=10, bandwidth=120,
                               teardown=30, cell=600)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0", help="GPU ids (one rank each), or none for gloo ranks on the CPU")
    ap.add_argument("--ranks", type=int, default=0, help="ranks (default: one per GPU, 2 on the CPU)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    gpus = () if args.gpus == "none" else check_gpus(args.gpus)
    ranks = args.ranks or (len(gpus) or 2)
    args.out.mkdir(parents=True, exist_ok=True)
    res = args.out / "results"
    m = matrix.load(cell_matrix(args.out / "hang-forensics.yaml", bool(gpus), ["default"]))
    m = matrix.Matrix(**{**m.__dict__, "timeouts": TIMEOUTS})
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.launcher == "accelerate")
    summary: dict = {"gpus": list(gpus), "ranks": ranks, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    for name in ("held", "stopped"):
        on_event, on_start = stop_rank(ranks - 1, "check", res / name) if name == "stopped" else (None, None)
        opts = runner.RunOptions(name, res, gpus, ranks, extra_args=("--hold-at", "check"),
                                 extra_env=(("HARNESS_TEST_FAULTS", "1"),))
        kwargs = {"on_event": on_event, "on_start": on_start} if on_event else {}
        record = runner.run_cell(HostEngine(), cell, m, opts, **kwargs)
        raw = record.last_raw
        native = raw.forensics.native or {}
        line = {"status": record.outcome.status, "phase": record.outcome.phase, "reason": record.outcome.reason,
                "flight": outcome.flight_text(raw),
                "flight_entries": {r: [(e.op, e.seq, e.state) for e in d.entries[-6:]]
                                   for r, d in (raw.forensics.flight or {}).items()},
                "where": {r: nativestack.where(t) for r, t in native.items()},
                "threads": {r: [(t.tid, t.matters, t.frames[:3]) for t in nativestack.ordered(t)] for r, t in native.items()},
                "shown": {r: nativestack.shown(t) for r, t in native.items()},
                "ras": raw.forensics.ras}
        summary[name] = line
        print(f"\n== {name}: {line['status']} in {line['phase']}\n   {line['reason']}", flush=True)
        print(f"-- NCCL's RAS service:\n{raw.forensics.ras or '(none answered)'}", flush=True)
        for r, text in sorted(line["shown"].items()):
            print(f"-- rank {r} native ({line['where'][r]}):\n{text}", flush=True)
        for r, text in native.items():
            (args.out / f"native-{name}-rank{r}.txt").write_text(text)
    (args.out / "hang-forensics.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
