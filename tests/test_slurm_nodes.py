"""The slurm engine across two real nodes: two slurmd in containers with their own slurmctld
(scripts/slurm-cluster.sh, the `slurm_nodes` fixture), sharing the results folder at the same path and
running ranks on the nodes' own Python. A CPU cell with one rank on each node passes and records where
each rank ran; a rank stopped with SIGSTOP on its node is a hang naming the rank and that node; after
each, the cluster lists no job and no node runs anything of the cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import outcome, supervise
from harness.engines.slurm import SlurmEngine, SlurmOptions

from .conftest import REPO, Fault, interrupt_when
from .test_supervise import TIMEOUTS, _spec

pytestmark = pytest.mark.slurm


def _nothing_left(cluster, needle: str) -> None:
    jobs = subprocess.run(["squeue", "-h"], env=cluster.env, capture_output=True, text=True, timeout=60).stdout
    assert not jobs.strip(), f"jobs left in the cluster: {jobs}"
    for node in cluster.nodes:
        assert not cluster.processes(node, needle), f"processes of the cell left on {node}"


def test_a_cell_with_one_rank_on_each_node_passes_and_says_where_each_ran(slurm_nodes):
    results = slurm_nodes.shared / "pass"
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--nodes", "2", "--ranks",
                           "2", "--only", "*acc1.15.0+default", "--results", str(results), "--run-id", "t-nodes"],
                          cwd=REPO, env=slurm_nodes.env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [record_file] = (results / "t-nodes" / "cells").glob("*/record.json")
    record = json.loads(record_file.read_text())
    assert record["outcome"]["status"] == "pass", record["outcome"]
    ranks = record["attempts"][-1]["raw"]["ranks"]
    [job] = (results / "t-nodes" / "cells").glob("*/attempt-1/slurm-job.json")
    job_id = json.loads(job.read_text())["job_id"]
    assert {r: (p["placement"]["node"], p["placement"]["job_id"]) for r, p in ranks.items()} == {
        "0": (slurm_nodes.nodes[0], job_id), "1": (slurm_nodes.nodes[1], job_id)}
    report = (results / "t-nodes" / "report.md").read_text()
    assert f"- nodes: {slurm_nodes.nodes[0]} (rank 0), {slurm_nodes.nodes[1]} (rank 1)" in report
    assert "seen by every node" in proc.stderr  # the shared-folder probe ran first
    _nothing_left(slurm_nodes, "t-nodes")


class OnTheNodes:
    """Signals a rank on the node it runs on (its start event names the node and its pid there)."""

    def __init__(self, cluster, out: Path) -> None:
        self.cluster, self.out = cluster, out

    def signal(self, pid: int, sig: str) -> None:
        for events in self.out.glob("events-rank*.jsonl"):
            start = json.loads(events.read_text().splitlines()[0])
            if start["event"] == "start" and start["pid"] == pid:
                self.cluster.signal(start["placement"]["node"], pid, sig)
                return
        raise AssertionError(f"no rank with pid {pid}")


def test_a_rank_stopped_on_its_node_is_a_hang_naming_the_rank_and_the_node(slurm_nodes, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm_nodes.conf)  # the harness's sbatch, scontrol, scancel, squeue
    engine = SlurmEngine(SlurmOptions(nodes=2))
    spec = _spec(engine, slurm_nodes.shared / "stop", ("--hold-at", "prepare"))
    fault = Fault(spec.out_dir, 1, "prepare", "STOP")
    record = supervise.supervise(engine, spec, TIMEOUTS, on_event=fault,
                                 on_start=lambda running: fault.start(OnTheNodes(slurm_nodes, spec.out_dir)))
    result = outcome.classify(record.to_json())
    assert result.status == "hang" and result.phase == "prepare", result
    assert result.detail["ranks_behind"] == [1]
    assert f"rank 1 on {slurm_nodes.nodes[1]}" in result.reason and "stopped" in result.reason, result.reason
    # forensics from where each rank runs (collector.py through srun --overlap on every node): the stopped
    # rank's state on its node and py-spy's dump of it there; the other node's rank answered SIGUSR1
    _n1, n2 = slurm_nodes.nodes
    stopped = [line for line in record.forensics.processes.splitlines()
               if line.startswith(f"{n2}: ") and line.split()[1] == str(record.ranks["1"].pid)]
    assert stopped and stopped[0].split()[2] == "T", record.forensics.processes
    assert record.forensics.py_spy["1"].startswith(f"[{n2}]"), record.forensics.py_spy
    assert "Thread" in record.forensics.stacks["0"], record.forensics.stacks["0"]  # faulthandler on n1
    assert (spec.out_dir / "node-forensics" / f"{n2}.json").is_file()
    assert record.leftovers == []
    _nothing_left(slurm_nodes, str(spec.out_dir))


def test_a_results_folder_the_nodes_do_not_share_stops_the_run_with_exit_4(slurm_nodes, tmp_path):
    """tmp_path is this host's alone (not mounted into the nodes): the probe job's nodes cannot write there."""
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--nodes", "2", "--ranks",
                           "2", "--only", "*acc1.15.0+default", "--results", str(tmp_path), "--run-id", "t-local"],
                          cwd=REPO, env=slurm_nodes.env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert f"the results folder {tmp_path / 't-local'} is not shared by every node" in proc.stderr
    assert "Fix: --results DIR on storage that every node mounts at the same path" in proc.stderr
    assert "Traceback" not in proc.stderr and not list((tmp_path / "t-local").glob("cells/*"))  # no cell ran
    _nothing_left(slurm_nodes, "t-local")


def _doctor(cluster, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "doctor", "--engine", "slurm", "--nodes", "2", "--results",
                           str(results)], cwd=REPO, env=cluster.env, capture_output=True, text=True, timeout=300)


def test_doctor_sees_the_shared_folder_and_the_runtime_from_each_node(slurm_nodes):
    proc = _doctor(slurm_nodes, slurm_nodes.shared / "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    n1, n2 = slurm_nodes.nodes
    assert f"seen by every node ({n1}, {n2})" in proc.stdout, proc.stdout
    runtime = next(line for line in proc.stdout.splitlines() if "node runtime" in line)
    assert runtime.startswith("ok") and f"{n1}: python" in runtime and f"{n2}: python" in runtime, runtime
    _nothing_left(slurm_nodes, "node-probe")


def test_doctor_says_a_folder_the_nodes_do_not_see_with_exit_4(slurm_nodes, tmp_path):
    proc = _doctor(slurm_nodes, tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr[-2000:]
    shared = next(line for line in proc.stdout.splitlines() if "shared results folder" in line)
    assert shared.startswith("FAIL") and f"the results folder {tmp_path} is not shared by every node" in shared
    assert "Traceback" not in proc.stderr
    _nothing_left(slurm_nodes, "node-probe")


def test_two_cells_run_together_each_on_its_own_node_with_jobs_2(slurm_nodes):
    """--jobs 2: two one-node cells at the same time, each its own job with --exclusive, so Slurm gives
    them the two nodes (without it, select/cons_tres could pack both onto one)."""
    results = slurm_nodes.shared / "together"
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--nodes", "1", "--ranks",
                           "2", "--jobs", "2", "--only", "*acc1.15.0+default", "--only", "*acc1.15.0+p2p-off",
                           "--results", str(results), "--run-id", "t-together"],
                          cwd=REPO, env=slurm_nodes.env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "up to 2 at a time" in proc.stderr
    cells = sorted((results / "t-together" / "cells").iterdir())
    assert len(cells) == 2
    nodes, windows = set(), []
    for cell in cells:
        record = json.loads((cell / "record.json").read_text())
        assert record["outcome"]["status"] == "pass", record["outcome"]
        attempt = record["attempts"][-1]["raw"]
        [node] = {rank["placement"]["node"] for rank in attempt["ranks"].values()}  # both ranks on one node
        nodes.add(node)
        walls = [json.loads(line)["wall"] for events in (cell / "attempt-1").glob("events-rank*.jsonl")
                 for line in events.read_text().splitlines()]
        windows.append((min(walls), max(walls)))  # from the ranks' first event to their last
        job = json.loads((cell / "attempt-1" / "slurm-job.json").read_text())
        assert job["nodes"] == node and job["state"] == "COMPLETED", job
    assert nodes == set(slurm_nodes.nodes)  # one cell on each node
    (a_start, a_end), (b_start, b_end) = windows
    assert a_start < b_end and b_start < a_end, windows  # the ranks of the two cells ran at the same time
    _nothing_left(slurm_nodes, "t-together")


def test_ctrl_c_ends_both_cells_running_together(slurm_nodes, monkeypatch):
    """Ctrl-C reaches the main thread only: both cells' workers end their attempts (`interrupted`), their
    jobs are scancelled and gone from squeue, and the run exits 130 with the report written."""
    monkeypatch.setenv("SLURM_CONF", slurm_nodes.conf)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    run = slurm_nodes.shared / "ctrl-c" / "t-ctrl-c"

    def both_running() -> bool:
        return len([f for f in run.glob("cells/*/attempt-1/events-rank0.jsonl") if f.stat().st_size]) == 2

    code, output = interrupt_when([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--nodes", "1",
                                   "--ranks", "2", "--jobs", "2", "--only", "*acc1.15.0+default", "--only",
                                   "*acc1.15.0+p2p-off", "--results", str(run.parent), "--run-id", run.name],
                                  both_running, 0.5, "both cells should start")
    assert code == 130, output[-3000:]
    records = [json.loads(f.read_text()) for f in run.glob("cells/*/record.json")]
    assert [r["outcome"]["status"] for r in records] == ["interrupted", "interrupted"], output[-3000:]
    assert (run / "report.md").is_file() and "Traceback" not in output
    _nothing_left(slurm_nodes, "t-ctrl-c")


def test_a_harness_run_from_a_python_the_nodes_lack_names_the_missing_command_and_the_node(slurm_nodes, tmp_path):
    """Issue 22, seen on this container Slurm: the harness ran from a virtual environment the nodes do not
    have, and the cell ended "launcher exit 127" without saying what was missing where."""
    venv = tmp_path / "venv"  # this host's folder: not on the nodes
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=120)
    results = slurm_nodes.shared / "novenv"
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "harness", "matrix", "--engine", "slurm", "--nodes", "1",
                           "--ranks", "2", "--only", "*acc1.15.0+default", "--results", str(results), "--run-id", "t-novenv"],
                          cwd=REPO, env=slurm_nodes.env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    [record_file] = (results / "t-novenv" / "cells").glob("*/record.json")
    found = json.loads(record_file.read_text())["outcome"]
    assert found["status"] == "fail", found
    assert f"the command `{venv}/bin/python` does not exist on node " in found["reason"], found
    assert found["detail"]["where"].removeprefix("on node ") in slurm_nodes.nodes
    assert "Fix: make" in found["reason"] and "on every node" in found["reason"]
    _nothing_left(slurm_nodes, "t-novenv")
