"""The harness's peak memory while a cell's ranks write gigabytes (issue 22, item 4): a plain CPU cell
against the same cell whose ranks, through a site's sitecustomize.py on the variant's PYTHONPATH
(tests/hostile_site.py), each write MB megabytes to stdout, MB megabytes of NCCL lines to their NCCL
debug file and, as they exit, an MB-megabyte event line without a newline. Before issue 22 this took
the harness to 2.3 GB; a plain run peaks at about 55 MB. Target: the flooded cell's harness under 200 MB.

The harness runs in a process of its own (`python -m harness matrix` on the host engine) and reports its
own peak resident size (getrusage RUSAGE_SELF: the ranks are other processes). Each kind runs TRIALS
times, interleaved; figures are median [min-max]. Exits 1 when the target is missed or a cell does not pass.

    python bench/hostile_memory.py [--mb 600] [--trials 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_MB = 200
RUN = ("import json, resource, sys\n"
       "from harness.cli import main\n"
       "code = main(sys.argv[2:], binary='python -m harness')\n"
       "json.dump({'code': code, 'peak_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, open(sys.argv[1], 'w'))\n")


def matrix_text(site: Path, mb: int) -> str:
    return f"""version: 1
stacks:
  matrix: {{cuda: ["cpu"], torch: ["2.13.0"], accelerate: ["1.15.0"]}}
variants: [plain, floods]
launchers: [accelerate]
define:
  variants:
    plain: {{env: {{PYTHONPATH: "{site}"}}}}
    floods: {{env: {{PYTHONPATH: "{site}", HOSTILE: floods, FLOOD_MB: "{mb}"}}}}
timeouts: {{fingerprint: 120, init: 120, prepare: 120, step: 60, check: 60, bandwidth: 120, teardown: 60, cell: 1200}}
bandwidth: {{sizes: ["4K"], iters: 2, warmup: 1, trials: 2}}
ranks: 2
"""


def one(root: Path, variant: str, trial: int) -> dict:
    out = root / f"{variant}-{trial}.json"
    results = root / "results"
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", RUN, str(out), "matrix", "--engine", "host", "--matrix", str(root / "m.yaml"),
                    "--only", f"*+{variant}", "--results", str(results), "--run-id", f"{variant}-{trial}"],
                   cwd=REPO, capture_output=True, text=True, timeout=3600, check=False)
    found = json.loads(out.read_text())
    cells = results / f"{variant}-{trial}" / "cells"
    (record,) = cells.glob("*/record.json")
    status = json.loads(record.read_text())["outcome"]["status"]
    disk = sum(p.stat().st_size for p in cells.rglob("*") if p.is_file())
    launcher = sum(p.stat().st_size for p in cells.rglob("launcher.log"))
    shutil.rmtree(results / f"{variant}-{trial}")  # gigabytes each
    return {"variant": variant, "trial": trial, "code": found["code"], "status": status, "peak_mb": found["peak_kb"] / 1024,
            "seconds": time.monotonic() - started, "attempt_bytes": disk, "launcher_log_bytes": launcher}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=600, help="megabytes each rank writes to each of its three outputs")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hostile-memory-"))
    try:
        site = root / "site"
        site.mkdir()
        shutil.copy(REPO / "tests" / "hostile_site.py", site / "sitecustomize.py")
        (root / "m.yaml").write_text(matrix_text(site, args.mb))
        rows = [one(root, variant, trial) for trial in range(args.trials) for variant in ("plain", "floods")]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    by = {v: [r for r in rows if r["variant"] == v] for v in ("plain", "floods")}
    for variant, got in by.items():
        print(f"{variant:>6}: harness peak {spread([r['peak_mb'] for r in got])} MB, "
              f"cell {spread([r['seconds'] for r in got])} s, "
              f"attempt folder {spread([r['attempt_bytes'] / 2**20 for r in got])} MiB (the ranks' own files; the launcher's "
              f"output, capped, {spread([r['launcher_log_bytes'] / 2**20 for r in got])} MiB), "
              f"statuses {[r['status'] for r in got]}")
    ratios = [f["peak_mb"] / p["peak_mb"] for p, f in zip(by["plain"], by["floods"])]
    print(f"flooded / plain peak, per trial pair: {spread(ratios)}; each rank wrote {3 * args.mb} MB "
          f"({6 * args.mb} MB in all)")
    worst = max(r["peak_mb"] for r in by["floods"])
    ok = worst < TARGET_MB and all(r["status"] == "pass" for r in rows)
    print(f"target: flooded harness peak < {TARGET_MB} MB: {'met' if ok else 'MISSED'} (worst {worst:.1f} MB)")
    if args.json:
        args.json.write_text(json.dumps({"mb": args.mb, "rows": rows, "ratios": ratios, "target_mb": TARGET_MB, "met": ok},
                                        indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
