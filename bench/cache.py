"""Cache and re-run cost. (1) A second `invoke matrix` over an unchanged matrix builds nothing; the time
spent deciding that, per image, must stay under 0.5 s. (2) Wall time against the number of NCCL
variants (1, 2, 4, 8) on one image: each added variant should cost about one cell, nothing more
(target: slope <= 1.25 x the median cell time). (3) What --jobs saves on a forced rebuild.

    python bench/cache.py --wheelhouse .cache/wheels [--no-jobs] [--json docs/cache.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from common import REPO, invoke, median, timed, verdict

DECIDE_TARGET_S = 0.5
SLOPE_TARGET = 1.25


def variants_matrix(path: Path, n: int) -> None:
    names = [f"v{i}" for i in range(1, n + 1)]
    defines = "\n".join(f"    {v}: {{env: {{NCCL_DEBUG_SUBSYS: INIT}}, description: \"same cell, another name\"}}" for v in names)
    path.write_text(
        "version: 1\nstacks:\n  matrix:\n    cuda: [\"cpu\"]\n    torch: [\"2.13.0\"]\n    accelerate: [\"1.15.0\"]\n"
        f"variants: [{', '.join(names)}]\nlaunchers: [accelerate]\ndefine:\n  variants:\n{defines}\n"
        "bandwidth:\n  sizes: [\"4K\", \"64K\", \"1M\", \"16M\"]\n  iters: 10\n  warmup: 2\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheelhouse", default=".cache/wheels")
    ap.add_argument("--no-jobs", action="store_true", help="skip the --jobs rebuild comparison (slow)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cache-bench-"))
    wh = ["--wheelhouse", args.wheelhouse]

    # (1) deciding that nothing needs building
    timed(invoke("build", "--matrix", "matrix-cpu.yaml", *wh, "--results", str(work / "warm")))
    from harness import images, matrix
    from harness.engines.dockerclient import DockerClient
    from harness.progress import Progress

    stacks = list(matrix.load(REPO / "matrix-cpu.yaml").stacks)
    docker = DockerClient.connect()
    started = time.monotonic()
    built = images.build_all(stacks, docker, images.BuildOptions(wheelhouse=Path(args.wheelhouse).resolve()),
                             work / "decide", Progress())
    per_image = (time.monotonic() - started) / len(stacks)
    nothing_built = all(r.status == "cached" for r in built.values())
    second_s, second = timed(invoke("matrix", "--matrix", "matrix-cpu.yaml", "--only", "variant=default",
                                    "--exclude", "launcher=torchrun", *wh, "--results", str(work / "second")))
    second_built = second.stderr.count(": built in")
    print(f"deciding per image: {per_image:.3f}s; second invoke matrix built {second_built} image(s)", flush=True)

    # (2) growth with the number of variants
    walls, cells = {}, []
    for n in (1, 2, 4, 8):
        path = work / f"v{n}.yaml"
        variants_matrix(path, n)
        walls[n], _ = timed(invoke("matrix", "--matrix", str(path), *wh, "--results", str(work / "grow"),
                                   "--run-id", f"n{n}"))
        for rec in (work / "grow" / f"n{n}" / "cells").glob("*/record.json"):
            cells.append(json.loads(rec.read_text())["outcome"]["seconds"])
        print(f"{n} variant(s): {walls[n]:.1f}s", flush=True)
    xs = list(walls)
    mean_x, mean_y = sum(xs) / len(xs), sum(walls.values()) / len(xs)
    slope = sum((x - mean_x) * (walls[x] - mean_y) for x in xs) / sum((x - mean_x) ** 2 for x in xs)
    cell_s = median(cells)

    # (3) --jobs on a forced rebuild of the two CPU images
    jobs = {}
    if not args.no_jobs:
        for j in (1, 2):
            jobs[j], _ = timed(invoke("build", "--matrix", "matrix-cpu.yaml", *wh, "--rebuild", "--jobs", str(j),
                                      "--results", str(work / f"jobs{j}")))
            print(f"rebuild with --jobs {j}: {jobs[j]:.1f}s", flush=True)

    summary = {"decide_per_image_s": round(per_image, 3), "decide_target_s": DECIDE_TARGET_S,
               "second_run_built": second_built, "second_run_wall_s": round(second_s, 2),
               "wall_by_variants_s": {k: round(v, 2) for k, v in walls.items()}, "slope_s_per_variant": round(slope, 2),
               "median_cell_s": round(cell_s, 2), "slope_target_x_cell": SLOPE_TARGET,
               "rebuild_s_by_jobs": {k: round(v, 1) for k, v in jobs.items()}}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return verdict(per_image <= DECIDE_TARGET_S and nothing_built and second_built == 0
                   and slope <= SLOPE_TARGET * cell_s)


if __name__ == "__main__":
    raise SystemExit(main())
