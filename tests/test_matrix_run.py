"""`invoke matrix` end to end on real cells: records per cell, retries that keep every attempt, Ctrl-C
that leaves nothing running, and a GPU cell on an engine without GPUs reported as infra-error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import launch, matrix, matrixfile, outcome, runner, supervise
from harness.engines import host
from harness.engines.base import CellSpec
from harness.engines.docker import LABEL_RUN
from harness.engines.host import HostEngine

from .conftest import REPO, WHEELHOUSE, Fault, interrupt_when

CPU_STACK = "stack=cpu-torch2.13.0-acc1.15.0"


def _invoke(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "matrix", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def _records(run: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (run / "cells").glob("*/record.json")}


@pytest.mark.engine
@pytest.mark.slow
def test_invoke_matrix_runs_cpu_cells_in_containers(engine, cpu_image, tmp_path):
    proc = _invoke("--matrix", "matrix-cpu.yaml", "--only", CPU_STACK, "--wheelhouse", str(WHEELHOUSE),
                   "--results", str(tmp_path), "--run-id", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(tmp_path / "cpu")
    assert set(records) == {"cpu-torch2.13.0-acc1.15.0+default", "cpu-torch2.13.0-acc1.15.0+default+torchrun",
                            "cpu-torch2.13.0-acc1.15.0+p2p-off", "cpu-torch2.13.0-acc1.15.0+p2p-off+torchrun"}
    for cell_id, record in records.items():
        assert record["outcome"]["status"] == "pass", (cell_id, record["outcome"])
        assert record["schema"] == 1
        raw = record["attempts"][0]["raw"]
        assert raw["engine"] == "docker" and raw["leftovers"] == []
        assert raw["phases"]["bandwidth"]["rows"]
    run = json.loads((tmp_path / "cpu" / "run.json").read_text())
    assert run["engine"] == "docker" and len(run["cells"]) == 4
    assert "Summary: 4 pass" in proc.stderr
    # what was built or reused, as `invoke build` records it: the image the fixture made is reused
    builds = json.loads((tmp_path / "cpu" / "builds.json").read_text())
    assert [(b["tag"], b["status"]) for b in builds["images"].values()] == [(cpu_image, "cached")]
    assert builds["cells"] == {}
    # the report renders from these real container results
    rep = subprocess.run([sys.executable, "-m", "invoke", "report", "--run", "cpu", "--results", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    rows = [l for l in rep.stdout.splitlines() if l.startswith("| cpu | gloo (CPU) | 2.13.0 | 1.15.0 |")]
    assert len(rows) == 2  # accelerate and torchrun
    assert all(r.count("✅ pass") == 2 for r in rows)
    assert "Engine | docker" in rep.stdout


def test_invoke_matrix_on_the_host_engine(tmp_path):
    pytest.importorskip("torch")
    proc = _invoke("--engine", "host", "--matrix", "matrix-cpu.yaml", "--only", "variant=default",
                   "--exclude", "launcher=torchrun", "--results", str(tmp_path), "--run-id", "host")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = _records(tmp_path / "host").values()
    assert record["outcome"]["status"] == "pass"
    assert record["cell"]["base"] == "host"
    assert "Host stack: cpu-torch" in proc.stderr


def _host_cell(m: matrix.Matrix) -> matrix.Cell:
    return next(c for c in host.host_cells(m, host.host_stack()) if c.launcher == "accelerate")


def _fast(m: matrix.Matrix) -> matrix.Matrix:
    t = matrixfile.Timeouts(fingerprint=60, init=4, prepare=4, step=4, check=4, bandwidth=4, teardown=10, cell=120)
    return matrix.Matrix(**{**m.__dict__, "timeouts": t})


def test_retries_rerun_a_hang_and_keep_every_attempt(tmp_path):
    pytest.importorskip("torch")
    m = _fast(matrix.load(matrix.DEFAULT_CPU_MATRIX))
    opts = runner.RunOptions("retry", tmp_path, (), 2, retries=2, extra_args=("--hold-at", "step"),
                             extra_env=(("HARNESS_TEST_FAULTS", "1"),))
    stop_first_attempt = Fault(tmp_path, 1, "step", "STOP", times=1)
    result = runner.run_cell(HostEngine(), _host_cell(m), m, opts, on_event=stop_first_attempt,
                             on_start=stop_first_attempt.start)
    assert [a.outcome.status for a in result.attempts] == ["hang", "pass"]
    assert result.outcome.status == "pass"
    record = json.loads((tmp_path / "retry" / "cells" / result.cell.id / "record.json").read_text())
    assert len(record["attempts"]) == 2 and record["attempts"][0]["outcome"]["phase"] == "step"


def test_a_failure_is_not_retried(tmp_path):
    pytest.importorskip("torch")
    m = _fast(matrix.load(matrix.DEFAULT_CPU_MATRIX))
    opts = runner.RunOptions("noretry", tmp_path, (), 2, retries=2, extra_args=("--fail-in", "check"),
                             extra_env=(("HARNESS_TEST_FAULTS", "1"),))
    result = runner.run_cell(HostEngine(), _host_cell(m), m, opts)
    assert result.outcome.status == "fail" and result.outcome.phase == "check"
    assert len(result.attempts) == 1


@pytest.mark.engine
@pytest.mark.slow
def test_ctrl_c_kills_the_running_container_and_keeps_the_results(engine, cpu_image, tmp_path):
    argv = [sys.executable, "-m", "invoke", "matrix", "--matrix", "matrix-cpu.yaml", "--only", CPU_STACK,
            "--wheelhouse", str(WHEELHOUSE), "--results", str(tmp_path), "--run-id", "int"]
    code, output = interrupt_when(argv, lambda: bool(engine.client.leftovers(f"{LABEL_RUN}=int")), settle=2.0,
                                  what="no cell container appeared")  # the SIGINT lands inside a cell
    assert code == 130, output[-2000:]
    assert engine.client.leftovers(f"{LABEL_RUN}=int") == []
    records = _records(tmp_path / "int")
    assert [r["outcome"]["status"] for r in records.values()] == ["interrupted"]
    assert "results so far are kept" in output


@pytest.mark.engine
def test_gpu_cell_on_an_engine_without_the_nvidia_runtime_is_infra_error(engine, cpu_image, tmp_path):
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    spec = CellSpec("nogpu", "gpu-cell", launch.launch(m.cells[0], m, ranks=1), tmp_path / "out", image=cpu_image,
                    gpus=("0",))
    record = supervise.supervise(engine, spec, m.timeouts)
    result = outcome.classify(record.to_json())
    assert result.status == "infra-error"
    assert "refused the cell's GPUs through the NVIDIA runtime" in result.reason
    assert "NVIDIA Container Toolkit" in result.reason and "--gpu-api cdi" in result.reason
    assert engine.client.leftovers(f"{LABEL_RUN}=nogpu") == []


def test_a_variable_from_the_host_is_inherited_not_the_launchers_change(tmp_path, monkeypatch):
    """Seen on 2x H200: NCCL_NVLS_ENABLE=0, set in the host's environment, was reported as "launcher
    changed: NCCL_NVLS_ENABLE: None -> 0". The harness records what the launcher starts with."""
    pytest.importorskip("torch")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.variant.name == "p2p-off")
    result = runner.run_cell(HostEngine(), cell, m, runner.RunOptions("inherit", tmp_path, (), 2))
    assert result.outcome.status == "pass", result.outcome
    origins = result.env_origins()
    assert origins["NCCL_NVLS_ENABLE"] == ("0", "inherited")
    assert origins["NCCL_P2P_DISABLE"] == ("1", "variant")
    assert origins["NCCL_DEBUG"] == ("INFO", "harness")
    assert "NCCL_NVLS_ENABLE" not in result.launcher_changes
    assert any(origin == "launcher" for _, origin in origins.values())  # Accelerate's own ACCELERATE_* variables


@pytest.mark.engine
@pytest.mark.slow
def test_compare_in_containers_is_quiet_on_noise_and_names_a_real_slowdown(engine, cpu_image, tmp_path):
    """The CPU matrix's cells run twice in containers compare equal (exit 0); the second run with one
    cell's container held to a quarter of a CPU for its bandwidth sweep (docker update --cpus 0.25, a real
    slowdown from outside, on a cell whose two ranks use two) is a regression naming that cell (exit 1).
    Half a CPU was not enough on a loaded machine: a base run's trials spread 0.36-1.31 GB/s there, and
    the halved cell's 0.35-0.43 overlapped them (seen in a CI run beside other work)."""
    for run_id in ("A", "B"):
        proc = _invoke("--matrix", "matrix-cpu.yaml", "--only", CPU_STACK, "--exclude", "launcher=torchrun",
                       "--wheelhouse", str(WHEELHOUSE), "--results", str(tmp_path), "--run-id", run_id)
        assert proc.returncode == 0, proc.stderr[-3000:]

    def compare(base: str, new: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "invoke", "compare", base, new, "--results", str(tmp_path)],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    same = compare("A", "B")
    assert same.returncode == 0, same.stdout

    shutil.copytree(tmp_path / "B", tmp_path / "C")
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    slowed = next(c for c in m.runnable if c.id == "cpu-torch2.13.0-acc1.15.0+p2p-off")
    handle = []

    def at_bandwidth(rank: int, event: dict) -> None:
        """Slow the sweep only, not the whole cell: a quarter of a CPU through teardown too made teardown
        stall past its 30 s threshold on a slow CI machine (a hang, not the slowdown this test is about)."""
        if rank == 0 and event.get("phase") == "bandwidth" and event.get("event") == "phase_start":
            handle[0].limit_cpus(0.25)
        elif rank == 0 and event.get("phase") == "bandwidth" and event.get("event") == "phase_end":
            handle[0].lift_cpu_limit()

    result = runner.run_cell(engine, slowed, m, runner.RunOptions("C", tmp_path, (), m.ranks), cpu_image,
                             on_event=at_bandwidth, on_start=handle.append)
    assert result.outcome.status == "pass", result.outcome
    slow = compare("A", "C")
    assert slow.returncode == 1, slow.stdout
    regressions = slow.stdout.split("## Regressions", 1)[1].split("##", 1)[0]
    assert "cpu-torch2.13.0-acc1.15.0+p2p-off" in regressions and "busbw" in regressions
    assert "cpu-torch2.13.0-acc1.15.0+default`" not in regressions
