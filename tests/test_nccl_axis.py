"""The NCCL axis without a GPU: the CUDA template, built on the local stand-in base with torch 2.14.1's
CUDA build (which pins nvidia-nccl-cu13 2.30.7), with another NCCL pinned through pip. Inside the
container the workload reads back what torch was compiled with and what the process really loaded:
they must differ, the pin must have won. ncclGetVersion needs no GPU. Heavy: torch's CUDA build pulls
about 3.3 GB of nvidia-* wheels that install to about 6 GB, and the wheel layer stays in the image
(classic builder, no RUN --mount), so the image is close to 10 GB; it is made for this test only
(test_images) and removed when the test ends."""

from __future__ import annotations

import json
import textwrap

import pytest

from harness import images, matrix
from harness.progress import Progress

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PINNED = "2.32.3"
TORCH_PINS = "2.30.7"


def test_pinned_pip_nccl_replaces_the_one_torch_bundles(engine, base_image, test_images, tmp_path, write_matrix):
    path = write_matrix(textwrap.dedent(f"""\
        version: 1
        stacks:
          include:
            - {{cuda: "13.0.1", torch: "2.14.1", accelerate: "1.15.0", nccl: "{PINNED}", base: "{base_image}"}}
        variants: [default]
        """))
    (stack,) = matrix.load(path).stacks
    assert stack.template == "cuda" and stack.nccl_via == "pip"
    built = images.build_all([stack], engine.client, images.BuildOptions(), tmp_path / "builds",
                             Progress())[stack.id]
    assert built.ok, built.reason
    out = tmp_path / "out"
    out.mkdir()
    result = engine.client.run_once(built.tag, ["python", "/opt/harness/workload/run.py", "--out", "/out", "--device", "cpu",
                                         "--skip-bandwidth"], timeout=300,
                             volumes={str(out): {"bind": "/out", "mode": "rw"}})
    assert result.exit_code == 0, result.output[-2000:]
    events = [json.loads(line) for line in (out / "events-rank0.jsonl").read_text().splitlines()]
    fingerprint = next(e for e in events if e.get("event") == "phase_end" and e["phase"] == "fingerprint")["fingerprint"]
    assert fingerprint["torch"] == "2.14.1+cu130"
    assert fingerprint["nccl_compiled"] == TORCH_PINS
    assert fingerprint["nccl_loaded"]["version"] == PINNED
    assert fingerprint["nccl_loaded"]["path"].endswith("site-packages/nvidia/nccl/lib/libnccl.so.2")
    assert events[-1]["event"] == "result" and events[-1]["status"] == "ok"
