"""NCCL / Accelerate compatibility harness: build one image per software stack, run the canonical
workload in each under NCCL environment variants, and collate the outcomes.

Data flows one way, each stage a value that can be printed:

    matrix.yaml --matrix.load--> Matrix --selection.resolve--> [Cell]       (invoke list)
    Cell.stack --images.render/build_all (engines.docker)--> image tag      (invoke build)
    Cell --runner.spec_for--> CellSpec --supervise (an engine)--> Attempt   (raw: events, logs, forensics)
    Attempt --outcome.classify--> Outcome --record--> results/<run>/cells/<id>/record.json
    records --report / compare / publish--> markdown, plots, regression diff

pipeline.run drives the middle for `invoke matrix`; commands.py holds the thin faces of every command.
"""

import os
from pathlib import Path

__version__ = "0.1.0"

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout: matrix files, images/, results/
WORKLOAD_DIR = Path(__file__).resolve().parent / "workload"  # copied into every image; run as-is by the host engine
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nccl-harness"  # hashes, bytecode
