"""Real NCCL failures provoked only through NCCL's own variables, on whatever GPUs there are (one is
enough), through the host engine: what the report then says of each (issue 23: hints and advice judged
on real logs that are in no test and no thread). Nothing is injected: each variable is one a user sets.

    python bench/real_errors.py --gpus 0 --out OUT

Scenarios (each one cell of the GPU matrix's first stack, Accelerate's launcher):
1. `bad-ifname`: NCCL_SOCKET_IFNAME names an interface that does not exist (P2P and SHM off).
   Expected: fail in init, class nccl, the hint `nccl-no-socket-interface` certain.
2. `bad-topo`: NCCL_TOPO_FILE names a malformed topology file (written into OUT).
   Expected: fail, class nccl; the topology hint or the graph/topology advice.
3. `bad-algo`: NCCL_ALGO names no algorithm. Expected: NCCL refuses it (fail) or ignores it (pass);
   either way no certain hint of an unrelated cause.
4. `default`: a pass, no hint.

Writes OUT/real-errors.json: per cell its status, phase, class, reason, the hints (certain or possible)
and the advice's subsystems; prints one line per cell.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import REPO, cell_matrix, host_matrix  # common puts the repo on sys.path

from harness import advice, hints, results
from harness.selection import check_gpus

SCENARIOS = ("bad-ifname", "bad-topo", "bad-algo", "default")


def _define(topo: Path) -> str:
    return f"""  variants:
    bad-ifname:
      env: {{NCCL_SOCKET_IFNAME: nosuchif0, NCCL_P2P_DISABLE: "1", NCCL_SHM_DISABLE: "1"}}
      description: bootstrap over a socket interface that does not exist
    bad-topo:
      env: {{NCCL_TOPO_FILE: "{topo}"}}
      description: a topology file NCCL cannot read
    bad-algo:
      env: {{NCCL_ALGO: nosuchalgo}}
      description: an algorithm NCCL does not have
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", default="0", help="GPU ids (one is enough)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    gpus = check_gpus(args.gpus)
    args.out.mkdir(parents=True, exist_ok=True)
    topo = args.out / "bad-topo.xml"
    topo.write_text('<system version="1">\n  <cpu numaid="0" affinity="ffff"\n    <pci busid=\n')  # cut mid-tag
    mfile = cell_matrix(args.out / "real-errors.yaml", True, list(SCENARIOS), define=_define(topo.resolve()))
    res = args.out / "results"
    cmd = host_matrix(mfile, res, "errors", ",".join(gpus), "--control", "never", "--timeout", "init=60")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    (args.out / "matrix.log").write_text(proc.stdout + proc.stderr)
    rows = []
    for cell_id, record in sorted(results.load_run(res / "errors").records.items()):
        out = record.outcome
        matched = hints.match(record)
        found = advice.advise(record, matched=matched)
        row = {"cell": cell_id, "status": out.status, "phase": out.phase, "error_class": out.error_class,
               "reason": (out.reason or "")[:300],
               "hints": [{"id": m.hint.id, "certain": m.certain} for m in matched],
               "advice": [s.name for s in found.subsystems] if found else []}
        rows.append(row)
        print(f"{row['cell']}: {row['status']} phase={row['phase']} class={row['error_class']} "
              f"hints={[(h['id'], 'certain' if h['certain'] else 'possible') for h in row['hints']]} "
              f"advice={row['advice']}\n    {row['reason'][:200]}")
    (args.out / "real-errors.json").write_text(json.dumps({"gpus": list(gpus), "exit": proc.returncode,
                                                          "cells": rows}, indent=2))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
