"""Run the phases of one rank and record every step as a durable event.

Order of business: parse flags (bad ones exit 2 before anything), open the event file, register
forensics (pid file, faulthandler on SIGUSR1), write ``start``, then the phases, each between a
``phase_start`` and a ``phase_end`` (or an ``error``), and ``result`` last. torch is imported only
inside the first phase so that even a broken install leaves an event trail.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import classify, cli, distenv, fingerprint
from .events import EventWriter, Heartbeat

TEARDOWN_GRACE_S = 10.0


class Prewarm:
    """Imports on a thread what the first optimizer would import lazily, while this rank waits on the GPU
    and on its peers.

    Seen on 2x H200 (torch 2.11, py-spy, docs/benchmarks.md): 98% of prepare was
    Optimizer.__init__ -> _disable_dynamo's first import of torch._dynamo (1.2 s with bytecode cached,
    5.9 s without). CUDA init, the peer copies, the rendezvous and NCCL's communicator set-up release
    the GIL, so the import runs beside them. accelerate is imported first, on the calling thread: it
    imports torch.distributed.fsdp, which torch._dynamo's imports reach too, and two threads importing
    shared modules in opposite order can deadlock. The prepare phase joins the thread before it
    starts Accelerate, so nothing imports beside it there; a failed import is left for prepare to meet
    and report as it would have without this (the import runs again there).
    """

    MODULES = ("torch._dynamo",)

    def __init__(self) -> None:
        self.seconds: Optional[float] = None
        self.error: Optional[str] = None
        self._thread = threading.Thread(target=self._work, name="harness-prewarm", daemon=True)

    def _work(self) -> None:
        t0 = time.monotonic()
        try:
            for name in self.MODULES:
                __import__(name)
        except BaseException as exc:  # noqa: BLE001 - prepare imports it again and reports
            self.error = "%s: %s" % (type(exc).__name__, str(exc)[:300])
        self.seconds = time.monotonic() - t0

    def start(self) -> Prewarm:
        try:
            import accelerate  # noqa: F401 - see the class's comment
        except BaseException:  # noqa: BLE001 - the fingerprint and prepare report it
            pass
        self._thread.start()
        return self

    def join(self) -> Dict[str, Any]:
        """Wait for the imports; what prepare records of them."""
        self._thread.join()
        return {"modules": list(self.MODULES), "thread_seconds": self.seconds, "error": self.error}


def resolve_device(choice: str) -> str:
    """auto -> cuda when torch sees a GPU, else cpu (imports torch)."""
    if choice != "auto":
        return choice
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def register_forensics(out_dir: str, rank: int) -> Any:
    """faulthandler on SIGUSR1 (the host dumps a hung rank's threads), then the pid file.

    In this order, so that once the pid file exists a SIGUSR1 dumps stacks instead of killing
    (its default action).
    """
    stacks = open(os.path.join(out_dir, "stacks-rank%d.txt" % rank), "a")  # noqa: SIM115 - open for good
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    with open(os.path.join(out_dir, "pid-rank%d" % rank), "w") as fh:
        fh.write("%d\n" % os.getpid())
    return stacks  # keep it open for the life of the process


class Runner:
    """One rank's run: phases in order, events around each, a result at the end.

    The NCCL-only control (nccl_control.py) is a Runner too, with its own PHASES and table."""

    PHASES: Sequence[str] = cli.PHASES

    def __init__(self, args: Any, denv: distenv.DistEnv, writer: EventWriter,
                 heartbeat: Heartbeat) -> None:
        self.args = args
        self.denv = denv
        self.writer = writer
        self.heartbeat = heartbeat
        self.state: Any = None
        self.device: Optional[str] = None
        self.done: List[str] = []
        self.summary: Dict[str, Any] = {}
        self.prewarm: Optional[Prewarm] = None

    # ------------------------------------------------------------ phases
    def _fingerprint(self) -> Dict[str, Any]:
        from . import phases  # first torch import: ImportError lands in this phase

        self.device = resolve_device(self.args.device)
        self.prewarm = Prewarm().start()
        self.state = phases.State(self.device, self.denv.rank, self.denv.local_rank,
                                  self.denv.world)
        expected = self.args.expect_env or {}
        fp = fingerprint.collect(self.device, self.denv.local_rank, expected, os.environ)
        fp["expect_env_given"] = self.args.expect_env is not None
        fp["dist_env"] = self.denv.as_dict()
        return {"fingerprint": fp}

    def _init(self) -> Dict[str, Any]:
        from . import phases

        return phases.run_init(self.state, self.args.out, self.args.init_timeout)

    def _prepare(self) -> Dict[str, Any]:
        from . import phases

        prewarm = self.prewarm.join() if self.prewarm else None
        return dict(phases.run_prepare(self.state), prewarm=prewarm)

    def _step(self) -> Dict[str, Any]:
        from . import phases

        return phases.run_step(self.state)

    def _check(self) -> Dict[str, Any]:
        from . import phases

        return phases.run_check(self.state)

    def _bandwidth(self) -> Dict[str, Any]:
        from . import bandwidth

        if self.args.skip_bandwidth:
            return {"skipped": True, "rows": [], "world": self.denv.world}
        sizes = self.args.sizes or cli.default_sizes(self.device or "cpu")

        def progress(collective: str, nbytes: int) -> None:
            self.writer.emit("heartbeat", phase="bandwidth", source="main", bytes=nbytes, collective=collective)

        return bandwidth.run_bandwidth(self.state, sizes, self.args.iters, self.args.warmup,
                                       self.args.trials, progress, self.args.collectives)

    def _teardown(self) -> Dict[str, Any]:
        from . import phases

        return phases.run_teardown()

    def _table(self) -> Dict[str, Callable[[], Dict[str, Any]]]:
        return {"fingerprint": self._fingerprint, "init": self._init,
                "prepare": self._prepare, "step": self._step, "check": self._check,
                "bandwidth": self._bandwidth, "teardown": self._teardown}

    # ------------------------------------------------------------ driving
    def run_phase(self, name: str, fn: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
        self.writer.emit("phase_start", phase=name)
        self.heartbeat.set_phase(name)
        t0 = time.monotonic()
        try:
            if self.args.hold_at == name:
                wait_for_release(self.args.out, self.denv.rank)
            if name == cli.HANG_PHASE and self.args.hang_unless:
                hang_unless(*self.args.hang_unless)
            if self.args.fail_in == name:
                raise RuntimeError("injected test fault at the start of phase %r "
                                   "(--fail-in with %s=1)" % (name, cli.FAULT_ENV))
            fields = fn()
        finally:
            self.heartbeat.set_phase(None)
        self.writer.emit("phase_end", phase=name, seconds=time.monotonic() - t0, **fields)
        self.done.append(name)
        return fields

    def record_error(self, phase: str, exc: BaseException) -> str:
        backend = getattr(self.state, "backend", None)
        # an exception may name its own class (the control's "library not found" has no text to match)
        error_class = getattr(exc, "error_class", None) or classify.classify_exception(exc, backend)
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.writer.emit("error", phase=phase, error_class=error_class, type=type(exc).__name__,
                         message=str(exc)[:2000], traceback=tb[-8000:])
        return error_class

    def run(self) -> int:
        """All phases; on the first error: error event, best-effort teardown, exit code 1."""
        table = self._table()
        for name in self.PHASES:
            try:
                fields = self.run_phase(name, table[name])
            except BaseException as exc:  # noqa: BLE001 - every failure must become an event
                if isinstance(exc, SystemExit) and exc.code in (0, None):
                    raise
                error_class = self.record_error(name, exc)
                teardown = self.teardown_after_error()
                self.finish("error", failed_phase=name, error_class=error_class,
                            teardown=teardown)
                return 1
            self._summarise(name, fields)
        self.finish("ok")
        return 0

    def teardown_after_error(self) -> str:
        return try_teardown(TEARDOWN_GRACE_S)

    def _summarise(self, name: str, fields: Dict[str, Any]) -> None:
        if name == "prepare":
            self.summary["distributed_type"] = fields.get("distributed_type")
        elif name == "step":
            self.summary["loss"] = fields.get("loss")
        elif name == "check":
            self.summary["wrong_total"] = fields.get("wrong_total")
        elif name == "bandwidth" and fields.get("rows"):
            last = fields["rows"][-1]
            self.summary["largest_bytes"] = last["bytes"]
            self.summary["largest_busbw_gbs"] = last["busbw_gbs"]
            self.summary["largest_algbw_gbs"] = last["algbw_gbs"]
            # data that came back wrong at any size makes the cell `wrong`, as the check phase does
            rows = [*fields["rows"], *(r for sweep in (fields.get("collectives") or {}).values() for r in sweep["rows"])]
            wrong = sum(int(row.get("wrong") or 0) for row in rows)
            if wrong:
                self.summary["wrong_total"] = (self.summary.get("wrong_total") or 0) + wrong

    def finish(self, status: str, **fields: Any) -> None:
        self.heartbeat.stop()
        self.writer.emit("result", status=status, phases_done=list(self.done),
                         exit_code=0 if status == "ok" else 1,
                         **dict(self.summary, **fields))


def wait_for_release(out_dir: str, rank: int) -> None:
    """Test-only sync point (--hold-at): lets a test signal this rank while it is inside a phase; ``release``
    lets every rank go on, ``release-rank<R>`` this one only (one rank behind, alive)."""
    release = [os.path.join(out_dir, "release"), os.path.join(out_dir, "release-rank%d" % rank)]
    while not any(os.path.exists(path) for path in release):
        time.sleep(0.02)


def hang_unless(var: str, value: str) -> None:
    """Test-only fault (HARNESS_TEST_HANG_UNLESS with HARNESS_TEST_FAULTS=1): wait forever, as a rank
    stuck in a collective does (its heartbeats go on), unless `var` has `value`."""
    while os.environ.get(var) != value:
        time.sleep(1.0)


def try_teardown(grace_s: float) -> str:
    """destroy_process_group after a failure, in a thread: a broken NCCL comm may never return."""
    torch_dist = sys.modules.get("torch.distributed")
    if torch_dist is None:
        return "not-needed"
    try:
        if not (torch_dist.is_available() and torch_dist.is_initialized()):
            return "not-needed"
    except Exception:  # noqa: BLE001
        return "not-needed"
    outcome = {"value": "timeout"}

    def work() -> None:
        try:
            torch_dist.destroy_process_group()
            outcome["value"] = "ok"
        except Exception as exc:  # noqa: BLE001
            outcome["value"] = "error: %s: %s" % (type(exc).__name__, str(exc)[:300])

    thread = threading.Thread(target=work, name="harness-teardown", daemon=True)
    thread.start()
    thread.join(grace_s)
    return outcome["value"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point: returns the process exit code (0 ok, 1 phase error; argparse exits 2)."""
    return run_rank(cli.parse_args(argv), Runner)


def placement(local_rank: int, environ: Mapping[str, str] = os.environ) -> Dict[str, str]:
    """Where this rank runs: its node, its GPU (the CUDA_VISIBLE_DEVICES entry of its local rank, where
    GPUs are given), and the Slurm job and step it belongs to (srun exports them to every task)."""
    visible = [g for g in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    found = {"node": environ.get("SLURMD_NODENAME") or socket.gethostname(),
             "gpu": visible[local_rank] if 0 <= local_rank < len(visible) else "",
             "job_id": environ.get("SLURM_JOB_ID", ""), "step": environ.get("SLURM_STEP_ID", ""),
             "cpus": cpu_ranges(_affinity())}
    return {k: v for k, v in found.items() if v}


def _affinity() -> List[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return []


def cpu_ranges(cpus: List[int]) -> str:
    """The CPUs a rank may run on as taskset writes them: [0, 1, 2, 3, 8] -> "0-3,8"."""
    spans: List[List[int]] = []
    for cpu in sorted(set(cpus)):
        if spans and cpu == spans[-1][1] + 1:
            spans[-1][1] = cpu
        else:
            spans.append([cpu, cpu])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in spans)


def run_rank(args: Any, runner: Callable[..., Runner]) -> int:
    """One rank of ``runner`` (the workload's or the control's): event file, forensics, start event,
    heartbeat, the phases; returns the exit code."""
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    denv = distenv.resolve_dist_env(os.environ)
    writer = EventWriter(os.path.join(args.out, "events-rank%d.jsonl" % denv.rank),
                         denv.rank, denv.world)
    stacks = register_forensics(args.out, denv.rank)
    writer.emit("start", argv=list(sys.argv), host=socket.gethostname(),
                local_rank=denv.local_rank, python=sys.version.split()[0], placement=placement(denv.local_rank))
    heartbeat = Heartbeat(writer, args.heartbeat).start()
    try:
        return runner(args, denv, writer, heartbeat).run()
    finally:
        heartbeat.stop()
        writer.close()
        stacks.flush()
