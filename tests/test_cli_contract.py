"""The CLI's contract, for every bad flag or value, from both entry points (the real `invoke` binary in
the repo, which loads the root tasks.py, and `python -m harness`): exit 2, no traceback, the flag named,
a "Fix:", a did-you-mean where the typo is close to a real name, and the same answer from both but for
the binary's name. Every case fails while the flags are checked, before an engine is asked or a
folder is written, so the table needs no Docker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import REPO

# The console script installed beside this Python (what `invoke` on the PATH runs), else the PATH's.
INVOKE = str(Path(sys.executable).with_name("invoke")) if Path(sys.executable).with_name("invoke").exists() \
    else shutil.which("invoke")
FRONTS = {"invoke": [INVOKE], "python -m harness": [sys.executable, "-m", "harness"]}

# (argv, words the answer must hold: the flag first, then any did-you-mean)
CASES = [
    # unknown flags and typos
    (["matrix", "--dry-rnu"], ["--dry-rnu", "did you mean --dry-run?"]),
    (["matrix", "--retires", "1"], ["--retires", "did you mean --retries?"]),
    (["build", "--jbos", "2"], ["--jbos", "did you mean --jobs?"]),
    (["matrix", "--bogus"], ["has no flag --bogus"]),
    (["matrix", "-x"], ["has no flag -x"]),
    (["--bogus"], ["has no option --bogus"]),
    (["matirx"], ["no task named 'matirx'", "did you mean matrix?"]),
    (["matrix", "--dry-run=yes"], ["--dry-run is a switch and takes no value"]),
    (["report", "some-run"], ["report --run some-run"]),
    (["compare", "A"], ["`compare` needs NEW", "compare BASE NEW"]),
    # missing or empty values
    (["matrix", "--retries"], ["--retries needs a value"]),
    (["matrix", "--only"], ["--only needs a value"]),
    (["report", "--run"], ["--run needs a value"]),
    (["matrix", "--gpus="], ["--gpus needs a value"]),
    (["matrix", "--results", ""], ["--results needs a value"]),
    (["publish"], ["needs --to"]),
    # numbers that are not numbers, or out of range
    (["matrix", "--retries", "two"], ["--retries 'two'", "a whole number"]),
    (["matrix", "--jobs", "1.5"], ["--jobs '1.5'"]),
    (["build", "-j", "x"], ["--jobs 'x'"]),
    (["matrix", "--ranks", "many"], ["--ranks 'many'"]),
    (["matrix", "--retries", "-1"], ["--retries -1", "0 or more"]),
    (["matrix", "--jobs", "0"], ["--jobs 0", "at least 1"]),
    (["matrix", "--control", "sometimes"], ["--control sometimes", "always, failing, never"]),
    (["matrix", "--ranks", "0"], ["--ranks 0"]),
    (["compare", "A", "B", "--threshold", "lots"], ["--threshold 'lots'"]),
    (["compare", "A", "B", "--threshold", "0"], ["--threshold 0"]),
    # 5 meant as 5%: as a fraction it would hide every regression, as in bisect and fleet
    (["compare", "A", "B", "--threshold", "5"], ["--threshold 5.0", "between 0 and 1", "--threshold 0.10"]),
    # --gpus
    (["matrix", "--gpus", "abc"], ["--gpus abc"]),
    (["matrix", "--gpus", "0,0"], ["--gpus 0,0", "distinct"]),
    (["matrix", "--gpus", "-1"], ["--gpus -1"]),
    (["doctor", "--engine", "host", "--gpus", "x"], ["--gpus x"]),
    # --gpu-api: the way containers get GPUs
    (["matrix", "--gpu-api", "runtime"], ["--gpu-api runtime", "cdi, nvidia", "--gpu-api cdi"]),
    (["rescue", "cpu-torch2.13.0-acc1.15.0+default", "--matrix", "matrix-cpu.yaml", "--dry-run", "--gpu-api", "CDI"],
     ["--gpu-api CDI", "cdi, nvidia"]),
    (["doctor", "--gpu-api", "gpus"], ["--gpu-api gpus", "cdi, nvidia"]),
    # --timeout PHASE=S
    (["matrix", "--timeout", "prepare"], ["--timeout prepare", "PHASE=SECONDS"]),
    (["matrix", "--timeout", "prepare=soon"], ["--timeout prepare=soon"]),
    (["matrix", "--timeout", "lunch=5"], ["--timeout lunch=5"]),
    (["matrix", "--timeout", "prepar=300"], ["--timeout prepar=300", "did you mean prepare?"]),
    (["matrix", "--timeout", "cell=-5"], ["--timeout cell=-5"]),
    (["matrix", "--timeout", "prepare=nan"], ["--timeout prepare=nan"]),
    (["matrix", "--timeout", "cell=inf"], ["--timeout cell=inf"]),
    # --engine
    (["matrix", "--engine", "podman"], ["--engine podman"]),
    (["matrix", "--engine", "dokcer"], ["--engine dokcer", "did you mean docker?"]),
    (["matrix", "--engine", "slurn"], ["--engine slurn", "did you mean slurm?"]),
    # the slurm engine's flags
    (["matrix", "--nodes", "2"], ["--nodes", "for the slurm engine", "--engine slurm"]),
    (["matrix", "--engine", "slurm", "--nodes", "0"], ["--nodes 0", "at least 1"]),
    (["matrix", "--engine", "slurm", "--nodes", "two"], ["--nodes 'two'", "a whole number"]),
    (["matrix", "--engine", "slurm", "--time", "soon"], ["--time 'soon'", "0:30:00"]),
    (["matrix", "--engine", "slurm", "--partition", "a b"], ["--partition 'a b'"]),
    (["matrix", "--engine", "slurm", "--slurm-arg", "exclusive"], ["--slurm-arg 'exclusive'", "--exclusive"]),
    (["matrix", "--engine", "slurm", "--gpus-per-node", "0"], ["--gpus-per-node 0", "at least 1"]),
    (["matrix", "--engine", "slurm", "--gpus-per-node", "all"], ["--gpus-per-node 'all'", "a whole number"]),
    (["matrix", "--engine", "slurm", "--gpus-per-node", "4", "--gpus", "0,1"], ["--gpus 0,1 and --gpus-per-node 4",
                                                                                "--gpus-per-node alone"]),
    (["matrix", "--engine", "slurm", "--slurm-arg=--gpus-per-node=4"], ["--gpus-per-node", "the harness's own"]),
    (["matrix", "--gpus-per-node", "4"], ["--gpus-per-node", "for the slurm engine", "--engine slurm"]),
    (["doctor", "--engine", "host", "--gpus-per-node", "4"], ["--gpus-per-node", "for the slurm engine"]),
    # selection and files
    (["matrix", "--only", "bogus=1"], ["--only 'bogus=1'", "not a cell key"]),
    (["matrix", "--exclude", "torhc=2.5"], ["--exclude 'torhc=2.5'", "did you mean `torch`?"]),
    (["matrix", "--ca-bundle", "/nonexistent.pem"], ["--ca-bundle /nonexistent.pem"]),
    (["matrix", "--matrix", "nope.yaml"], ["nope.yaml: no such matrix file"]),
    # the rescue search: a cell id the matrix does not have, none at all, a typo in its switch
    (["rescue", "cpu-torch2.13.0-acc1.15.0+defualt", "--matrix", "matrix-cpu.yaml", "--dry-run"],
     ["rescue 'cpu-torch2.13.0-acc1.15.0+defualt'", "did you mean cpu-torch2.13.0-acc1.15.0+default?"]),
    (["rescue"], ["`rescue` needs CELL", "rescue CELL"]),
    (["rescue", "x", "--retries", "two"], ["--retries 'two'"]),
    (["matrix", "--rescu"], ["--rescu", "did you mean --rescue?"]),
]


def _ask(front: str, argv: list[str]) -> subprocess.CompletedProcess:
    """One command line through one front. In case a bad flag ever slipped through, it must not build or
    run anything: `matrix` gets --dry-run, and the Docker engine is out of reach."""
    if argv[:1] == ["matrix"]:
        argv = ["matrix", "--dry-run", *argv[1:]]
    env = os.environ | {"PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    return subprocess.run([*FRONTS[front], *argv], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(scope="module")
def answers() -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """Every case through both fronts, a few at a time (each one is a fresh Python: about half a second)."""
    jobs = [(front, case) for case, _ in CASES for front in FRONTS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda job: _ask(job[0], job[1]), jobs)
        return {(front, " ".join(case)): proc for (front, case), proc in zip(jobs, done)}


def test_the_table_is_big_enough():
    assert INVOKE, "no invoke binary beside this Python or on the PATH"
    assert len(CASES) >= 20


@pytest.mark.parametrize("argv, words", CASES, ids=[" ".join(c) or "''" for c, _ in CASES])
@pytest.mark.parametrize("front", list(FRONTS))
def test_bad_input_exits_2_naming_the_flag_and_the_fix(answers, front, argv, words):
    proc = answers[(front, " ".join(argv))]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, (proc.returncode, output[-2000:])
    assert "Traceback" not in output
    assert proc.stderr.splitlines()[-1].startswith("error: ")
    for word in words:
        assert word in proc.stderr
    assert "Fix:" in proc.stderr


@pytest.mark.parametrize("argv", [c for c, _ in CASES], ids=[" ".join(c) or "''" for c, _ in CASES])
def test_both_fronts_give_the_same_answer(answers, argv):
    key = " ".join(argv)
    via_invoke, via_module = answers[("invoke", key)].stderr, answers[("python -m harness", key)].stderr
    assert via_module.replace("python -m harness", "invoke") == via_invoke


@pytest.mark.parametrize("argv", [["--list"], ["--help", "matrix"], ["matrix", "--help"], ["matrix", "-h"]])
def test_listing_and_help_still_work_through_invoke(argv):
    proc = _ask("invoke", argv)
    assert proc.returncode == 0, proc.stderr
    assert ("Available tasks:" in proc.stdout) if argv == ["--list"] else ("--dry-run" in proc.stdout)


def test_short_flags_match_their_long_names():
    proc = _ask("python -m harness", ["matrix", "--help"])
    short = dict(re.findall(r"^  (-\w)\b[^,]*, (--[\w-]+)", proc.stdout, re.MULTILINE))
    assert short == {"-j": "--jobs", "-v": "--verbose"}
