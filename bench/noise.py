"""Noise against a real change, on this host: the same cells run twice must compare equal, and a run
with a real bandwidth cut must be a regression naming the cell and the size; the recommendation must
not turn noise into advice. Runs the command line itself (`python -m harness matrix` and `compare`).

    python3 bench/noise.py --gpus 0,1 --out OUT [--variants default,p2p-nvl] [--cut NCCL_MAX_NCHANNELS=1]

Run A and run B: the same cells. Run C: the same cells with the cut in the environment (inherited by
every rank, so the cells keep their ids). Expected: compare A B exits 0, compare A C exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from common import REPO, cell_matrix, host_matrix  # common puts the repo on sys.path

from harness import report, results  # noqa: E402


def _run(name: str, mfile: Path, res: Path, gpus: str, env: dict[str, str], log: Path) -> int:
    cmd = host_matrix(mfile, res, name, gpus)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200, env={**os.environ, **env})
    with open(log, "a") as sink:
        sink.write(f"\n$ {' '.join(cmd)}\n{done.stderr}")
    return done.returncode


def _compare(a: str, b: str, res: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "harness", "compare", a, b, "--results", str(res)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="", help="GPU ids; empty: the CPU matrix's stack with gloo ranks")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", default="default,p2p-nvl")
    ap.add_argument("--cut", default="NCCL_MAX_NCHANNELS=1", help="VAR=VALUE set for every rank of run C")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    res, log = args.out / "results", args.out / "runs.log"
    mfile = cell_matrix(args.out / "noise.yaml", bool(args.gpus), args.variants.split(","), bandwidth=True)
    key, _, value = args.cut.partition("=")
    codes = {name: _run(name, mfile, res, args.gpus, env, log)
             for name, env in (("A", {}), ("B", {}), ("C", {key: value}))}
    same, same_text = _compare("A", "B", res)
    cut, cut_text = _compare("A", "C", res)
    recs = {}
    for name in ("A", "B"):
        data = results.load_run(res / name)
        rows: dict = {}
        for record in data.records.values():
            rows.setdefault(record.row_key, {})[record.cell.variant] = record
        recs[name] = [report.recommend(cells, None) for cells in rows.values()]
    summary = {"runs_exit": codes, "compare_same_exit": same, "compare_cut_exit": cut, "cut": args.cut,
               "recommendations": recs, "compare_same": same_text, "compare_cut": cut_text}
    (args.out / "noise.json").write_text(json.dumps(summary, indent=1, default=str))
    print(same_text, "\n", cut_text)
    print(json.dumps({k: v for k, v in summary.items() if not k.startswith("compare_") or k.endswith("exit")},
                     indent=1, default=str))
    ok = same == 0 and cut == 1
    print("EXPECTED" if ok else "NOT AS EXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
