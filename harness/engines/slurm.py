"""The slurm engine: each attempt of a cell is one Slurm job over --nodes nodes, submitted with `sbatch`;
its batch script runs one launcher per node through `srun` (node count, index and the allocation's
first node as rendezvous from Slurm's variables, launch.node_launch), on the nodes' own Python stack as
the host engine does. The ranks write their events into the attempt's folder, which every node must see
(shared storage; on one machine it trivially is), and the supervisor follows them unchanged.

The job's state comes from `scontrol show job` (accounting storage, and so `sacct`, is often not
configured); the job is cancelled with `scancel` and waited for until Slurm no longer lists it
(slurmjob.py: the job from this host, and its Running handle). Jobs are named nccl-harness-<run>-<cell>
and carry the harness's owner marker in their comment, so that the
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
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import launch as launch_mod
from .. import owner, proc, rankfiles, results
from ..errors import HarnessError, InfraError, closest
from ..kinds import GpuApi
from ..matrix import Cell, Matrix
from ..progress import Progress
from ..workload.fingerprint import relevant_env
from .base import LAUNCHER_LOG, CellSpec, Check, Stop
from .docker import image_env
from .dockerclient import DockerClient
from .host import TOKEN_VAR, HostEngine, cell_env, env_line, kill_surely, own_stack_cells
from .noderuntime import CONTAINED, RUNTIMES, NodeStep, node_step, remove_line
from .slurmjob import (
    CANCEL_WAIT_S,
    COLLECT_S,
    COLLECTOR,
    ENDED,
    FIX,
    JOB_PREFIX,
    NEVER_STARTS,
    PENDING_LIMIT_S,
    PLACED_NEVER_STARTS,
    STATE_POLL_S,
    SlurmRunning,
    batch_script,
    cancel,
    exit_code,
    job_name,
    parse_job,
    queued,
    started,
)

__all__ = ["SlurmEngine", "SlurmOptions", "Probe", "runtime_answer", "RUNTIME_PROBE", "PROBE_S",
           # the job's own (slurmjob.py), named here too: reaper.py and the tests reach them as slurm.X
           "CANCEL_WAIT_S", "COLLECT_S", "COLLECTOR", "ENDED", "FIX", "JOB_PREFIX", "NEVER_STARTS", "PENDING_LIMIT_S",
           "STATE_POLL_S", "SlurmRunning", "batch_script", "cancel", "exit_code", "job_name", "parse_job", "queued",
           "started"]

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


def _probe_text(path: Path) -> str:
    """What a node's probe task wrote (a line or two), read like a rank's file: the folder is the results
    folder every node shares."""
    try:
        return rankfiles.text(path, 64 << 10)
    except OSError as exc:
        return f"(not read: {exc.strerror or exc})"


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
    jobs: int = 1  # --jobs: cells running at the same time, each its own job (pipeline._Lane)
    # `invoke fleet`: the nodes a cell's job must run on, by its variant (fleet.variant_of: node-<n>, pair-<a>-<b>;
    # a variant survives the nodes' own stack replacing the matrix's) (sbatch --nodelist, --nodes their count),
    # the ranks each node starts there (CPU cells; GPU cells start --gpus-per-node), the nodes of the fleet
    # (the shared-folder probe asks each of them), and how long a job may wait for busy nodes
    placement: tuple[tuple[str, tuple[str, ...]], ...] = ()
    ranks_per_node: int | None = None
    nodelist: tuple[str, ...] = ()
    pending_s: float = PENDING_LIMIT_S

    def check(self) -> SlurmOptions:
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

    def placed(self, cell_id: str) -> tuple[str, ...]:
        """The nodes `invoke fleet` placed this cell on (by the variant in its id); () where Slurm chooses."""
        parts = cell_id.split("+")
        return dict(self.placement).get(parts[1], ()) if len(parts) > 1 else ()

    def sbatch_args(self, nodes: tuple[str, ...] = ()) -> list[str]:
        """The allocation: `nodes` nodes with one launcher task each (those nodes by name where given), and
        the user's choices."""
        args = [f"--nodes={len(nodes) or self.nodes}", "--ntasks-per-node=1"]
        if nodes:
            args.append(f"--nodelist={','.join(nodes)}")
        args += [f"--{k}={v}" for k, v in (("gpus-per-node", self.gpus_per_node), ("partition", self.partition),
                                           ("account", self.account), ("time", self.time)) if v is not None]
        # Cells running at the same time (--jobs N > 1) must not share a node: each measures its own
        # nodes, and a node shared with another cell's ranks would halve its CPUs, NICs and bandwidth.
        # With select/cons_tres (the usual, and the test cluster's) Slurm packs two jobs onto one node
        # unless a job asks for whole nodes.
        if self.jobs > 1 and "--exclusive" not in self.extra:
            args.append("--exclusive")
        return args + list(self.extra)


def _version() -> str:
    result = proc.run(["sinfo", "--version"], timeout=30) if proc.which("sinfo") else None
    return result.output.strip() if result and result.returncode == 0 else ""




class SlurmEngine:
    """Runs each cell as a Slurm job, on the nodes' own Python (the same path as this one's) or, with a
    node runtime, in the cell's image built here."""

    name = "slurm"
    shares_gpus = False  # each job gets GPUs of its own nodes (--exclusive with --jobs: SlurmOptions.sbatch_args)
    # the nodes' own stack: this host's Python and this checkout's workload, at the same paths there
    python, workload, control = HostEngine.python, HostEngine.workload, HostEngine.control

    def __init__(self, options: SlurmOptions = SlurmOptions()) -> None:
        self.options = options.check()
        self._builder: DockerClient | None = None
        self._stop = Stop()

    def interrupt(self) -> None:
        """End every attempt running or pending now, and any started after, as Ctrl-C ends one: for cells
        run in worker threads (--jobs), where Python raises KeyboardInterrupt in the main thread only. Each
        attempt's poll() raises it in its own thread, where the supervisor records `interrupted` and
        scancels the job."""
        self._stop.set()

    def concurrent_cells(self, jobs: int) -> int:
        """--jobs cells at once, each its own job on its own nodes (--exclusive: SlurmOptions.sbatch_args)."""
        return max(1, jobs)

    # ---- the cells' images, with a container runtime on the nodes: built here by this host's Docker
    @property
    def builds_images(self) -> bool:
        return self.options.runtime != "host"

    @property
    def builder(self) -> DockerClient | None:
        """This host's Docker engine, which builds the cells' images (a node runtime's engine must have
        them: here the node is this host; on a cluster, a registry or `docker save | docker load`); None
        on the nodes' own stack."""
        if not self.builds_images:
            return None
        if self._builder is None:
            self._builder = DockerClient.connect()
        return self._builder

    @property
    def client(self) -> DockerClient | None:
        return self._builder

    def _images(self) -> DockerClient:
        client = self.builder
        assert client is not None, "only a node runtime's cells have images"
        return client

    def cells(self, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
        return own_stack_cells(self.python, m, selected, progress) if self.options.runtime == "host" else selected

    def image_id(self, tag: str) -> str:
        return self._images().image_id(tag) if self.builds_images else ""

    def inherited_env(self, image: str) -> dict[str, str]:
        return image_env(self._images(), image) if self.builds_images else relevant_env(os.environ)

    def step(self, spec: CellSpec) -> NodeStep:
        return node_step(self.options.runtime, spec, owner.current().marker, (TOKEN_VAR, owner.OWNER_VAR))

    def facts(self) -> dict[str, Any]:
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

    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None, gpu_api: GpuApi | None = None) -> list[Check]:
        """The controller, then the partition, then (results_dir given, both fine) one probe job for the
        shared folder and the nodes' runtime; what cannot be asked yet is not asked."""
        found = [self._controller()]
        if found[-1].ok:
            found.append(self._partition())
        if found[-1].ok and results_dir is not None:
            found += self._nodes(results_dir)
        return found

    def gpu_api(self, gpus: tuple[str, ...], image: str, given: GpuApi | None = None) -> GpuApi | None:
        return None  # the node runtime gives the GPUs (noderuntime.GPU_DEVICES): nothing to probe from here

    def preflight(self, progress: Progress) -> None:
        for check in (self._controller, self._partition):  # the partition is asked only of a controller that answers
            found = check()
            if not found.ok:
                raise InfraError(f"--engine slurm: {found.name}: {found.detail}. {found.fix}")

    def launch(self, cell: Cell, m: Matrix, *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> launch_mod.Launch:
        placed = self.options.placed(cell.id)
        nodes = len(placed) or self.options.nodes
        if placed and self.options.ranks_per_node:  # a GPU cell's, below, from --gpus-per-node where given
            ranks = nodes * self.options.ranks_per_node
        if self.options.gpus_per_node and not cell.stack.is_cpu:
            ranks = nodes * self.options.gpus_per_node  # one rank per GPU Slurm gives each node (its CUDA_VISIBLE_DEVICES)
        if ranks % nodes:
            raise HarnessError(f"--nodes {nodes}: {ranks} ranks cannot be spread evenly over {nodes} nodes. "
                               f"Fix: --ranks (CPU cells) or --gpus (GPU cells, per node) a multiple of {nodes}.")
        host = self.options.runtime == "host"  # else the image's Python and workload, the attempt folder at /out
        python = self.python if host else launch_mod.container_python(cell)
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
        return self._sbatch(job_name(spec.run_id, spec.cell_id), spec.out_dir / LAUNCHER_LOG, spec.out_dir, script,
                            self.options.placed(spec.cell_id))

    def _sbatch(self, name: str, output: Path, chdir: Path, script: Path, nodes: tuple[str, ...] = ()) -> list[str]:
        """A job of this harness (its owner in the comment, for the reaper) on the user's allocation."""
        return ["sbatch", "--parsable", f"--job-name={name}", f"--comment={owner.current().marker}",
                f"--output={output}", f"--chdir={chdir}", *self.options.sbatch_args(nodes), str(script)]

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
        running = self._submit(self._sbatch(job_name(folder.name, "node-probe"), Path(os.devnull), Path("/"), script,
                                            self.options.nodelist), Path(os.devnull))
        try:
            started(running, self.options.pending_s)
            deadline = time.monotonic() + PROBE_S
            while running.poll() is None and time.monotonic() < deadline:
                time.sleep(STATE_POLL_S)
        finally:
            kill_surely(running.kill)
        seen = {p.name: _probe_text(p) for p in sorted(probe.iterdir())
                if p.name != script.name and not p.name.endswith(".part")}
        shutil.rmtree(probe, ignore_errors=True)
        return Probe(running.job_id, (running.state or {}).get("NodeList", "?"),
                     len(self.options.nodelist) or self.options.nodes, seen)

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
        running = self._submit(self.sbatch_argv(spec, script), spec.out_dir / LAUNCHER_LOG, cell_env(spec, ""),
                               spec.out_dir, remove_line(self.options.runtime, spec) if contained else None)
        job_id = running.job_id
        try:
            never = PLACED_NEVER_STARTS if self.options.placed(spec.cell_id) else NEVER_STARTS
            started(running, self.options.pending_s, never)  # the stall clocks start when the ranks can
            yield running
        finally:
            kill_surely(running.kill)
            job = running.state or {}
            # where the attempt ran; the supervisor's record does not know engines' placements yet
            results.write_json(spec.out_dir / "slurm-job.json", {
                "job_id": job_id, "job_name": job_name(spec.run_id, spec.cell_id), "nodes": job.get("NodeList"),
                "state": job.get("JobState"), "reason": job.get("Reason"), "partition": job.get("Partition"),
                "exit_code": job.get("ExitCode"), "node_runtime": self.options.runtime,
                "start_time": job.get("StartTime"), "end_time": job.get("EndTime"),
                **({"image": spec.image} if self.builds_images else {})})
