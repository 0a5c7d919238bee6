"""NCCL / Accelerate compatibility harness: build one image per software stack, run the canonical
workload in each under NCCL environment variants, and collate the outcomes.

Data flows one way, each stage a value that can be printed:

    matrix.yaml --matrix.load--> Matrix --selection.resolve--> [Cell]           (invoke list)
    Cell.stack --images.render/build_all (engines.dockerclient)--> image tag    (invoke build)
    Cell --runner.spec_for--> CellSpec --supervise (an engine)--> RawAttempt    (evidence: typed rank states,
                                                                                 stall, NCCL logs, forensics)
    RawAttempt --outcome.classify--> Outcome --record.CellRecord--> results/<run>/cells/<id>/record.json
    records --report / compare / publish--> markdown, plots, regression diff

Between the stages the values are typed and frozen (codec.Model); JSON appears only at the file edge,
written and read from each model's one declaration. pipeline.run drives the middle for `invoke matrix`;
commands.py holds the thin faces of every command. The README's Layout lists the modules by stage.
"""

import os
from pathlib import Path

__version__ = "0.1.0"

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout: matrix files, images/, results/
WORKLOAD_DIR = Path(__file__).resolve().parent / "workload"  # copied into every image; run as-is by the host engine
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nccl-harness"  # hashes, bytecode
