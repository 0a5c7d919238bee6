"""Malformed matrix files: one paragraph naming the file, the key path (with its line) and the fix;
exit code 2 and no traceback, through both front doors (invoke and python -m harness)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness import matrix
from harness.errors import HarnessError, MatrixError

from .conftest import REPO

GOOD = """version: 1
stacks:
  matrix:
    cuda: ["12.4.1"]
    torch: ["2.5.1"]
    accelerate: ["1.2.1"]
variants: [default]
"""

CASES = {
    # name: (file text, expected key path, expected line, words the message must contain)
    "unquoted float version": (
        GOOD.replace('cuda: ["12.4.1"]', "cuda: [12.10]"),
        "stacks.matrix.cuda[0]",
        4,
        ["12.10", "12.1", 'quote it: "12.10"'],
    ),
    "unquoted int version": (GOOD.replace('torch: ["2.5.1"]', "torch: [2]"), "stacks.matrix.torch[0]", 5, ['"2"']),
    "unknown key": (GOOD + "timeout: 5\n", "timeout", 8, ["unknown key `timeout`", "did you mean `timeouts`"]),
    "unknown nested key": (
        GOOD + "timeouts:\n  prepar: 5\n",
        "timeouts.prepar",
        9,
        ["unknown key `prepar`", "did you mean `prepare`"],
    ),
    "variant used but not defined": (
        GOOD.replace("variants: [default]", "variants: [default, p2p-of]"),
        "variants[1]",
        7,
        ["`p2p-of` is used but not defined", "did you mean `p2p-off`"],
    ),
    "empty axis": (GOOD.replace('torch: ["2.5.1"]', "torch: []"), "stacks.matrix.torch", 5, ["empty list"]),
    "non-existent template": (
        GOOD.replace('accelerate: ["1.2.1"]', 'accelerate: ["1.2.1"]\n    template: ["rocm"]'),
        "stacks.matrix",
        3,
        ["template `rocm` does not exist", "cpu, cuda"],
    ),
    "unknown stack axis": (GOOD.replace('torch: ["2.5.1"]', 'torch: ["2.5.1"]\n    cudnn: ["9"]'), "stacks.matrix.cudnn", 6, ["not a stack key"]),
    "bad launcher": (GOOD + "launchers: [deepspeed]\n", "launchers[0]", 8, ["deepspeed"]),
    "not yaml": (GOOD + "variants: [default\n", "", None, ["not valid YAML"]),
    "bad nccl": (GOOD.replace('accelerate: ["1.2.1"]', 'accelerate: ["1.2.1"]\n    nccl: ["conda:2.21"]'), "stacks.matrix", 3, ["conda:2.21"]),
    "stack without torch": (
        "version: 1\nstacks:\n  include:\n    - {cuda: \"12.4.1\", accelerate: \"1.2.1\"}\n",
        "stacks.include[0]",
        4,
        ["has no torch"],
    ),
    "boolean value": (GOOD.replace('accelerate: ["1.2.1"]', "accelerate: [yes]"), "stacks.matrix.accelerate[0]", 6, ["boolean"]),
    "float env value": (
        GOOD.replace("variants: [default]", "variants: [x]\ndefine:\n  variants:\n    x: {env: {NCCL_FOO: 1.5}}"),
        "define.variants.x.env.NCCL_FOO",
        10,
        ['quote it: "1.5"'],
    ),
    "rescue step without why": (
        GOOD + "rescue:\n  steps:\n    - {name: ring, env: {NCCL_ALGO: Ring}}\n", "rescue.steps[0].why", 10,
        ["is required but missing"]),
    "rescue step named twice": (
        GOOD + "rescue:\n  steps:\n    - {name: a, env: {NCCL_ALGO: Ring}, why: x}\n"
               "    - {name: a, env: {NCCL_PROTO: Simple}, why: y}\n", "rescue.steps[1].name", 11, ["defined twice"]),
    "rescue step without variables": (
        GOOD + "rescue:\n  steps:\n    - {name: a, env: {}, why: x}\n", "rescue.steps[0].env", 10, ["at least 1"]),
    "rescue variable name": (
        GOOD + "rescue:\n  steps:\n    - {name: a, env: {NCCL-ALGO: Ring}, why: x}\n", "rescue.steps[0].env.NCCL-ALGO",
        10, ["not an environment variable name"]),
    "rescue attempts a string": (GOOD + 'rescue:\n  attempts: "3"\n', "rescue.attempts", 9, ["a whole number"]),
    "rescue seconds negative": (GOOD + "rescue:\n  seconds: -1\n", "rescue.seconds", 9, ["not a usable timeout"]),
    "rescue threshold typo": (GOOD + "rescue:\n  timeouts: {prepar: 5}\n", "rescue.timeouts.prepar", 9,
                              ["did you mean `prepare`"]),
}


@pytest.mark.parametrize("name", CASES)
def test_each_malformed_file_gets_one_clear_error(write_matrix, name):
    text, key, line, words = CASES[name]
    path = write_matrix(text)
    with pytest.raises(MatrixError) as err:
        matrix.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}" if line else str(path)), message
    assert f"`{key}`" in message if key else True
    assert err.value.key == key
    assert "Fix:" in message
    for word in words:
        assert word in message, message
    assert "\n" not in message
    assert err.value.code == 2


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(HarnessError) as err:
        matrix.load(tmp_path / "nope.yaml")
    assert "no such matrix file" in str(err.value) and "--matrix" in str(err.value)
    assert err.value.code == 2


def test_duplicate_cell_ids_are_refused(write_matrix):
    text = GOOD.replace(
        'accelerate: ["1.2.1"]',
        'accelerate: ["1.2.1"]\n    base: ["nvidia/cuda:12.4.1-runtime-ubuntu22.04", "nvidia/cuda:12.4.1-runtime-ubuntu24.04"]',
    )
    with pytest.raises(MatrixError, match=re.escape("same id `cu12.4.1-torch2.5.1-acc1.2.1`")):
        matrix.load(write_matrix(text))


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("front", ["invoke", "module"])
def test_cli_exits_2_without_traceback(write_matrix, front):
    path = write_matrix(CASES["unquoted float version"][0])
    argv = (
        [sys.executable, "-m", "invoke", "matrix", "--list", "--matrix", str(path)]
        if front == "invoke"
        else [sys.executable, "-m", "harness", "matrix", "--list", "--matrix", str(path)]
    )
    proc = _run(argv)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"{path}:4" in proc.stderr and 'quote it: "12.10"' in proc.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["--only", "tourch=2.5"], ["--only", "did you mean `torch`"]),
        (["--exclude", "=x"], ["--exclude"]),
        (["--matrix", "/nonexistent/m.yaml"], ["no such matrix file"]),
    ],
)
def test_bad_flags_exit_2_and_name_the_flag(args, words):
    proc = _run([sys.executable, "-m", "invoke", "matrix", "--list", *args])
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr


def test_nothing_selected_exits_3():
    proc = _run([sys.executable, "-m", "invoke", "matrix", "--list", "--only", "no-such-cell*"])
    assert proc.returncode == 3
    assert "no cell matches" in proc.stderr


def test_list_prints_cells_and_na_with_reasons():
    proc = _run([sys.executable, "-m", "invoke", "matrix", "--list", "--matrix", "matrix.yaml"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "cu12.4.1-torch2.5.1-acc1.15.0+p2p-off  " in out
    na_part = out.split("n/a (")[1]
    assert "cu12.1.1-torch2.8.0-acc1.15.0+default" in na_part
    assert "torch 2.8 has no cu121 wheel" in na_part
    # n/a cells are never in the runnable part
    assert "cu12.1.1-torch2.8.0-acc1.15.0+default" not in out.split("n/a (")[0]


def test_list_cpu_matrix():
    proc = _run([sys.executable, "-m", "invoke", "matrix", "--list", "--matrix", "matrix-cpu.yaml"])
    assert proc.returncode == 0
    assert "cpu-torch2.13.0-acc1.15.0+default" in proc.stdout
    assert "cpu-torch2.13.0-acc0.34.2+p2p-off+torchrun" in proc.stdout
