"""Builds and cells overlapped (issue 22): on a fresh host, how soon the first verdict comes and how long the
whole run takes, against the harness before (every image built before the first cell ran). Each run is
`python -m harness matrix` over matrix-cpu.yaml's two stacks (two variants, the Accelerate launcher: 2 cells
per image, gloo on the CPU), both images built from scratch: the run's harness gets an image repository and
a label of its own (as tests/conftest.py's test_images does), so that no image and no layer of a cache serves
it; its images are removed after it, and only those. Times are those of the progress lines as they arrive
(plain output): the last `STACK: built in` line, the first `CELL: PASS` line, and the command's end.

    git archive e747a17 harness images | tar -x -C /tmp/before   # the harness before the overlap
    python bench/overlap.py --before /tmp/before --pairs 3 [--json docs/overlap.json]

Runs are interleaved (before, after, before, ...), so that drift on a shared machine hits both alike, and
ratios are per pair. Targets: after, the first verdict comes before the second image is built in every
run; the whole run is no slower (median ratio after/before <= 1.0)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import CPU_STACK as FIRST_STACK  # matrix-cpu.yaml's first stack: its image is built first
from common import REPO, verdict

LABEL = "io.nccl-harness.bench"
# the harness of `tree` with its own image repository and label: a fresh build, whatever the engine has cached
FRESH = """import sys
from harness import images
images.IMAGE_REPO = "nccl-harness-bench"
labels_of = images.labels_of
images.labels_of = lambda stack: labels_of(stack) | {sys.argv[1]: sys.argv[2]}
from harness.cli import main
raise SystemExit(main(sys.argv[3:]))
"""
BUILT = re.compile(r"^\[\d+/\d+\] (\S+): built in ")
VERDICT = re.compile(r"^\[\d+/\d+\] (\S+\+\S+): [A-Z-]+ - ")


def one(tree: Path, work: Path, name: str) -> dict[str, float]:
    """One run from scratch: seconds from its start to the last image built, to the first verdict, to its end."""
    token = uuid.uuid4().hex[:12]
    argv = [sys.executable, "-c", FRESH, LABEL, token, "matrix", "--engine", "docker", "--matrix", str(REPO / "matrix-cpu.yaml"),
            "--exclude", "launcher=torchrun", "--results", str(work / "results"), "--run-id", name]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.monotonic()
    built: list[float] = []
    verdicts: list[float] = []
    lines: list[str] = []
    try:
        with subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            assert proc.stderr is not None
            for line in proc.stderr:
                now = time.monotonic() - started
                lines.append(line)
                if BUILT.match(line):
                    built.append(now)
                elif VERDICT.match(line):
                    verdicts.append(now)
        ended = time.monotonic() - started
    finally:
        _remove(token)
    if proc.returncode != 0 or len(built) != 2 or len(verdicts) != 4:
        raise SystemExit(f"{name}: exit {proc.returncode}, {len(built)} image(s) built, {len(verdicts)} verdict(s)\n"
                         + "".join(lines[-40:]))
    # what running beside the second build costs the first image's cells on this CPU (they share its cores)
    from harness.results import load_run

    first = [r for k, r in load_run(work / "results" / name).records.items() if k.startswith(FIRST_STACK)]
    return {"first image built": built[0], "second image built": built[1], "first verdict": verdicts[0],
            "last verdict": verdicts[-1], "whole run": ended,
            "first image's cells, s": sum(r.outcome.seconds for r in first if r.outcome) / len(first),
            "first image's cells, busbw GB/s": sum(r.busbw_at(None)[1] for r in first if r.busbw_at(None)) / len(first)}


def _remove(token: str) -> None:
    """Every image the run made (its label: the layers of its builds too), newest first, so that a child goes
    before its parent (an untagged parent goes with its last child); nothing else."""
    import docker

    client = docker.from_env(timeout=600)
    made = client.images.list(all=True, filters={"label": f"{LABEL}={token}"})
    for image in sorted(made, key=lambda i: i.attrs["Created"], reverse=True):
        try:
            client.images.remove(image.id, force=True)
        except docker.errors.ImageNotFound:
            pass


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(ordered[len(ordered) // 2], 3), "min": round(ordered[0], 3), "max": round(ordered[-1], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="a folder holding the harness/ before the overlap")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="overlap-bench-"))
    trees = {"before": args.before.resolve(), "after": REPO}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for n in range(args.pairs):
        for name, tree in trees.items():
            runs[name].append(one(tree, work, f"{name}-{n}"))
            print(name, n, json.dumps({k: round(v, 1) for k, v in runs[name][-1].items()}), flush=True)
    keys = list(runs["after"][0])
    summary: dict = {"pairs": args.pairs, "runs": runs,
                     **{name: {k: spread([r[k] for r in rows]) for k in keys} for name, rows in runs.items()},
                     "ratio after/before (per pair)": {k: spread([a[k] / b[k] for a, b in zip(runs["after"], runs["before"])])
                                                       for k in ("first verdict", "whole run", "first image's cells, s",
                                                                 "first image's cells, busbw GB/s")},
                     "after: second image built less first verdict (s)": spread(
                         [r["second image built"] - r["first verdict"] for r in runs["after"]])}
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    early = all(r["first verdict"] < r["second image built"] for r in runs["after"])
    return verdict(early and summary["ratio after/before (per pair)"]["whole run"]["median"] <= 1.0)


if __name__ == "__main__":
    raise SystemExit(main())
