"""Where a passing cell's wall time goes, on this host: one cell (the default matrix's first stack,
variant `default`, the Accelerate launcher, the matrix's own sweep) run N times through the command
line, each split into a timeline read from the ranks' own event files:

    python3 bench/cell_time.py --gpus 0,1 --runs 3 --out OUT [--before DIR]

  launch->start     the supervisor starting the launcher until the last rank's first event (the
                    launcher's and the ranks' interpreters and imports before main())
  <phase>           each phase, first phase_start to last phase_end over the ranks
  result->exit      the last rank's result event until the supervisor saw the attempt end
  harness           the command's wall time less the supervised attempt (imports, checks, report)

`--before DIR` runs a second copy of the harness (for example `git archive <rev> harness | tar -x -C
DIR`) interleaved with this one, so that before and after are measured in one run on the same
machine; the ratios after/before are printed with their spread. Target (issue 12): a passing 2-GPU
cell in at most 10 s under supervision.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from common import REPO, cell_matrix, host_matrix  # common puts the repo on sys.path

TARGET_S = 10.0


def _events(attempt: Path) -> list[dict]:
    rows = []
    for path in sorted(attempt.glob("events-rank*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return rows


def timeline(attempt_json: Path, command_s: float) -> dict[str, float]:
    """Seconds per step of one attempt, from attempt.json and the ranks' events (wall clock)."""
    attempt = json.loads(attempt_json.read_text())
    events = _events(attempt_json.parent)
    start, seconds = attempt["started_wall"], attempt["seconds"]
    firsts = {}
    for e in events:
        firsts.setdefault(e["rank"], e["wall"])
    out = {"command": command_s, "supervised": seconds, "harness": command_s - seconds,
           "launch->start": max(firsts.values()) - start}
    phases: dict[str, list[float]] = {}
    for e in events:
        if e.get("event") in ("phase_start", "phase_end"):
            phases.setdefault(e["phase"], []).append(e["wall"])
    for name, walls in phases.items():
        out[name] = max(walls) - min(walls)
    results = [e["wall"] for e in events if e.get("event") == "result"]
    if results:
        out["result->exit"] = start + seconds - max(results)
    return out


def one(repo: Path, mfile: Path, res: Path, run_id: str, gpus: str, engine: str = "host") -> dict[str, float]:
    cmd = host_matrix(mfile, res, run_id, gpus)
    if engine != "host":  # the same command on another engine (--image: the docker engine, the image's cell)
        cmd[cmd.index("--engine") + 1] = engine
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600, env=env)
    command_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{run_id}: exit {done.returncode}\n{done.stderr[-3000:]}")
    (attempt_json,) = (res / run_id).glob("cells/*/attempt-1/attempt.json")
    return timeline(attempt_json, command_s)


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": ordered[len(ordered) // 2], "min": ordered[0], "max": ordered[-1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="", help="GPU ids; empty: the CPU matrix's stack with gloo ranks")
    ap.add_argument("--runs", type=int, default=4, help="per harness; the first is reported apart")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--before", type=Path, help="a folder holding an older harness/ to measure beside this one")
    ap.add_argument("--image", help="a user's image holding the host's stack: also run the cell in a container of it "
                                    "(docker engine, an `image:` stack), interleaved, with the ratios container/host")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    mfile = cell_matrix(args.out / "cell.yaml", bool(args.gpus), ["default"], bandwidth=True)
    # name: (harness folder, matrix file, engine)
    repos = {"after": (REPO, mfile, "host"), **({"before": (args.before.resolve(), mfile, "host")} if args.before else {})}
    if args.image:
        image_file = args.out / "image.yaml"
        image_file.write_text("\n".join(
            l if not l.startswith("  matrix:") else f'  include:\n    - {{image: "{args.image}", name: image}}'
            for l in mfile.read_text().splitlines()) + "\n")
        repos["container"] = (REPO, image_file, "docker")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in repos}
    for n in range(args.runs):
        for name, (repo, matrix_file, engine) in repos.items():  # interleaved: drift on a shared machine hits both alike
            runs[name].append(one(repo, matrix_file, args.out / "results", f"{name}-{n}", args.gpus, engine))
            print(name, n, json.dumps({k: round(v, 3) for k, v in runs[name][-1].items()}), flush=True)
    summary: dict = {"gpus": args.gpus, "runs": args.runs, "target_supervised_s": TARGET_S}
    # the first run of each fills the page cache (and, after issue 12, the bytecode cache): apart
    first, runs = {name: rows[0] for name, rows in runs.items()}, {name: rows[1:] or rows for name, rows in runs.items()}
    summary["first run (cold caches)"] = first
    for name, rows in runs.items():
        keys = list(dict.fromkeys(k for row in rows for k in row))
        summary[name] = {k: spread([row[k] for row in rows if k in row]) for k in keys}
    if "before" in runs:
        summary["ratio after/before (per pair, first runs apart)"] = {
            k: spread([a[k] / b[k] for a, b in zip(runs["after"], runs["before"]) if b.get(k) and k in a])
            for k in ("command", "supervised", "launch->start", "fingerprint", "init", "prepare", "result->exit")}
    if "container" in runs:
        summary["ratio container/host (per pair, first runs apart)"] = {
            k: spread([a[k] / b[k] for a, b in zip(runs["container"], runs["after"]) if b.get(k) and k in a])
            for k in ("command", "supervised", "launch->start", "fingerprint", "init", "prepare", "bandwidth",
                      "result->exit")}
    (args.out / "cell-time.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    met = summary["after"]["supervised"]["median"] <= TARGET_S
    print("TARGET MET" if met else "TARGET MISSED", f"(supervised median {summary['after']['supervised']['median']:.2f} s)")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
