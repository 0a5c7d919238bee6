"""The slurm engine: each attempt of a cell is one Slurm job over --nodes nodes, submitted with `sbatch`;
its batch script runs one launcher per node through `srun` (node count, index and the allocation's
first node as rendezvous from Slurm's variables, launch.node_launch), on the nodes' own Python stack as
the host engine does. The ranks write their events into the attempt's folder, which every node must see
(shared storage; on one machine it trivially is), and the supervisor follows them unchanged.

The job's state comes from `scontrol show job` (accounting storage, and so `sacct`, is often not
configured); the job is cancelled with `scancel` and waited for until Slurm no longer lists it. Jobs
are named nccl-harness-<run>-<cell> and carry the harness's owner marker in their comment, so that the
watchdog and the sweep (harness/reaper.py) cancel the jobs of a harness that died.
With --node-runtime docker|podman|pyxis the ranks run in the cell's image on each node (noderuntime.py);
forensics of a hung cell are taken on every node by collector.py through `srun --jobid=J --overlap`.
See README "Slurm" for what was not run here (GPU nodes, IB, podman, pyxis)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .. import launch as launch_mod
from .. import owner, proc, results
from ..errors import HarnessError, InfraError, closest
from ..matrix import Cell, Matrix
from ..progress import Progress
from .base import CellSpec, Check
from .docker import DockerEngine
from .host import TOKEN_VAR, HostEngine, Tagged, cell_env, env_line, kill_all, tagged
from .noderuntime import CONTAINED, RUNTIMES, NodeStep, node_step, remove_line

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
STATE_POLL_S = 1.0  # scontrol at most once a second; the supervisor polls every 0.1 s
CANCEL_WAIT_S = 60.0
PROBE_S = 120.0  # the shared-folder probe: one `echo` per node, once it runs


@dataclass(frozen=True)
class Probe:
    """What the nodes of a probe job wrote into the results folder: node name -> its output."""

    job_id: str
    nodelist: str
    nodes: int
    seen: dict[str, str]

    @property
    def shared(self) -> bool:
        return len(self.seen) >= self.nodes

    def not_shared(self, folder: Path) -> str:
        return (f"the results folder {folder} is not shared by every node: of the {self.nodes} node(s) of probe job "
                f"{self.job_id} ({self.nodelist}), {len(self.seen)} wrote into it ({', '.join(self.seen) or 'none'}). "
                "The ranks write their events there and this host follows them. Fix: --results DIR on storage that "
                "every node mounts at the same path (NFS, Lustre, GPFS; often /home or /scratch on a cluster).")


# Run on a node by the nodes' Python (argv[1]: the workload's run.py): the workload package imports as the
# ranks import it, then torch and accelerate; one JSON line of versions, or the error.
RUNTIME_PROBE = """import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))))
try:
    import workload.main, torch, accelerate
    nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    print(json.dumps({"torch": torch.__version__, "accelerate": accelerate.__version__,
                      "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
                      "gpus": torch.cuda.device_count(), "python": sys.version.split()[0]}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


def runtime_answer(text: str) -> tuple[bool, str]:
    """A node's RUNTIME_PROBE output as (works, what it said in a few words)."""
    lines = text.strip().splitlines()
    try:
        facts = json.loads(lines[-1]) if lines else {}
    except ValueError:
        facts = {}
    if isinstance(facts, dict) and "runtime" in facts:
        return True, str(facts["runtime"])[:300]
    if not isinstance(facts, dict) or "torch" not in facts:
        said = facts.get("error") if isinstance(facts, dict) and facts.get("error") else (lines[-1] if lines else "no output")
        return False, str(said)[:300]
    return True, (f"python {facts.get('python')}, torch {facts['torch']}, accelerate {facts.get('accelerate')}, "
                  f"NCCL {facts.get('nccl') or '- (no GPU)'}, {facts.get('gpus', 0)} GPU(s)")


@dataclass(frozen=True)
class SlurmOptions:
    """The --nodes, --partition, --account, --time, --slurm-arg and --gpus-per-node flags, checked."""

    nodes: int = 1
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    extra: tuple[str, ...] = ()
    gpus_per_node: int | None = None  # GPU cells: Slurm gives each node G GPUs, one rank on each
    runtime: str = "host"  # --node-runtime: what the ranks run in on the nodes (noderuntime.RUNTIMES)
    jobs: int = 1  # --jobs: cells running at the same time, each its own job (pipeline._run_together)

    def check(self) -> "SlurmOptions":
        if self.nodes < 1:
            raise HarnessError(f"--nodes {self.nodes}: must be at least 1. Fix: e.g. --nodes 2.")
        if self.runtime not in RUNTIMES:
            guess = closest(self.runtime, RUNTIMES)
            raise HarnessError(f"--node-runtime {self.runtime}: unknown{f'; did you mean {guess}?' if guess else '.'} "
                               f"Fix: one of {', '.join(RUNTIMES)} (host: the nodes' own Python stack).")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise HarnessError(f"--gpus-per-node {self.gpus_per_node}: must be at least 1. Fix: e.g. --gpus-per-node 8, "
                               "or leave it out for CPU cells.")
        if any(a.split("=", 1)[0] in ("--gpus-per-node", "--nodes", "--ntasks-per-node") for a in self.extra):
            raise HarnessError(f"--slurm-arg {' '.join(self.extra)}: --nodes, --ntasks-per-node and --gpus-per-node are "
                               "the harness's own (they decide the ranks). Fix: use the flags --nodes and --gpus-per-node.")
        for flag, value in (("--partition", self.partition), ("--account", self.account)):
            if value is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
                raise HarnessError(f"{flag} {value!r}: not a Slurm name (letters, digits, _ . -). Fix: e.g. {flag} debug.")
        if self.time is not None and not re.fullmatch(r"(\d+-)?\d+(:\d+){0,2}", self.time):
            raise HarnessError(f"--time {self.time!r}: not a Slurm time limit. Fix: e.g. --time 10 (minutes), "
                               "--time 0:30:00 or --time 1-00:00:00.")
        for arg in self.extra:
            if not arg.startswith("--"):
                raise HarnessError(f"--slurm-arg {arg!r}: expected an sbatch option starting with --. "
                                   "Fix: e.g. --slurm-arg=--exclusive or --slurm-arg=--constraint=ib.")
        return self

    def flags(self) -> list[str]:
        """These options as `invoke matrix` flags (the report's Rerun line)."""
        gpus = None if self.gpus_per_node is None else str(self.gpus_per_node)
        named = (("--nodes", str(self.nodes)), ("--gpus-per-node", gpus), ("--partition", self.partition),
                 ("--account", self.account), ("--time", self.time))
        runtime = [f"--node-runtime={self.runtime}"] if self.runtime != "host" else []
        return [f"{k}={v}" for k, v in named if v is not None] + runtime + [f"--slurm-arg={a}" for a in self.extra]

    def sbatch_args(self) -> list[str]:
        """The allocation: `nodes` nodes with one launcher task each, and the user's choices."""
        args = [f"--nodes={self.nodes}", "--ntasks-per-node=1"]
        args += [f"--{k}={v}" for k, v in (("gpus-per-node", self.gpus_per_node), ("partition", self.partition),
                                           ("account", self.account), ("time", self.time)) if v is not None]
        # Cells running at the same time (--jobs N > 1) must not share a node: each measures its own
        # nodes, and a node shared with another cell's ranks would halve its CPUs, NICs and bandwidth.
        # With select/cons_tres (the usual, and the test cluster's) Slurm packs two jobs onto one node
        # unless a job asks for whole nodes.
        if self.jobs > 1 and "--exclusive" not in self.extra:
            args.append("--exclusive")
        return args + list(self.extra)


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
COLLECT_S = 60.0  # the collector's srun: py-spy takes 20 s at most per rank


class SlurmRunning(Tagged):
    """A submitted job; its ranks on this machine are found by their token (Slurm exports the
    submission's environment to every task); forensics on every node go through collector.py."""

    def __init__(self, job_id: str, log: Path, token: str, out: Path | None = None, python: str = "python3",
                 remove: str | None = None, stop: threading.Event | None = None) -> None:
        super().__init__(log, token)
        self.job_id, self.out, self.python, self.remove = job_id, out, python, remove
        self.stop = stop or threading.Event()  # SlurmEngine.interrupt: Ctrl-C reaching a cell run in a worker thread
        self.state: dict[str, str] | None = {}
        self.checked = 0.0
        self.found: list[dict] | None = None  # the collector's findings, once per attempt

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

    def on_nodes(self) -> list[dict]:
        """collector.py on every node of the job, one task each beside the ranks (`srun --overlap`): the
        cell's processes there, SIGUSR1 and py-spy to its ranks; what each node found. A collector that
        could not run leaves its node out (the record then has only what this machine saw)."""
        if self.found is None and self.out is not None:
            self.on_every_node([self.python, "-c", COLLECTOR.read_text(), f"{TOKEN_VAR}={self.token}", str(self.out)],
                               self.out / "node-forensics.log")
            self.found = []
            for path in sorted((self.out / "node-forensics").glob("*.json")):
                try:
                    self.found.append(json.loads(path.read_text()))
                except (OSError, ValueError):
                    continue
        return self.found or []

    def process_list(self) -> str:
        found = self.on_nodes()
        if not found:
            return super().process_list()
        return "\n".join(f"{node['node']}: {p['pid']:>8} {p['state']} {p['cmd'][:200]}"
                         for node in found for p in node.get("processes", []))

    def dump_ranks(self, pids: dict[int, int]) -> dict[str, str] | None:
        found = self.on_nodes()
        if not found:
            return None  # no collector ran: this machine's ranks, as the host engine does
        return {rank: f"[{node['node']}]\n{dump}" for node in found for rank, dump in node.get("py_spy", {}).items()}

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

    def job(self) -> dict[str, str] | None:
        now = time.monotonic()
        if now - self.checked >= STATE_POLL_S:
            self.state, self.checked = _scontrol_job(self.job_id), now
        return self.state

    def poll(self) -> int | None:
        if self.stop.is_set():  # the supervisor takes it as Ctrl-C: records `interrupted`, then kill()
            raise KeyboardInterrupt
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
        kill_all(lambda: tagged(self.token))

    def leftovers(self) -> list[str]:
        jobs = [f"slurm job {i} {name} ({state})" for i, name, state, _ in queued() if i == self.job_id]
        return jobs + super().leftovers()


def _version() -> str:
    result = proc.run(["sinfo", "--version"], timeout=30) if proc.which("sinfo") else None
    return result.output.strip() if result and result.returncode == 0 else ""


def started(running: SlurmRunning, limit_s: float = PENDING_LIMIT_S) -> None:
    """Wait while the job is pending; a job that cannot start (NEVER_STARTS), or is still pending after
    `limit_s`, is an InfraError with Slurm's reason, never a hang."""
    deadline = time.monotonic() + limit_s
    while not running.stop.is_set():  # interrupted while pending: poll() says so to the supervisor
        job = running.job() or {}
        state, reason = job.get("JobState", ""), job.get("Reason", "")
        if state != "PENDING":
            return
        if reason.startswith(NEVER_STARTS) or time.monotonic() > deadline:
            why = "cannot start as asked" if reason.startswith(NEVER_STARTS) else f"was still pending after {limit_s:.0f} s"
            raise InfraError(f"Slurm job {running.job_id} {why}: pending, reason {reason} (squeue(1), JOB REASON "
                             "CODES). Fix: ask for what the partition has (`sinfo -N -l`; --nodes, --partition, "
                             "--time, --account), or wait until the cluster has room.")
        time.sleep(STATE_POLL_S)


class SlurmEngine(HostEngine):
    """Runs each cell as a Slurm job, on the nodes' own Python (the same path as this one's)."""

    name = "slurm"  # python, workload, control, inherited_env: the host engine's (the nodes' own stack)

    def __init__(self, options: SlurmOptions = SlurmOptions()) -> None:
        self.options = options.check()
        self._builder: DockerEngine | None = None
        self._stop = threading.Event()

    def interrupt(self) -> None:
        """End every attempt running or pending now, and any started after, as Ctrl-C ends one: for cells
        run in worker threads (--jobs), where Python raises KeyboardInterrupt in the main thread only. Each
        attempt's poll() raises it in its own thread, where the supervisor records `interrupted` and
        scancels the job."""
        self._stop.set()

    # ---- the cells' images, with a container runtime on the nodes: built here by the docker engine
    @property
    def builds_images(self) -> bool:  # type: ignore[override]
        return self.options.runtime != "host"

    @property
    def builder(self) -> DockerEngine:
        """This host's Docker engine, which builds the cells' images (a node runtime's engine must have
        them: here the node is this host; on a cluster, a registry or `docker save | docker load`)."""
        if self._builder is None:
            self._builder = DockerEngine.connect()
        return self._builder

    def cells(self, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
        return super().cells(m, selected, progress) if self.options.runtime == "host" else selected

    def image_id(self, tag: str) -> str:
        return self.builder.image_id(tag) if self.builds_images else ""

    def inherited_env(self, image: str) -> dict[str, str]:
        return self.builder.inherited_env(image) if self.builds_images else super().inherited_env(image)

    def step(self, spec: CellSpec) -> NodeStep:
        return node_step(self.options.runtime, spec, owner.current().marker, (TOKEN_VAR, owner.OWNER_VAR))

    def facts(self) -> dict:
        o = self.options
        return {"name": self.name, "version": _version(), "python": self.python, "nodes": o.nodes,
                "node_runtime": o.runtime,
                "gpus_per_node": o.gpus_per_node, "partition": o.partition, "account": o.account, "time": o.time,
                "slurm_args": list(o.extra), "jobs": o.jobs,
                "flags": ["--engine", "slurm", *o.flags()]}

    def _controller(self) -> Check:
        if proc.which("sbatch") is None or proc.which("scontrol") is None:
            return Check("slurm", False, "sbatch/scontrol are not on PATH", FIX)
        result = proc.run(["scontrol", "ping"], timeout=30)
        up = result.returncode == 0 and "UP" in result.output
        return Check("slurm controller", up, result.output.strip().splitlines()[-1] if result.output.strip() else "no answer",
                     "" if up else FIX)

    def _partition(self) -> Check:
        argv = ["sinfo", "-h", "-o", "%P %a %D %T"] + (["-p", self.options.partition] if self.options.partition else [])
        result = proc.run(argv, timeout=30)
        lines = result.output.strip().splitlines() if result.returncode == 0 else []
        name = self.options.partition or "the default partition"
        return Check("slurm partition", bool(lines), "; ".join(lines) or f"{name}: not found",
                     "" if lines else "Fix: --partition with one of `sinfo -s`'s partitions.")

    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None) -> list[Check]:
        """The controller, then the partition, then (results_dir given, both fine) one probe job for the
        shared folder and the nodes' runtime; what cannot be asked yet is not asked."""
        found = [self._controller()]
        if found[-1].ok:
            found.append(self._partition())
        if found[-1].ok and results_dir is not None:
            found += self._nodes(results_dir)
        return found

    def preflight(self, progress: Progress) -> None:
        for check in (self._controller, self._partition):  # the partition is asked only of a controller that answers
            found = check()
            if not found.ok:
                raise InfraError(f"--engine slurm: {found.name}: {found.detail}. {found.fix}")

    def launch(self, cell: Cell, m: Matrix, *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> launch_mod.Launch:
        nodes = self.options.nodes
        if self.options.gpus_per_node and not cell.stack.is_cpu:
            ranks = nodes * self.options.gpus_per_node  # one rank per GPU Slurm gives each node (its CUDA_VISIBLE_DEVICES)
        if ranks % nodes:
            raise HarnessError(f"--nodes {nodes}: {ranks} ranks cannot be spread evenly over {nodes} nodes. "
                               f"Fix: --ranks (CPU cells) or --gpus (GPU cells, per node) a multiple of {nodes}.")
        host = self.options.runtime == "host"  # else the image's Python and workload, the attempt folder at /out
        python = self.python if host else "python"
        out_dir = str(out) if host else launch_mod.CONTAINER_OUT
        if control:  # the NCCL-only control, one launcher per node like the cell (its id file is in the shared out folder)
            return launch_mod.control_launch(cell, m, ranks=ranks, python=python,
                                             control=self.control if host else launch_mod.CONTAINER_CONTROL,
                                             out=out_dir, port=launch_mod.SLURM_PORT, nodes=launch_mod.SLURM_NODES,
                                             per_node=ranks // nodes)
        return launch_mod.node_launch(cell, m, nodes=nodes, ranks=ranks, python=python,
                                      workload=self.workload if host else launch_mod.CONTAINER_WORKLOAD,
                                      out=out_dir, extra_args=extra_args, inherited_env=inherited_env)

    def sbatch_argv(self, spec: CellSpec, script: Path) -> list[str]:
        return self._sbatch(job_name(spec.run_id, spec.cell_id), spec.out_dir / "launcher.log", spec.out_dir, script)

    def _sbatch(self, name: str, output: Path, chdir: Path, script: Path) -> list[str]:
        """A job of this harness (its owner in the comment, for the reaper) on the user's allocation."""
        return ["sbatch", "--parsable", f"--job-name={name}", f"--comment={owner.current().marker}",
                f"--output={output}", f"--chdir={chdir}", *self.options.sbatch_args(), str(script)]

    def _submit(self, argv: list[str], log: Path, env: dict[str, str] | None = None, out: Path | None = None,
                remove: str | None = None) -> SlurmRunning:
        token = uuid.uuid4().hex
        owner.watch_over(self.name)  # this harness's death (even SIGKILL) cancels its jobs (reaper.py)
        submitted = proc.run(argv, timeout=60, env={**(env or os.environ), TOKEN_VAR: token})
        proc.check(submitted, "sbatch", FIX)
        # the collector runs on the node itself, outside any container: the nodes' Python, else python3
        python = self.python if self.options.runtime == "host" else "python3"
        return SlurmRunning(submitted.output.strip().splitlines()[-1].split(";")[0], log, token, out, python, remove,
                            self._stop)

    def probe(self, folder: Path, command: str) -> Probe:
        """One job over an allocation like the cells' runs `command` once on every node through srun;
        each node's output lands in `folder` (on the results storage) under the node's name, and this
        host reads it back. A node whose file is missing does not see the folder at this path."""
        probe = folder / f".nodes-{uuid.uuid4().hex[:8]}"
        results.make_dir(probe)
        script = probe / "probe.sh"
        into = f'{shlex.quote(str(probe))}/"$SLURMD_NODENAME"'
        # the output is written beside, then renamed: a file present is a node's whole answer
        write = f"({command}) > {into}.part 2>&1; mv {into}.part {into}"
        results.write_text(script, "\n".join(["#!/bin/bash", "# written by nccl-harness: does every node see the "
                                              "results folder at this path (and what does its runtime say)?",
                                              f"exec srun --ntasks-per-node=1 bash -c {shlex.quote(write)}", ""]))
        running = self._submit(self._sbatch(job_name(folder.name, "node-probe"), Path(os.devnull), Path("/"), script),
                               Path(os.devnull))
        try:
            started(running)
            deadline = time.monotonic() + PROBE_S
            while running.poll() is None and time.monotonic() < deadline:
                time.sleep(STATE_POLL_S)
        finally:
            running.kill_surely()
        seen = {p.name: p.read_text(errors="replace") for p in sorted(probe.iterdir())
                if p.name != script.name and not p.name.endswith(".part")}
        shutil.rmtree(probe, ignore_errors=True)
        return Probe(running.job_id, (running.state or {}).get("NodeList", "?"), self.options.nodes, seen)

    def check_results(self, run: Path, progress: Progress) -> None:
        """Every node of an allocation like the cells' writes its name into the run folder, through srun,
        and this host reads the names back: the ranks write their events there and the supervisor follows
        them from here, so a folder that a node does not see (or sees elsewhere) is an InfraError now,
        not a cell that 'never started'."""
        found = self.probe(run, 'echo "$SLURMD_NODENAME"')
        if not found.shared:
            raise InfraError(f"--engine slurm: {found.not_shared(run)}")
        progress.say(f"Results folder {run}: seen by every node ({', '.join(found.seen)})")

    def _nodes(self, folder: Path) -> list[Check]:
        """doctor: the results folder seen from every node, and the nodes' runtime (one probe job)."""
        try:
            results.make_dir(folder)
            found = self.probe(folder, self.runtime_probe())
        except HarnessError as exc:
            return [Check("shared results folder", False, str(exc))]
        shared = Check("shared results folder", found.shared, f"{folder}: seen by every node ({', '.join(found.seen)})"
                       if found.shared else found.not_shared(folder))
        answers = {node: runtime_answer(text) for node, text in found.seen.items()}
        bad = {node: text for node, (ok, text) in answers.items() if not ok}
        detail = ("; ".join(f"{node}: {text}" for node, (_, text) in answers.items())
                  or "unknown: no node's answer reached the results folder")
        fix = {"host": f"{self.python} with torch and accelerate on every node, at the same path as this host's (a "
                       "shared /home or software tree)", "pyxis": "a cluster with NVIDIA pyxis, or another --node-runtime"
               }.get(self.options.runtime, f"{self.options.runtime} installed and running on every node, usable by "
                                           "your user")
        return [shared, Check("node runtime", bool(answers) and not bad, detail,
                              "" if answers and not bad else f"Fix: {fix}.")]

    def runtime_probe(self) -> str:
        """A node's shell line that prints, as one JSON line (runtime_answer reads it), what its ranks would
        load: host, the nodes' Python importing the workload's modules; docker/podman, the node engine's
        version (the images are the cells'); pyxis, whether srun on the node knows --container-image."""
        runtime = self.options.runtime
        if runtime in CONTAINED:  # docker: the daemon must answer; podman has none
            ask = {"docker": "docker version --format '{{.Server.Version}}'", "podman": "podman --version"}[runtime]
            return (f"if v=$({ask} 2>&1); then k=runtime; else k=error; fi; v=$(echo \"$v\" | tail -n 1 | tr -d '\"\\\\'); "
                    f"printf '{{\"%s\": \"{runtime}: %s\"}}\\n' \"$k\" \"$v\"")
        if runtime == "pyxis":
            return ("if srun --help 2>&1 | grep -q -- --container-image; then echo '{\"runtime\": \"pyxis (srun "
                    "--container-image)\"}'; else echo '{\"error\": \"srun has no --container-image: no pyxis "
                    "plugin\"}'; fi")
        return f"{shlex.quote(self.python)} -c {shlex.quote(RUNTIME_PROBE)} {shlex.quote(self.workload)}"

    def equivalent(self, spec: CellSpec) -> str:
        script = spec.out_dir / "job.sh"
        return (f"# {script}:\n" + "\n".join(f"#   {line}" for line in batch_script(self.step(spec)).splitlines())
                + f"\n{env_line(spec)} {shlex.join(self.sbatch_argv(spec, script))}")

    @contextmanager
    def start(self, spec: CellSpec) -> Iterator[SlurmRunning]:
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        script = spec.out_dir / "job.sh"
        results.write_text(script, batch_script(self.step(spec)))
        contained = self.options.runtime in CONTAINED
        running = self._submit(self.sbatch_argv(spec, script), spec.out_dir / "launcher.log", cell_env(spec, ""),
                               spec.out_dir, remove_line(self.options.runtime, spec) if contained else None)
        job_id = running.job_id
        try:
            started(running)  # the stall clocks start when the ranks can: not while the job waits for nodes
            yield running
        finally:
            running.kill_surely()
            job = running.state or {}
            # where the attempt ran; the supervisor's record does not know engines' placements yet
            results.write_json(spec.out_dir / "slurm-job.json", {
                "job_id": job_id, "job_name": job_name(spec.run_id, spec.cell_id), "nodes": job.get("NodeList"),
                "state": job.get("JobState"), "reason": job.get("Reason"), "partition": job.get("Partition"),
                "exit_code": job.get("ExitCode"), "node_runtime": self.options.runtime,
                "start_time": job.get("StartTime"), "end_time": job.get("EndTime"),
                **({"image": spec.image} if self.builds_images else {})})
