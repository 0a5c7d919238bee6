"""The real `invoke` tasks as users type them: --dry-run, --json, interrupt then --resume, and every
bad flag answered with exit 2, a message naming the flag and the fix, and no traceback."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import launch, matrix, selection
from harness.engines.base import CellSpec
from harness.engines.container import container_config

from .conftest import REPO, WHEELHOUSE, interrupt_when


def _invoke(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_a_gpu_that_does_not_exist_is_bad_input():
    """More bad flags and values, through both fronts: tests/test_cli_contract.py."""
    proc = _invoke("matrix", "--engine", "host", "--gpus", "7")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--gpus 7" in proc.stderr and "Fix:" in proc.stderr
    assert ("does not exist" if selection.present_gpus() else "no NVIDIA GPU on this host") in proc.stderr


@pytest.mark.parametrize("args, words", [
    (["--results", "/proc/version/x"], ["--results /proc/version/x", "cannot write"]),
    (["--resume", "--results", "/tmp/harness-no-runs-here"], ["--resume", "no earlier run"]),
])
def test_unusable_results_folder_exits_2(args, words):
    proc = _invoke("matrix", "--engine", "host", *args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Fix:" in proc.stderr
    for word in words:
        assert word in proc.stderr


def test_nothing_selected_exits_3():
    proc = _invoke("matrix", "--engine", "host", "--only", "variant=no-such")
    assert proc.returncode == 3


def test_invoke_list_shows_every_task_with_help():
    proc = _invoke("--list")
    for name in ("matrix", "list", "build", "report", "compare", "publish", "doctor", "clean", "base-image"):
        assert f"  {name} " in proc.stdout


# `python -m harness` (and the nccl-harness script) run an invoke Program over harness/tasks.py, the
# collection the repo root's tasks.py hands to `invoke`: one declaration, the same listing and answers.

def _module(*args: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _task_lines(listing: str) -> list[str]:
    """The task table of a --list output, without its heading (invoke: "Available tasks", Program: "Subcommands")."""
    lines = listing.splitlines()
    return [l for l in lines[1:] if l.strip()]


@pytest.mark.parametrize("flag", ["--list", "-l"])
def test_module_lists_the_same_tasks_and_help_as_invoke(flag):
    via_invoke, via_module = _invoke("--list"), _module(flag)
    assert via_invoke.returncode == via_module.returncode == 0, (via_invoke.stderr, via_module.stderr)
    assert _task_lines(via_module.stdout) == _task_lines(via_invoke.stdout)
    names = [l.split()[0] for l in _task_lines(via_module.stdout) if not l.startswith("    ")]
    assert names == sorted(["matrix", "rescue", "bisect", "fleet", "list", "build", "report", "bugreport", "compare", "publish", "doctor", "clean",
                            "base-image"])


def test_module_works_outside_the_repo(tmp_path):
    """The Program needs no tasks.py nearby: the installed package carries the tasks."""
    proc = _module("--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "  matrix " in proc.stdout and "  base-image " in proc.stdout


def test_task_help_is_the_same_through_both():
    for task in ("matrix", "report", "compare"):
        via_invoke, via_module = _invoke("--help", task), _module(task, "--help")
        assert via_invoke.returncode == via_module.returncode == 0
        # only the usage line names the binary
        assert via_module.stdout.splitlines()[1:] == via_invoke.stdout.splitlines()[1:]


def test_nccl_harness_script_is_the_program():
    from harness import cli, tasks

    prog = cli.program("nccl-harness")
    assert set(prog.namespace.task_names) == {t.name for t in vars(tasks).values() if hasattr(t, "body")}
    with pytest.raises(SystemExit) as exit_:
        cli.main(["matrix", "--dry-rnu"])
    assert exit_.value.code == 2


def test_docker_line_for_gpus_keeps_the_inner_quotes():
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    cell = next(c for c in m.runnable if c.variant.name == "p2p-off")
    spec = CellSpec("r", cell.id, launch.launch(cell, m, ranks=2), Path("/r/out"), image="img:tag", gpus=("0", "1"))
    line = container_config(spec).docker_run()
    argv = shlex.split(line)
    assert argv[argv.index("--gpus") + 1] == '"device=0,1"'
    assert "memlock=-1:-1" in argv and "NCCL_P2P_DISABLE=1" in argv and "--ipc=host" in argv
    assert argv[argv.index("img:tag") + 1:][:4] == ["python", "-m", "accelerate.commands.launch", "--multi_gpu"]


@pytest.mark.engine
@pytest.mark.slow
def test_dry_run_prints_pasteable_docker_lines_and_runs_nothing(engine, cpu_image, tmp_path):
    proc = _invoke("matrix", "--dry-run", "--matrix", "matrix-cpu.yaml", "--only", "stack=cpu-torch2.13.0-acc1.15.0",
                   "--wheelhouse", str(WHEELHOUSE), "--results", str(tmp_path), "--run-id", "dry")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"# cached: {cpu_image} from images/cpu.Dockerfile.j2" in lines
    runs = [l for l in lines if l.startswith("docker run ")]
    assert len(runs) == 4
    p2p = next(l for l in runs if "NCCL_P2P_DISABLE=1" in l and "torch.distributed.run" in l)
    assert cpu_image in p2p and "--ipc=host" in p2p
    assert not (tmp_path / "dry").exists() and engine.client.leftovers() == []
    # pasted as printed, the line runs the cell
    argv = shlex.split(next(l for l in runs if "accelerate.commands.launch" in l and "P2P" not in l))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = Path(argv[argv.index("-v") + 1].split(":")[0])
    events = [json.loads(l) for l in (out / "events-rank1.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "result" and events[-1]["status"] == "ok"


def test_dry_run_with_control_always_prints_each_cells_control_line_too(tmp_path):
    pytest.importorskip("torch")
    proc = _invoke("matrix", "--dry-run", "--engine", "host", "--control", "always", "--only", "variant=default",
                   "--exclude", "launcher=torchrun", "--results", str(tmp_path), "--run-id", "dry")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    control = lines[lines.index(next(l for l in lines if l.endswith(": the NCCL-only control, after the cell's last attempt"))) + 1]
    assert "workload/control.py" in control and "/attempt-2" in control and "run.py" not in control
    assert sum("workload/run.py" in l for l in lines) == 1 and not (tmp_path / "dry").exists()


def test_json_summary_and_report_file(tmp_path):
    pytest.importorskip("torch")
    proc = _invoke("matrix", "--engine", "host", "--only", "variant=default", "--exclude", "launcher=torchrun",
                   "--json", "--results", str(tmp_path), "--run-id", "j", "--timeout", "cell=600")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["run_id"] == "j" and summary["counts"] == {"pass": 1}
    assert summary["cells"][0]["status"] == "pass"
    assert Path(summary["report"]).read_text().startswith("# NCCL / Accelerate compatibility")
    assert json.loads((tmp_path / "j" / "run.json").read_text())["matrix"]["timeouts"]["cell"] == 600
    # a plain (non-terminal) log: one line for the cell, its result; its phases only with -v
    cell = summary["cells"][0]["id"]
    assert [l for l in proc.stderr.splitlines() if cell in l and "results in" not in l] == [
        next(l for l in proc.stderr.splitlines() if l.startswith(f"[1/1] {cell}: PASS"))]
    assert "phase_start" not in proc.stderr


def _stray(path: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(path).encode() in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_interrupted_run_keeps_its_results_and_resumes(tmp_path):
    pytest.importorskip("torch")
    argv = [sys.executable, "-m", "invoke", "matrix", "--engine", "host", "--results", str(tmp_path), "--run-id", "r"]
    cells = tmp_path / "r" / "cells"
    code, output = interrupt_when(
        argv, lambda: bool(list(cells.glob("*/record.json"))) and len(list(cells.glob("*/attempt-1"))) >= 2,
        settle=1.0, what="the run did not get to its second cell", timeout=240)
    assert code == 130, output[-2000:]
    assert "--resume --run-id r" in output
    assert _stray(tmp_path) == []
    statuses = {p.parent.name: json.loads(p.read_text())["outcome"]["status"] for p in cells.glob("*/record.json")}
    assert sorted(statuses.values()) == ["interrupted", "pass"]
    first = next(k for k, v in statuses.items() if v == "pass")
    kept = (cells / first / "record.json").stat().st_mtime
    assert (tmp_path / "r" / "report.md").exists()

    resumed = _invoke("matrix", "--engine", "host", "--results", str(tmp_path), "--run-id", "r", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "1 cell(s) already recorded are skipped" in resumed.stderr
    statuses = {p.parent.name: json.loads(p.read_text())["outcome"]["status"] for p in cells.glob("*/record.json")}
    assert len(statuses) == 4 and set(statuses.values()) == {"pass"}
    assert (cells / first / "record.json").stat().st_mtime == kept


@pytest.mark.parametrize("present, flag, words", [
    ([], "0,1", "no NVIDIA GPU on this host. Fix: drop --gpus"),
    ([], "all", "no NVIDIA GPU on this host. Fix: drop --gpus"),
    (["0", "1"], "7", "GPU 7 does not exist here (present: 0,1). Fix: pick from the present ones"),
])
def test_gpu_advice_is_one_check_and_works_when_followed(monkeypatch, present, flag, words):
    """On a host without GPUs, `--gpus 0,1` used to advise "pick from the present ones, or all", and
    `--gpus all` then failed with another message; doctor and matrix now share one check and its advice."""
    from harness.errors import HarnessError

    monkeypatch.setattr(selection, "present_gpus", lambda: present)
    with pytest.raises(HarnessError) as exc:
        selection.check_gpus(flag)
    assert words in str(exc.value) and exc.value.code == 2
