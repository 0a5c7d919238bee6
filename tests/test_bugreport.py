"""`invoke bugreport CELL` (issue 24, item 5): the body of an upstream bug report for one recorded cell,
from the record alone. Golden files of its shape for the golden run's hang and failure (in NCCL's and
PyTorch's template order), each tracker's section order, NCCL's log cut around its first WARN, secrets
masked in the command it shows, and bad input refused with the flag and the fix. The real hang (a rank
stopped in a real container) is in tests/test_hang_advice.py, the real failure with secrets in its
environment in tests/test_secrets.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import bugreport, commands, results
from harness.errors import HarnessError

from .goldens import assert_golden

HERE = Path(__file__).parent
RUN = HERE / "fixtures" / "golden-run"
HINTS = HERE / "fixtures" / "golden-hints.yaml"
HANG = "cu12.4.1-torch2.5.1+cu124-acc1.2.1+default"
FAIL = "cu12.4.1-torch2.5.1+cu124-acc1.2.1+shm-off"
TITLES = {"failed": "What failed", "environment": "Environment", "variables": "NCCL variables",
          "reproduction": "Reproduction", "key_lines": "Key lines", "stacks": "Stacks", "nccl_log": "NCCL log",
          "diagnosis": "What the harness found"}


@pytest.fixture(autouse=True)
def golden_hints(monkeypatch):
    monkeypatch.setenv("HARNESS_HINTS", str(HINTS))


def body(cell: str, template: str = "nccl", logs: dict[str, str] | None = None, run: Path = RUN) -> str:
    return bugreport.render(results.load_run(run), cell, template, bugreport.Logs(logs or {}))


@pytest.mark.parametrize("cell,template", [(HANG, "nccl"), (FAIL, "pytorch")], ids=["hang-nccl", "fail-pytorch"])
def test_the_body_of_the_golden_runs_hang_and_failure(cell, template):
    assert_golden(f"bugreport-{template}-{'hang' if cell == HANG else 'fail'}.md", body(cell, template))


@pytest.mark.parametrize("template", sorted(bugreport.TEMPLATES))
def test_sections_come_in_the_trackers_order(template):
    text = body(HANG, template)
    found = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    # a section with nothing to say is left out (the golden hang has no NCCL log), never out of order
    assert found == [TITLES[s] for s in bugreport.TEMPLATES[template] if TITLES[s] in found]
    assert {"What failed", "Environment", "Reproduction", "Key lines", "Stacks", "What the harness found"} <= set(found)


def test_the_hang_names_the_rank_behind_and_shows_its_stack_first():
    text = body(HANG)
    stacks = text.split("## Stacks", 1)[1].split("\n## ", 1)[0]
    assert "Ranks behind when the hang was declared: 1." in stacks
    assert "No stack of rank 1 was taken." in stacks  # the golden hang kept rank 0's only
    assert "invoke matrix --matrix matrix.yaml --gpus 0,1 --only 'cu12.4.1-torch2.5.1+cu124-acc1.2.1+default'" in text


def test_nccls_log_is_cut_around_its_first_warn():
    log = "\n".join([f"host:1:2 [0] NCCL INFO line {i}" for i in range(50)]
                    + ["host:1:2 [0] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-x"]
                    + [f"host:1:2 [0] NCCL INFO after {i}" for i in range(30)]
                    + ["host:1:2 [0] NCCL WARN a second one"])
    excerpt = bugreport.nccl_excerpt(log)
    assert excerpt is not None
    lines = excerpt.splitlines()
    assert len(lines) == bugreport.LOG_BEFORE + 1 + bugreport.LOG_AFTER
    assert lines[bugreport.LOG_BEFORE].endswith("failed to extend /dev/shm/nccl-x")
    assert lines[0].endswith(f"line {50 - bugreport.LOG_BEFORE}") and lines[-1].endswith(f"after {bugreport.LOG_AFTER - 1}")
    assert bugreport.nccl_excerpt("NCCL INFO only\n") is None
    text = body(FAIL, logs={"1": log})
    assert "rank 1, around the first WARN:" in text and "NCCL INFO line 29" not in text


def test_a_log_line_with_a_fence_does_not_close_its_block():
    text = body(FAIL, logs={"0": "NCCL WARN x\n````\n# not a heading\n"})
    block = text.split("rank 0, around the first WARN:", 1)[1]
    assert block.lstrip().startswith("`````")  # a longer fence than the line's four backticks


def test_secrets_in_the_recorded_command_are_masked(tmp_path):
    run = tmp_path / "golden-run"
    shutil.copytree(RUN, run)
    path = run / "cells" / FAIL / "record.json"
    data = json.loads(path.read_text())
    data["attempts"][-1]["command"] = ["docker", "run", "-e", "HF_TOKEN=hf_s3cret0815", "--env=NCCL_DEBUG=INFO",
                                       "-e", "NCCL_NET_PLUGIN_URL=https://alice:s3cret-url@plugins.example/x",
                                       "img", "python", "run.py"]
    path.write_text(json.dumps(data))
    text = body(FAIL, run=run)
    assert "hf_s3cret0815" not in text and "s3cret-url" not in text
    assert "HF_TOKEN=***" in text and "--env=NCCL_DEBUG=INFO" in text and "https://***@plugins.example/x" in text


def test_a_cell_not_in_the_run_or_a_template_not_known_is_refused():
    with pytest.raises(HarnessError, match=r"cell 'nope': not in run golden-run\. Fix: name a cell of this run"):
        body("nope")
    with pytest.raises(HarnessError, match=r"--for 'jira': no such template\. Fix: one of nccl, pytorch, accelerate"):
        body(HANG, "jira")


def test_the_command_line_writes_the_body_and_refuses_bad_input(tmp_path):
    out = tmp_path / "bug.md"
    assert commands.bugreport(HANG, str(RUN), RUN.parent, "accelerate", out) == 0
    assert out.read_text() == body(HANG, "accelerate")
    bad = subprocess.run([sys.executable, "-m", "harness", "bugreport", "nope", "--run", str(RUN)],
                         capture_output=True, text=True, timeout=120, cwd=HERE.parent)
    assert bad.returncode == 2, bad
    assert "cell 'nope'" in bad.stderr and "Fix:" in bad.stderr and "Traceback" not in bad.stderr
