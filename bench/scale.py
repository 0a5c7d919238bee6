"""The default GPU matrix on paper: its cells and images, and the wall time and disk they will take,
from per-cell costs measured here and on the H200 (docs/*.json), and what --jobs saves on builds.

    python bench/scale.py [--cell-s S] [--gpus N]
"""

from __future__ import annotations

import argparse
import json

from common import REPO

DOCS = REPO / "docs"
# pip payload of one CUDA 13 stack (torch 2.14.1 + its nvidia-* wheels as on PyPI, 2.74 GB compressed,
# measured on this machine's wheel store); installed it takes about twice that, plus the base image.
CUDA_WHEELS_GB = 2.74
BASE_IMAGE_GB = 3.0  # nvidia/cuda:*-runtime-ubuntu22.04, compressed layers about 1.2 GB, extracted about 3 GB
DOWNLOAD_GBPS = 0.1  # 100 MB/s: a typical site link; builds are download-bound


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell-s", type=float, help="seconds per GPU cell (default: measured on the H200)")
    ap.add_argument("--gpus", type=int, default=2, help="GPUs per cell: bandwidth sweeps to 2 GiB take longer on more")
    args = ap.parse_args()
    from harness import matrix

    m = matrix.load(REPO / "matrix.yaml")
    stacks = {c.stack.id for c in m.runnable}
    h200 = json.loads((REPO / "tests" / "data" / "h200-preload-record.json").read_text())
    measured = h200["outcome"]["seconds"]
    overhead = json.loads((DOCS / "overhead.json").read_text()) if (DOCS / "overhead.json").exists() else {}
    outside = overhead.get("breakdown", {}).get("harness outside the cell (invoke, matrix, engine, records, report)", 1.0)
    # a real all-reduce sweep to 2 GiB on 2+ GPUs at about 300 GB/s adds well under a second per size;
    # container start and CUDA init dominate: take the H200's one-GPU cell plus 5 s of margin
    cell_s = args.cell_s or measured + 5.0
    run_s = len(m.runnable) * cell_s + outside
    image_gb = CUDA_WHEELS_GB * 2
    download_s, install_s = CUDA_WHEELS_GB / DOWNLOAD_GBPS, 60.0  # install: measured about 40 s for the CPU image's 0.2 GB
    build_s = len(stacks) * (download_s + install_s)
    jobs4_s = max(len(stacks) * download_s, len(stacks) * install_s / 4)
    print(f"default GPU matrix: {len(m.cells)} cells, {len(m.runnable)} to run on {len(stacks)} images, "
          f"{len(m.cells) - len(m.runnable)} n/a")
    print(f"per cell: {cell_s:.0f} s (H200 one-GPU cell measured at {measured:.1f} s, plus margin for sweeps on {args.gpus} GPUs)")
    print(f"cells: {run_s / 60:.0f} min run one at a time (they share GPUs, so never in parallel)")
    print(f"images: about {image_gb:.1f} GB of pip layers each on top of a shared base of about {BASE_IMAGE_GB:.0f} GB per"
          f" CUDA version: about {len(stacks) * image_gb + 4 * BASE_IMAGE_GB:.0f} GB of disk for the whole matrix")
    print(f"first build: about {build_s / 60:.0f} min one at a time at {DOWNLOAD_GBPS * 1000:.0f} MB/s "
          f"({download_s:.0f} s download + about {install_s:.0f} s install per image); with --jobs 4 the downloads share "
          f"the link and the installs overlap them: about {jobs4_s / 60:.0f} min (the link's {len(stacks) * download_s / 60:.0f} "
          "min is the floor)")
    print("a second run builds nothing (see bench/cache.py): its cost is the cells alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
