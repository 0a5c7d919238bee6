"""The slurm engine. Pure first: one launcher per node, with its node count, index and rendezvous from
Slurm's variables, as each node's shell expands them; the job's script, its state and exit code. Then
against a real Slurm on this machine (scripts/slurm-local.sh, the `slurm_cluster` fixture): a healthy
CPU cell passes through the command line with the host engine's record, a stopped rank is a hang in its
phase, a killed rank is a fail, and no job of the harness is left in squeue after any of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import engines, launch, matrix, owner, reaper
from harness.engines import host, slurm
from harness.engines.slurm import SlurmEngine, SlurmOptions
from harness.errors import HarnessError, InfraError
from harness.progress import Progress

from .conftest import REPO

CPU = matrix.load(matrix.DEFAULT_CPU_MATRIX)
NODE_ENV = {"SLURM_NNODES": "2", "SLURM_NODEID": "1", "HARNESS_RDZV_ADDR": "node-a", "HARNESS_RDZV_PORT": "24242"}


def _cell(launcher: str) -> matrix.Cell:
    return next(c for c in CPU.cells if c.launcher == launcher and c.variant.name == "default")


def _node_argv(launcher: str, nodes: int, ranks: int) -> list[str]:
    """The launcher's words as a node's shell runs them, with NODE_ENV as Slurm and the script set it."""
    lnch = launch.node_launch(_cell(launcher), CPU, nodes=nodes, ranks=ranks, python="python3", workload="/w/run.py",
                              out="/shared/out dir")
    line = "printf '%s\\n' " + launch.shell_line(lnch.argv)
    done = subprocess.run(["bash", "-c", line], env={**NODE_ENV, "PATH": os.environ["PATH"]}, capture_output=True,
                          text=True, check=True)
    return done.stdout.splitlines()


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_accelerate_on_each_node_gets_machines_its_rank_and_the_first_node():
    argv = _node_argv("accelerate", nodes=2, ranks=4)
    assert argv[:3] == ["python3", "-m", "accelerate.commands.launch"]
    assert _flag(argv, "--num_processes") == "4"  # Accelerate counts every node's processes
    assert _flag(argv, "--num_machines") == "2"
    assert _flag(argv, "--machine_rank") == "1"
    assert _flag(argv, "--main_process_ip") == "node-a"
    assert _flag(argv, "--main_process_port") == "24242"
    assert "--multi_gpu" in argv
    assert argv[argv.index("/w/run.py") + 1:][:2] == ["--out", "/shared/out dir"]  # quoted through the shell


def test_torchrun_on_each_node_gets_nnodes_its_rank_and_the_first_node():
    argv = _node_argv("torchrun", nodes=2, ranks=4)
    assert argv[:3] == ["python3", "-m", "torch.distributed.run"]
    assert _flag(argv, "--nproc_per_node") == "2"  # torchrun counts one node's processes
    assert (_flag(argv, "--nnodes"), _flag(argv, "--node_rank")) == ("2", "1")
    assert (_flag(argv, "--master_addr"), _flag(argv, "--master_port")) == ("node-a", "24242")


@pytest.mark.parametrize("launcher", ["accelerate", "torchrun"])
def test_one_node_runs_every_rank_there(launcher):
    argv = _node_argv(launcher, nodes=1, ranks=2)
    per_node = "--num_processes" if launcher == "accelerate" else "--nproc_per_node"
    assert _flag(argv, per_node) == "2"
    # the workload's arguments are the host engine's, word for word
    host = launch.launch(_cell(launcher), CPU, ranks=2, python="python3", workload="/w/run.py", out="/shared/out dir")
    assert argv[argv.index("/w/run.py"):] == list(host.argv[host.argv.index("/w/run.py"):])


def test_the_single_machine_launch_is_unchanged():
    """The host and docker engines' argv (recorded in every run so far) has no node flags."""
    for launcher in ("accelerate", "torchrun"):
        argv = launch.launch(_cell(launcher), CPU, ranks=2).argv
        assert not {"--node_rank", "--machine_rank", "--main_process_ip"} & set(argv)
        assert _flag(list(argv), "--nnodes" if launcher == "torchrun" else "--num_machines") == "1"


def test_ranks_must_spread_evenly_over_the_nodes():
    with pytest.raises(HarnessError, match="--nodes 2: 3 ranks"):
        SlurmEngine(SlurmOptions(nodes=2)).launch(_cell("torchrun"), CPU, ranks=3, out=Path("/o"))


def test_the_job_script_starts_one_launcher_per_node_at_the_first_node():
    lnch = launch.node_launch(_cell("torchrun"), CPU, nodes=2, ranks=4, python="python3", workload="/w/run.py", out="/o")
    script = slurm.batch_script(lnch)
    assert script.startswith("#!/bin/bash\n")
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in script
    assert "srun --ntasks-per-node=1" in script
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0  # it parses


def test_the_allocation_asks_for_one_launcher_task_per_node_and_the_users_choices():
    opts = SlurmOptions(nodes=2, partition="gpu", account="ml", time="0:30:00", extra=("--exclusive",))
    assert opts.check().sbatch_args() == ["--nodes=2", "--ntasks-per-node=1", "--partition=gpu", "--account=ml",
                                          "--time=0:30:00", "--exclusive"]


def test_cells_run_together_ask_for_whole_nodes_and_cells_run_one_at_a_time_do_not():
    """--jobs N > 1 runs N cells at the same time (each its own job): sbatch --exclusive, so that Slurm
    (select/cons_tres) never packs two cells onto one node; --jobs 1 leaves the nodes' sharing to the site."""
    def args(jobs: int, extra: tuple[str, ...] = ()) -> list[str]:
        return engines.choose("slurm", Progress(), SlurmOptions(nodes=2, extra=extra), jobs).options.sbatch_args()

    assert args(1) == ["--nodes=2", "--ntasks-per-node=1"]
    assert args(2) == ["--nodes=2", "--ntasks-per-node=1", "--exclusive"]
    assert args(2, ("--exclusive",)).count("--exclusive") == 1  # the user's own is not doubled
    assert "--exclusive" in engines.choose("slurm", Progress(), None, 3).options.sbatch_args()  # no slurm flag given


def test_an_interrupted_engine_ends_its_running_jobs_as_ctrl_c_ends_one(tmp_path):
    """Ctrl-C reaches the main thread only; cells run together are supervised in worker threads, where
    the job's poll says it instead (before asking Slurm), and the supervisor records `interrupted`."""
    engine = SlurmEngine(SlurmOptions())
    running = slurm.SlurmRunning("1", tmp_path / "log", "token", stop=engine._stop)
    engine.interrupt()
    with pytest.raises(KeyboardInterrupt):
        running.poll()
    slurm.started(running)  # a job still pending is not waited for: poll says it next


@pytest.mark.parametrize("line, code", [
    ("JobId=7 JobName=x JobState=COMPLETED Reason=None ExitCode=0:0", 0),
    ("JobId=7 JobName=x JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0", 1),
    ("JobId=7 JobName=x JobState=CANCELLED Reason=None ExitCode=0:9", -9),
    ("JobId=7 JobName=x JobState=CANCELLED Reason=None ExitCode=0:0", 1),  # cancelled before it ran
])
def test_the_jobs_exit_code_is_the_launchers(line, code):
    assert slurm.exit_code(slurm.parse_job(line)) == code


def test_without_slurm_the_run_is_an_infra_error_with_the_fix(tmp_path):
    """A PATH with this Python but no sbatch: exit 4, the fix named, nothing run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bin_dir), "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent.sock"}
    proc = subprocess.run([str(bin_dir / "python3"), "-m", "harness", "matrix", "--engine", "slurm", "--results",
                           str(tmp_path / "res")], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert "sbatch" in proc.stderr and "scripts/slurm-local.sh" in proc.stderr and "Traceback" not in proc.stderr


def _collected(*nodes: dict, num_nodes: str = "2") -> slurm.SlurmRunning:
    """A running job whose collector already answered with `nodes` (what on_nodes() read back)."""
    running = slurm.SlurmRunning("7", Path("/nonexistent/launcher.log"), "token")
    running.found, running.state = list(nodes), {"NumNodes": num_nodes, "JobState": "RUNNING"}
    return running


def test_a_rank_is_gone_only_when_every_node_answered_and_none_holds_it():
    n1 = {"node": "n1", "ranks": {"0": 100}, "processes": [{"pid": 100, "rank": "0", "state": "S"}]}
    n2 = {"node": "n2", "ranks": {}, "processes": [{"pid": 90, "rank": None, "state": "S"}]}  # its launcher
    assert _collected(n1, n2).gone({0: 100, 1: 101}) == {1}
    assert _collected(n1).gone({0: 100, 1: 101}) == set()  # n2 did not answer: it may hold rank 1
    # a live process with RANK=1 whose pid the collector could not match is not called gone
    n2_alive = {**n2, "processes": [{"pid": 55, "rank": "1", "state": "S"}]}
    assert _collected(n1, n2_alive).gone({0: 100, 1: 101}) == set()
    assert _collected(num_nodes="1").gone({0: 100}) == set()  # no collector ran


# ------------------------------------------------------------------------------------ a real Slurm
def _no_jobs_of(run_id: str) -> None:
    left = [j for j in slurm.queued() if run_id in j[1]]
    assert not left, f"jobs of the harness left in squeue: {left}"


@pytest.mark.slurm
def test_a_healthy_cell_passes_with_the_host_engines_record(slurm_cluster, tmp_path):
    records = {}
    for engine in ("slurm", "host"):
        res = tmp_path / engine
        flags = ["--nodes", "1"] if engine == "slurm" else []
        proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", engine, *flags, "--only",
                               "*acc1.15.0+default", "--results", str(res), "--run-id",
                               f"t-{engine}"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        [record_file] = (res / f"t-{engine}" / "cells").glob("*/record.json")
        records[engine] = json.loads(record_file.read_text())
    assert records["slurm"]["outcome"]["status"] == "pass", records["slurm"]["outcome"]
    assert records["slurm"].keys() == records["host"].keys()
    assert records["slurm"]["outcome"].keys() == records["host"]["outcome"].keys()
    run = tmp_path / "slurm" / "t-slurm"
    facts = json.loads((run / "run.json").read_text())["host"]["engine"]
    assert facts["name"] == "slurm" and facts["nodes"] == 1 and facts["version"].startswith("slurm")
    [job] = run.glob("cells/*/attempt-1/slurm-job.json")
    job = json.loads(job.read_text())
    assert job["state"] == "COMPLETED" and job["job_id"].isdigit() and job["nodes"]
    _no_jobs_of("t-slurm")


@pytest.mark.slurm
def test_a_stopped_rank_is_a_hang_in_its_phase(slurm_cluster, tmp_path):
    from .test_supervise import _run

    record, result = _run((SlurmEngine(), ""), tmp_path, "slurm-stop", ("--hold-at", "prepare"), (1, "prepare", "STOP"))
    assert result.status == "hang", result
    assert result.phase == "prepare" and result.detail["ranks_behind"] == [1]
    assert "rank 1" in result.reason and "stopped" in result.reason
    assert "did not answer" in record.forensics.stacks["1"]
    _no_jobs_of("slurm-stop")


@pytest.mark.slurm
def test_a_killed_rank_is_a_fail(slurm_cluster, tmp_path):
    from .test_supervise import TIMEOUTS, _run

    # Slurm ends the job a second or more after the kill (the launcher, srun's kill-on-bad-exit, the
    # controller), over 4 s on a loaded CI machine: the bandwidth threshold leaves room, and a fail ends
    # the attempt as soon as the job ends, so it costs nothing. A slow end is still a fail: the next test.
    timeouts = TIMEOUTS.model_copy(update={"bandwidth": 15})
    _record, result = _run((SlurmEngine(), ""), tmp_path, "slurm-kill", ("--hold-at", "bandwidth"), (1, "bandwidth", "KILL"),
                          timeouts=timeouts)
    assert result.status == "fail", result
    assert result.error_class == "killed" and result.phase == "bandwidth"
    _no_jobs_of("slurm-kill")


@pytest.mark.slurm
def test_a_killed_rank_the_job_has_not_noticed_is_a_fail_found_by_the_nodes_collector(slurm_cluster, tmp_path):
    """Rank 1 SIGKILLed behind its stopped launcher: the job runs on, and only the collector on the node
    can tell the rank is gone (a zombie), not stopped."""
    from .test_supervise import run_killed_behind_a_stopped_launcher

    record, result = run_killed_behind_a_stopped_launcher((SlurmEngine(), ""), tmp_path, "slurm-gone")
    assert record.ended_by == "stall" and record.stall.gone == (1,), record.stall
    assert result.status == "fail" and result.error_class == "killed" and result.detail["rank"] == 1, result
    # the node's collector answered and saw no live rank 1 (rank 0 had lost its peer and exited as well;
    # with the launcher stopped both are zombies); where a rank is alive it finds it: the stopped-rank test
    [node] = record_nodes(record)
    assert node["processes"] and "1" not in node["ranks"], node
    assert "lost its peer" in result.detail["victims"]["0"], result.detail
    _no_jobs_of("slurm-gone")


def record_nodes(record) -> list[dict]:
    """What the collector found on each node, as it wrote it into the attempt folder."""
    return [json.loads(p.read_text()) for p in sorted(Path(record.out_dir, "node-forensics").glob("*.json"))]


DEAD_HARNESS = """
import os, time
from harness import owner
owner.watch_over("slurm")  # as the slurm engine does before its first job
print(owner.current().marker, owner._watchdogs[f"slurm@{os.getpid()}"].pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slurm
def test_the_sweep_cancels_the_job_of_a_dead_harness(slurm_cluster, tmp_path):
    """A harness that submitted a job and died with its watchdog (both SIGKILLed): the next command's
    sweep finds the watchdog's note, asks Slurm, and cancels the job."""
    harness = subprocess.Popen([sys.executable, "-c", DEAD_HARNESS], cwd=REPO, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    marker, watchdog = harness.stdout.readline().split()
    note = owner.job_note(marker)
    assert note.exists(), f"watch_over wrote no note at {note} before the harness's first job"
    submitted = subprocess.run(["sbatch", "--parsable", "--job-name=nccl-harness-t-dead-cell", f"--comment={marker}",
                                f"--output={tmp_path / 'out.log'}", "--wrap", "sleep 300"],
                               capture_output=True, text=True, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        os.kill(int(watchdog), signal.SIGKILL)
        harness.kill()
        harness.wait()
        found = reaper.sweep(Progress(), connect=False)
        assert ("slurm", job_id) in [(i.engine, i.name) for i in found]
        _no_jobs_of("t-dead-cell")
        assert not note.exists()  # cancelled: the next command does not ask Slurm again
    finally:
        harness.kill()
        subprocess.run(["scancel", job_id])


def test_without_a_note_from_a_dead_harness_no_command_asks_slurm(monkeypatch, tmp_path):
    """Every command sweeps; Slurm is asked only where a dead harness left a note (squeue waits about 7 s
    where Slurm is installed and its controller down), and always for `invoke clean` (unowned)."""
    asked = []
    monkeypatch.setattr(reaper, "JOB_NOTES", tmp_path / "notes")
    monkeypatch.setattr(reaper.slurm, "queued", lambda timeout=30: asked.append(timeout) or [])
    reaper.sweep(Progress(), connect=False)
    assert asked == []
    (tmp_path / "notes").mkdir()
    alive = owner.current().marker
    (tmp_path / "notes" / "alive").write_text(alive)
    reaper.sweep(Progress(), connect=False)
    assert asked == []  # its harness is alive: its watchdog will cancel its jobs
    dead = alive.rsplit("/", 1)[0] + "/1"  # this pid with another start time: a process that is gone
    (tmp_path / "notes" / "dead").write_text(dead)
    reaper.sweep(Progress(), connect=False)
    assert asked == [5] and not (tmp_path / "notes" / "dead").exists() and (tmp_path / "notes" / "alive").exists()
    reaper.sweep(Progress(), connect=False, unowned=True)
    assert asked == [5, 5]


@pytest.mark.slurm
def test_the_engine_checks_the_controller_and_the_partition(slurm_cluster):
    checks = {c.name: c for c in SlurmEngine().checks(())}
    assert checks["slurm controller"].ok and checks["slurm partition"].ok
    missing = {c.name: c for c in SlurmEngine(SlurmOptions(partition="nosuchpart")).checks(())}["slurm partition"]
    assert not missing.ok and "--partition" in missing.fix
    with pytest.raises(InfraError, match="nosuchpart"):
        SlurmEngine(SlurmOptions(partition="nosuchpart")).preflight(Progress())


@pytest.mark.slurm
def test_a_job_that_cannot_start_is_an_infra_error_with_slurms_reason(slurm_cluster, tmp_path):
    """More nodes than the one-node Slurm has: sbatch accepts the job, which pends (PartitionNodeLimit). The
    first such job is the shared-folder probe at the start of the run, so the run stops there, before any
    cell, with Slurm's reason (a cell's own job would be an INFRA-ERROR cell for the same reason)."""
    nodes = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True, check=True).stdout.split()
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--nodes",
                           str(sum(int(n) for n in nodes) + 1), "--only", "*acc1.15.0+default", "--results",
                           str(tmp_path), "--run-id", "t-pending"], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "cannot start as asked" in proc.stderr and "PartitionNodeLimit" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    _no_jobs_of("t-pending")


@pytest.mark.slurm
def test_a_harness_killed_mid_cell_leaves_no_job(slurm_cluster, tmp_path):
    """SIGKILL of the harness while its job runs: its watchdog (harness/reaper.py) cancels the job, and
    none of the cell's processes is left on this machine."""
    import signal
    import time

    harness = subprocess.Popen([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--only",
                                "*acc1.15.0+default", "--results", str(tmp_path), "--run-id", "t-killed"], cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("t-killed/cells/*/attempt-1/events-rank1.jsonl")):  # the ranks run
            assert harness.poll() is None and time.monotonic() < deadline, "the job never ran"
            time.sleep(0.2)
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        def ranks() -> list:
            return [p for p in host.marked(owner.OWNER_VAR) if "t-killed" in p.cmd]

        deadline = time.monotonic() + 60
        while ([j for j in slurm.queued() if "t-killed" in j[1]] or ranks()) and time.monotonic() < deadline:
            time.sleep(0.5)
        _no_jobs_of("t-killed")
        assert not ranks(), [p.describe() for p in ranks()]
    finally:
        if harness.poll() is None:
            harness.kill()


@pytest.mark.slurm
def test_the_dry_run_prints_the_job_script_and_the_sbatch_line(slurm_cluster, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "matrix", "--engine", "slurm", "--nodes", "2", "--ranks",
                           "4", "--partition", "debug", "--only", "*acc1.15.0+default+torchrun", "--dry-run",
                           "--results", str(tmp_path)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "srun --ntasks-per-node=1" in proc.stdout and "--nproc_per_node 2" in proc.stdout
    assert "sbatch --parsable" in proc.stdout and "--nodes=2" in proc.stdout and "--partition=debug" in proc.stdout
    assert not list(tmp_path.iterdir()) and not [j for j in slurm.queued() if "torchrun" in j[1]]  # nothing ran


@pytest.mark.parametrize("output, works, said", [
    ('{"torch": "2.13.0+cpu", "accelerate": "1.15.0", "nccl": null, "gpus": 0, "python": "3.11.7"}\n', True,
     "python 3.11.7, torch 2.13.0+cpu, accelerate 1.15.0, NCCL - (no GPU), 0 GPU(s)"),
    ('{"torch": "2.11.0", "accelerate": "1.15.0", "nccl": "2.28.9", "gpus": 8, "python": "3.12.3"}', True,
     "python 3.12.3, torch 2.11.0, accelerate 1.15.0, NCCL 2.28.9, 8 GPU(s)"),
    ('{"error": "ModuleNotFoundError: No module named \'torch\'"}', False, "ModuleNotFoundError: No module named 'torch'"),
    ("bash: /opt/py/bin/python3: No such file or directory\n", False, "bash: /opt/py/bin/python3: No such file or directory"),
    ("", False, "no output"),
])
def test_a_nodes_runtime_answer_is_its_versions_or_what_went_wrong(output, works, said):
    assert slurm.runtime_answer(output) == (works, said)


@pytest.mark.slurm
def test_doctor_checks_the_shared_folder_and_the_runtime_on_the_node(slurm_cluster, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "doctor", "--engine", "slurm", "--results", str(tmp_path)],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = {line.split()[1]: line for line in proc.stdout.splitlines() if line.startswith(("ok", "FAIL"))}
    assert lines["shared"].startswith("ok") and "seen by every node" in lines["shared"], proc.stdout
    assert lines["node"].startswith("ok") and "torch 2.13.0" in lines["node"] and "accelerate" in lines["node"], proc.stdout
    assert not list(tmp_path.iterdir())  # the probe's files are gone
    _no_jobs_of("node-probe")


# ------------------------------------------------------------------------------------ --gpus-per-node
# No GPU machine here has Slurm: these are the job's words, checked as the nodes' shell would run them.
GPU = matrix.load(matrix.DEFAULT_GPU_MATRIX)


def _gpu_spec(tmp_path: Path, launcher: str) -> tuple[SlurmEngine, object]:
    from harness import runner

    engine = SlurmEngine(SlurmOptions(nodes=2, gpus_per_node=4, partition="gpu"))
    cell = next(c for c in GPU.runnable if not c.stack.is_cpu and c.launcher == launcher)
    opts = runner.RunOptions("r1", tmp_path, (), 2)  # --gpus-per-node: no host GPU ids, Slurm picks the nodes'
    return engine, runner.spec_for(cell, GPU, engine, opts, "", 1, tmp_path / "attempt-1")


@pytest.mark.parametrize("launcher, per_node_flag, per_node", [("accelerate", "--num_processes", "8"),
                                                               ("torchrun", "--nproc_per_node", "4")])
def test_gpus_per_node_gives_each_node_that_many_ranks(tmp_path, launcher, per_node_flag, per_node):
    engine, spec = _gpu_spec(tmp_path, launcher)
    assert spec.launch.ranks == 8 and spec.launch.device == "cuda"  # world = nodes x G
    script = slurm.batch_script(spec.launch)
    assert launch.shell_line([per_node_flag, per_node]) in script
    argv = engine.sbatch_argv(spec, tmp_path / "job.sh")
    assert "--nodes=2" in argv and "--gpus-per-node=4" in argv and "--ntasks-per-node=1" in argv
    # Slurm sets each node's CUDA_VISIBLE_DEVICES; the harness names no GPU of its own host
    assert "CUDA_VISIBLE_DEVICES" not in host.host_env(spec)
    assert "CUDA_VISIBLE_DEVICES" not in engine.equivalent(spec)


def test_gpus_per_node_is_in_the_rerun_flags_and_the_recorded_facts():
    opts = SlurmOptions(nodes=2, gpus_per_node=4, partition="gpu").check()
    assert opts.flags() == ["--nodes=2", "--gpus-per-node=4", "--partition=gpu"]
    assert SlurmEngine(opts).facts()["gpus_per_node"] == 4
    assert SlurmOptions(nodes=2).flags() == ["--nodes=2"]  # CPU runs: unchanged


def test_cpu_cells_keep_their_ranks_under_gpus_per_node(tmp_path):
    engine = SlurmEngine(SlurmOptions(nodes=2, gpus_per_node=4))
    assert engine.launch(_cell("torchrun"), CPU, ranks=2, out=tmp_path).ranks == 2


# ------------------------------------------------------------------------------------ --node-runtime
class InContainers:
    """Signals a rank by the pid it wrote (its container's), through the host pid of the cell's process
    that has that pid inside (collector.py reads NSpid the same way)."""

    def __init__(self) -> None:
        self.running = None

    def __call__(self, running) -> None:
        self.running = running

    def signal(self, pid: int, sig: str) -> None:
        from harness.engines import collector

        for p in host.tagged(self.running.token):
            if collector._inner_pid(p.pid) == pid and p.cmd.split()[1:2] == ["-u"]:  # the rank, not its init
                os.kill(p.pid, getattr(signal, f"SIG{sig}"))
                return
        raise AssertionError(f"no rank with pid {pid} in the cell's containers")


@pytest.mark.slurm
def test_a_stopped_rank_in_a_docker_container_on_the_node_is_a_hang_and_no_container_is_left(slurm_cluster, engine,
                                                                                                 cpu_image, tmp_path):
    """--node-runtime docker on the one-node Slurm (its node is this host, whose engine has the cell's image):
    the ranks run in the image, the stopped one is found in its container on the node by the collector,
    and the container is removed on the node before the job is cancelled."""
    from harness import outcome, supervise
    from harness.engines.docker import LABEL_RUN

    from .conftest import Fault
    from .test_supervise import TIMEOUTS, _spec

    slurm_engine = SlurmEngine(SlurmOptions(runtime="docker"))
    spec = _spec(slurm_engine, tmp_path / "docker-stop", ("--hold-at", "prepare"), image=cpu_image)
    fault, ranks = Fault(spec.out_dir, 1, "prepare", "STOP"), InContainers()
    record = supervise.supervise(slurm_engine, spec, TIMEOUTS, on_event=fault,
                                 on_start=lambda running: (ranks(running), fault.start(ranks)))
    result = outcome.classify(record.to_json())
    assert result.status == "hang" and result.phase == "prepare" and result.detail["ranks_behind"] == [1], result
    node = record.ranks["1"].placement.node  # Slurm's variables reached the rank in its container
    stopped = [line.split() for line in record.forensics.processes.splitlines() if line.startswith(f"{node}: ")]
    assert [w for w in stopped if w[2] == "T" and "/opt/harness/workload/run.py" in w], record.forensics.processes
    assert "Thread" in record.forensics.stacks["0"]  # rank 0 answered SIGUSR1 in its container
    assert record.leftovers == [] and engine.client.leftovers(f"{LABEL_RUN}={spec.run_id}") == []
    _no_jobs_of("docker-stop")


def test_each_node_runtime_has_its_exact_srun_step(tmp_path):
    """podman and pyxis cannot run here (no podman, no pyxis plugin): their job lines, word for word."""
    from harness import runner
    from harness.engines import noderuntime

    cell = next(c for c in CPU.cells if c.launcher == "torchrun" and c.variant.name == "default")
    opts = runner.RunOptions("r1", tmp_path, (), 2)
    steps = {}
    for runtime in noderuntime.RUNTIMES:
        engine = SlurmEngine(SlurmOptions(nodes=2, runtime=runtime))
        spec = runner.spec_for(cell, CPU, engine, opts, "img:1", 1, tmp_path / "a1")
        steps[runtime] = noderuntime.node_step(runtime, spec, "own/er", ("HARNESS_CELL_TOKEN",))
        assert f"--node-runtime={runtime}" in engine.options.flags() or runtime == "host"
    out = str(tmp_path / "a1")
    assert steps["host"].words[0] == sys.executable and steps["host"].srun_flags == ()
    podman = list(steps["podman"].words)
    assert podman[:5] == ["podman", "run", "--rm", "--network=host", "--init"]
    assert podman[podman.index("-v") + 1] == f"{Path(out).resolve()}:/out"
    assert ["-e", "HARNESS_CELL_TOKEN"] == podman[podman.index("HARNESS_CELL_TOKEN") - 1:podman.index("HARNESS_CELL_TOKEN") + 1]
    assert podman[podman.index("img:1") + 1:][:3] == ["python", "-m", "torch.distributed.run"]
    assert steps["docker"].words[1:] == steps["podman"].words[1:]  # the same container, declared once
    assert steps["pyxis"].srun_flags == ("--container-image=img:1", f"--container-mounts={out}:/out",
                                         "--container-workdir=/opt/harness")
    assert steps["pyxis"].words[:3] == ("python", "-m", "torch.distributed.run") and "/out" in steps["pyxis"].words
    script = slurm.batch_script(steps["pyxis"])
    assert "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 --container-image=img:1 " in script
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    assert noderuntime.remove_line("podman", spec).startswith("podman ps -aq --filter label=io.nccl-harness.run=r1 ")


def test_a_gpu_cell_in_a_node_container_gets_the_nodes_gpus(tmp_path):
    _engine, spec = _gpu_spec(tmp_path, "torchrun")
    from harness.engines import noderuntime

    docker_words = noderuntime.node_step("docker", spec, "own/er", ()).words
    podman_words = noderuntime.node_step("podman", spec, "own/er", ()).words
    assert docker_words[docker_words.index("--gpus"):][:2] == ("--gpus", "all")
    assert podman_words[podman_words.index("--device"):][:2] == ("--device", "nvidia.com/gpu=all")
    assert "CUDA_VISIBLE_DEVICES" in docker_words  # Slurm's choice of the node's GPUs, passed through


RANK_LIKE = """
import faulthandler, os, signal, sys, time
faulthandler.register(signal.SIGUSR1, file=open(sys.argv[1] + "/stacks-rank3.txt", "w"), all_threads=True)
open(sys.argv[1] + "/pid-rank3", "w").write(str(os.getpid()))
time.sleep(60)
"""


def test_the_collector_finds_a_rank_by_its_token_and_dumps_it_where_it_runs(tmp_path):
    """collector.py as a node runs it (python -c, its source only), on a real process of this machine that
    carries a cell's token and RANK=3, as a launcher's rank does; another process with RANK=3 but another
    token is not touched."""
    import uuid

    token = uuid.uuid4().hex
    rank = subprocess.Popen([sys.executable, "-c", RANK_LIKE, str(tmp_path)],
                            env={**os.environ, host.TOKEN_VAR: token, "RANK": "3"})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, host.TOKEN_VAR: "another", "RANK": "3"})
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid-rank3").exists():
            assert time.monotonic() < deadline, "the rank never wrote its pid"
            time.sleep(0.05)
        done = subprocess.run([sys.executable, "-c", slurm.COLLECTOR.read_text(), f"{host.TOKEN_VAR}={token}",
                               str(tmp_path)], env={**os.environ, "SLURMD_NODENAME": "node-x"}, timeout=60)
        assert done.returncode == 0
        found = json.loads((tmp_path / "node-forensics" / "node-x.json").read_text())
        assert found["node"] == "node-x" and found["ranks"] == {"3": rank.pid}
        assert [p["pid"] for p in found["processes"]] == [rank.pid]
        deadline = time.monotonic() + 10
        while "most recent call first" not in (tmp_path / "stacks-rank3.txt").read_text():  # it answered SIGUSR1
            assert time.monotonic() < deadline, "no thread dump after SIGUSR1"
            time.sleep(0.05)
        if found["py_spy_path"]:
            assert "Process " + str(rank.pid) in found["py_spy"]["3"], found["py_spy"]
        assert other.poll() is None  # not the cell's: never signalled
    finally:
        rank.kill()
        other.kill()
