"""A Slurm job of the harness, from this host: its name and batch script (one launcher per node through
srun), its state (`scontrol show job`), its cancel (`scancel`, waited for until Slurm no longer lists
it), the harness's jobs still queued, and one submitted attempt as the supervisor's Running handle
(SlurmRunning: forensics on every node through collector.py). The slurm engine (slurm.py) submits."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

from .. import launch as launch_mod
from .. import proc, rankfiles
from ..errors import HarnessError, InfraError
from .base import RemoteDumps, Stop
from .host import TOKEN_VAR, CellProcesses
from .noderuntime import NodeStep

FIX = "Fix: install slurm-wlm (a cluster's login node has it), or run scripts/slurm-local.sh for a one-node Slurm here."
JOB_PREFIX = "nccl-harness-"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
         "OUT_OF_MEMORY"}  # JOB STATE CODES, squeue(1); COMPLETING is not ended: processes may still run
# Pending reasons that mean the job cannot start as asked (squeue(1), JOB REASON CODES); any other
# (Resources, Priority...) is waited for, PENDING_LIMIT_S at most. Seen here: --nodes 2 on the one-node
# Slurm of scripts/slurm-local.sh is accepted by sbatch and pends with PartitionNodeLimit forever, which
# the supervisor called a hang in startup before the job waited for its ranks to start.
NEVER_STARTS = ("PartitionNodeLimit", "PartitionTimeLimit", "PartitionDown", "PartitionInactive", "ReqNodeNotAvail",
                "BadConstraints", "InvalidAccount", "InvalidQOS", "NodeDown", "DependencyNeverSatisfied",
                "JobHeldAdmin", "JobHeldUser", "AssocMax", "AssocGrp", "QOSMax", "QOSGrp")
PENDING_LIMIT_S = 900.0
# A job placed on named nodes (sbatch --nodelist: invoke fleet) pends with ReqNodeNotAvail while one of them is
# still busy or completing the job before (seen on the container cluster: a pair's job right after its nodes'
# own ended, "ReqNodeNotAvail,_UnavailableNodes:n3"): for those it is waited for, --wait at most.
PLACED_NEVER_STARTS = tuple(r for r in NEVER_STARTS if r != "ReqNodeNotAvail")
STATE_POLL_S = 1.0  # scontrol at most once a second; the supervisor polls every 0.1 s
CANCEL_WAIT_S = 60.0

def job_name(run_id: str, cell_id: str) -> str:
    return f"{JOB_PREFIX}{run_id}-{cell_id}"


def batch_script(step: launch_mod.Launch | NodeStep) -> str:
    """The job's script: the rendezvous address (the allocation's first node) and a port of this job,
    then one launcher per node through srun (in the node runtime's container, when it has one); the
    launcher's exit code is the job's."""
    if isinstance(step, launch_mod.Launch):
        step = NodeStep((), step.argv)
    return "\n".join([
        "#!/bin/bash",
        "# written by nccl-harness (harness/engines/slurm.py): one launcher per node",
        'HARNESS_RDZV_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "HARNESS_RDZV_PORT=$((20000 + SLURM_JOB_ID % 20000))  # two jobs on one node meet on two ports",
        "export HARNESS_RDZV_ADDR HARNESS_RDZV_PORT",
        f"exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 {''.join(shlex.quote(f) + ' ' for f in step.srun_flags)}"
        f"bash -c {shlex.quote('exec ' + launch_mod.shell_line(step.words))}",
        "",
    ])


def parse_job(text: str) -> dict[str, str]:
    """`scontrol show job -o ID`'s one line as KEY=VALUE pairs (values without spaces are all we read)."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def exit_code(job: dict[str, str]) -> int:
    """The batch script's exit code from ExitCode=CODE:SIGNAL; a signal is -SIGNAL as Popen says it; a job
    that ended without running (cancelled while pending) is 1 when Slurm says 0."""
    code, _, sig = job.get("ExitCode", "1:0").partition(":")
    if sig.isdigit() and int(sig):
        return -int(sig)
    value = int(code) if code.isdigit() else 1
    return value if value or job.get("JobState") == "COMPLETED" else 1


def _scontrol_job(job_id: str) -> dict[str, str] | None:
    """The job as the controller knows it; None once it is forgotten (MinJobAge after its end)."""
    result = proc.run(["scontrol", "show", "job", "-o", job_id], timeout=30)
    if result.returncode != 0:
        if "Invalid job id" in result.output:
            return None
        proc.check(result, "scontrol show job", FIX)
    return parse_job(result.output)


def queued(timeout: float = 30) -> list[tuple[str, str, str, str]]:
    """The harness's jobs Slurm still lists: (id, name, state, comment); [] without squeue or an answer."""
    if proc.which("squeue") is None:
        return []
    result = proc.run(["squeue", "-h", "-o", "%i|%j|%T|%k"], timeout=timeout)
    if result.returncode != 0:
        return []
    jobs = [tuple((line.split("|", 3) + ["", "", ""])[:4]) for line in result.output.splitlines() if line.strip()]
    return [j for j in jobs if j[1].startswith(JOB_PREFIX)]  # type: ignore[misc]


def cancel(job_ids: list[str], deadline_s: float = CANCEL_WAIT_S) -> list[str]:
    """scancel the jobs, then wait until squeue lists none of them; returns those still listed."""
    if not job_ids:
        return []
    proc.run(["scancel", *job_ids], timeout=30)
    deadline = time.monotonic() + deadline_s
    while True:
        left = [j[0] for j in queued() if j[0] in job_ids]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


COLLECTOR = Path(__file__).with_name("collector.py")
NODE_FORENSICS_BYTES = 16 << 20  # a node's processes and py-spy dumps: tens of KB
COLLECT_S = 60.0  # the collector's srun: py-spy takes 20 s at most per rank


class SlurmRunning:
    """A submitted job; its ranks on this machine are found by their token (Slurm exports the
    submission's environment to every task); forensics on every node go through collector.py."""

    def __init__(self, job_id: str, log: Path, token: str, out: Path | None = None, python: str = "python3",
                 remove: str | None = None, stop: Stop | None = None) -> None:
        self.here = CellProcesses(log, token)  # the job's processes on this machine (the submitting host)
        self.job_id, self.out, self.python, self.remove = job_id, out, python, remove
        self.stop = stop or Stop()  # SlurmEngine.interrupt: Ctrl-C reaching a cell run in a worker thread
        self.state: dict[str, str] | None = {}
        self.checked = 0.0
        self.found: list[dict[str, Any]] | None = None  # the collector's findings, once per attempt

    @property
    def token(self) -> str:
        return self.here.token

    def node_count(self) -> str:
        """The job's node count as Slurm last said it (NumNodes, "2" or a range "2-4": its low end)."""
        return (self.state or {}).get("NumNodes", "1").split("-")[0]

    def on_every_node(self, words: list[str], log: Path | None = None) -> None:
        """`words` once on every node of the running job, beside its ranks (`srun --overlap`)."""
        nodes = self.node_count()
        try:
            proc.run(["srun", f"--jobid={self.job_id}", "--overlap", f"--nodes={nodes}", "--ntasks-per-node=1", *words],
                     timeout=COLLECT_S, log=log)
        except HarnessError:
            pass  # no srun here: what this machine sees is all there is

    def on_nodes(self) -> list[dict[str, Any]]:
        """collector.py on every node of the job, one task each beside the ranks (`srun --overlap`): the
        cell's processes there, SIGUSR1 and py-spy to its ranks; what each node found. A collector that
        could not run leaves its node out (the record then has only what this machine saw)."""
        if self.found is None and self.out is not None:
            self.on_every_node([self.python, "-c", COLLECTOR.read_text(), f"{TOKEN_VAR}={self.token}", str(self.out)],
                               self.out / "node-forensics.log")
            self.found = []
            for path in sorted((self.out / "node-forensics").glob("*.json")):
                try:  # in the attempt folder, beside what the ranks write: read as theirs (rankfiles)
                    self.found.append(json.loads(rankfiles.head(path, NODE_FORENSICS_BYTES)))
                except (OSError, ValueError, RecursionError):
                    continue
        return self.found or []

    def signal(self, pid: int, signame: str) -> None:
        """A rank's pid on this machine (the one-node Slurm); the supervisor reaches the ranks on every
        node through dump_ranks instead."""
        self.here.signal(pid, signame)

    def native_dump(self, pid: int) -> str:
        return self.here.native_dump(pid)

    def native_stacks(self, pid: int) -> str:
        return self.here.native_stacks(pid)

    def nccl_ras(self) -> str:
        return next((node["ras"] for node in self.on_nodes() if node.get("ras")), "")

    def process_list(self) -> str:
        found = self.on_nodes()
        if not found:
            return self.here.process_list()
        return "\n".join(f"{node['node']}: {p['pid']:>8} {p['state']} {p['cmd'][:200]}"
                         for node in found for p in node.get("processes", []))

    def dump_ranks(self, pids: dict[int, int]) -> RemoteDumps | None:
        found = self.on_nodes()
        if not found:
            return None  # no collector ran: this machine's ranks, as the host engine does

        def by_rank(key: str) -> dict[str, str]:
            return {str(rank): f"[{node['node']}]\n{dump}" for node in found for rank, dump in (node.get(key) or {}).items()}

        ras = next((f"[{node['node']}]\n{node['ras']}" for node in found if node.get("ras")), "")
        return RemoteDumps(py_spy=by_rank("py_spy"), native=by_rank("native"), ras=ras)

    def gone(self, pids: dict[int, int]) -> set[int]:
        """Ranks no node's collector found alive, neither by their pid nor by a live process with their
        RANK; none unless the collector answered from every node of the job (a node that did not answer
        may hold them)."""
        found = self.on_nodes()
        nodes = self.node_count()
        if not found or not nodes.isdigit() or len(found) < int(nodes):
            return set()
        live = {str(rank) for node in found for rank in node.get("ranks", {})}
        live |= {str(p.get("rank")) for node in found for p in node.get("processes", []) if p.get("rank") is not None}
        return {rank for rank in pids if str(rank) not in live}

    def output_tail(self, lines: int = 80) -> str:
        return self.here.output_tail(lines)

    def job(self) -> dict[str, str] | None:
        now = time.monotonic()
        if now - self.checked >= STATE_POLL_S:
            self.state, self.checked = _scontrol_job(self.job_id), now
        return self.state

    def poll(self) -> int | None:
        self.stop.check()  # the supervisor takes it as Ctrl-C: records `interrupted`, then kill()
        job = self.job()
        if job is None:
            raise InfraError(f"Slurm job {self.job_id} ended and was forgotten before its state was read. {FIX}")
        if job.get("JobState") not in ENDED:
            return None
        return exit_code(job)

    def kill(self) -> None:
        """scancel the job and wait until Slurm lists it no more; then nothing of it on this machine. A
        node runtime's containers are removed on every node first: a killed `docker run` leaves its
        container running, and once the job is gone srun can no longer reach its nodes."""
        if self.remove:
            try:
                running = (self.job() or {}).get("JobState") == "RUNNING"
            except HarnessError:
                running = False  # the controller did not answer: scancel and the sweep still follow
            if running:
                self.on_every_node(["bash", "-c", self.remove])
        cancel([self.job_id])
        self.here.kill()

    def leftovers(self) -> list[str]:
        jobs = [f"slurm job {i} {name} ({state})" for i, name, state, _ in queued() if i == self.job_id]
        return jobs + self.here.leftovers()


def started(running: SlurmRunning, limit_s: float = PENDING_LIMIT_S, never: tuple[str, ...] = NEVER_STARTS) -> None:
    """Wait while the job is pending; a job that cannot start (`never`'s reasons), or is still pending after
    `limit_s`, is an InfraError with Slurm's reason, never a hang."""
    deadline = time.monotonic() + limit_s
    while not running.stop.is_set():  # interrupted while pending: poll() says so to the supervisor
        job = running.job() or {}
        state, reason = job.get("JobState", ""), job.get("Reason", "")
        if state != "PENDING":
            return
        if reason.startswith(never) or time.monotonic() > deadline:
            why = "cannot start as asked" if reason.startswith(never) else f"was still pending after {limit_s:.0f} s"
            raise InfraError(f"Slurm job {running.job_id} {why}: pending, reason {reason} (squeue(1), JOB REASON "
                             "CODES). Fix: ask for what the partition has (`sinfo -N -l`; --nodes, --partition, "
                             "--time, --account), or wait until the cluster has room.")
        time.sleep(STATE_POLL_S)


