"""The NCCL-only control: a torch-free all-reduce through the libnccl the cell would load (issue 16, item 1).

Each rank loads libnccl and the CUDA runtime with ctypes (no torch, no compiler: it runs in every image
and on the host), builds a communicator, runs a checked all-reduce at a few sizes and measures busbw the
way bandwidth.py does. It is a ``main.Runner`` with its own phases, so its events (start, phase_start /
phase_end, heartbeat, error, result) are the workload's and the supervisor follows it unchanged:

    nccl-load       find and dlopen libnccl and libcudart; versions; device count
    nccl-init       cudaSetDevice(local rank), the unique id from rank 0, ncclCommInitRank
    nccl-allreduce  per size: fill, one checked all-reduce, warm-up, timed trials, busbw
    nccl-teardown   free the buffers, ncclCommDestroy

The ctypes binding of libnccl and the CUDA runtime is libnccl.py (bandwidth.py's timing on torch's
communicator uses it too).

The unique id goes from rank 0 to the others through a file in the output folder, not a TCP store on
MASTER_ADDR:MASTER_PORT: under torchrun (and accelerate launch, which runs torchrun) the launcher's own
agent holds MASTER_PORT with its store, so a server of ours there fails with EADDRINUSE; the harness runs
one node per cell (--nnodes 1) and every rank of a cell shares the output folder (host and container
alike); each attempt has a fresh folder, so a file from an earlier run cannot be read.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import bandwidth, cli, distenv, fingerprint
from .libnccl import (
    D2H,
    H2D,
    NCCL_FLOAT32,
    NCCL_FLOAT64,
    NCCL_MAX,
    NCCL_SUM,
    UNIQUE_ID_BYTES,
    Cuda,
    Nccl,
    load_libraries,
)
from .main import TEARDOWN_GRACE_S, Runner, run_rank

PHASES = ("nccl-load", "nccl-init", "nccl-allreduce", "nccl-teardown")
# the error classes only the control reports (the workload's classify.ERROR_CLASSES has the rest)
ERROR_CLASSES = ("nccl-not-found", "cuda-not-found")
DEFAULT_SIZES = (cli.MIB, 64 * cli.MIB, cli.GIB)
TIMING = "nccl-control"
CHUNK_BYTES = cli.MIB  # the host pattern copied over the device buffer chunk by chunk
SCRATCH = 64  # float64/int64 elements of the small buffer for barriers and the max over ranks


# ---------------------------------------------------------------- the unique id, through a file
def id_file(out_dir: str, master_port: str) -> str:
    return os.path.join(out_dir, "nccl-unique-id-%s.bin" % master_port)


def publish_id(path: str, uid: bytes) -> None:
    """Write the id whole or not at all: a rank polling for it never reads half of it."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as fh:
        fh.write(uid)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def await_id(path: str, timeout_s: float, poll_s: float = 0.01) -> bytes:
    """The id rank 0 published; TimeoutError after ``timeout_s`` (rank 0 never got that far)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if len(data) == UNIQUE_ID_BYTES:
                return data
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.0fs waiting for rank 0's NCCL unique id in %s"
                               % (timeout_s, path))
        time.sleep(poll_s)


# ---------------------------------------------------------------- the data
def pattern(rank: int, count: int) -> List[float]:
    """Rank-dependent small integers (exact in float32, and so is their sum over any world below 2**20)."""
    return [float((i * 7 + rank * 3) % 13 + rank + 1) for i in range(count)]


def expected(world: int, count: int) -> List[float]:
    return [float(sum(v)) for v in zip(*(pattern(r, count) for r in range(world)))]


def wrong_count(got: Sequence[float], want: Sequence[float]) -> int:
    return sum(1 for g, w in zip(got, want) if g != w)


# ---------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="control.py",
                                description="NCCL-only control: a torch-free all-reduce, events to --out.")
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    p.add_argument("--sizes", type=cli.parse_sizes, default=list(DEFAULT_SIZES),
                   help="all-reduce sizes in bytes, comma-separated (K/M/G suffixes ok); default 1M,64M,1G")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--init-timeout", type=float, default=60.0,
                   help="seconds a rank waits for rank 0's unique id")
    p.add_argument("--heartbeat", type=float, default=2.0, help="heartbeat interval in seconds")
    p.set_defaults(hold_at=None, fail_in=None, hang_unless=None)  # main.Runner's test switches: the control has none
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.sizes or args.iters < 1 or args.warmup < 0 or args.trials < 1:
        parser.error("--sizes must name a size, --iters and --trials must be >= 1, --warmup >= 0")
    if args.init_timeout <= 0 or args.heartbeat <= 0:
        parser.error("--init-timeout and --heartbeat must be > 0")
    return args


# ---------------------------------------------------------------- the rank
class Control(Runner):
    """One rank of the control. ``libs`` gives (nccl, cuda, facts) instead of loading them: tests hand in
    fakes at the ctypes boundary."""

    PHASES = PHASES

    def __init__(self, args: Any, denv: distenv.DistEnv, writer: Any, heartbeat: Any,
                 libs: Optional[Callable[[], Any]] = None) -> None:
        super().__init__(args, denv, writer, heartbeat)
        self.libs = libs or load_libraries
        self.nccl: Optional[Nccl] = None
        self.cuda: Optional[Cuda] = None
        self.comm: Optional[ctypes.c_void_p] = None
        self.stream: Any = None
        self.scratch = 0
        self.buffers: List[int] = []

    def _table(self) -> Dict[str, Callable[[], Dict[str, Any]]]:
        return {"nccl-load": self._load, "nccl-init": self._init_comm, "nccl-allreduce": self._all_reduce,
                "nccl-teardown": self._teardown_comm}

    # ------------------------------------------------------------ phases
    def _load(self) -> Dict[str, Any]:
        self.nccl, self.cuda, facts = self.libs()
        facts["nccl"]["code"] = code = self.nccl.version()
        facts["nccl"]["version"] = fingerprint.decode_nccl_version(code)
        facts["cudart"]["runtime_version"] = self.cuda.out_int("cudaRuntimeGetVersion")
        facts["device_count"] = self.cuda.out_int("cudaGetDeviceCount")
        return facts

    def _init_comm(self) -> Dict[str, Any]:
        assert self.nccl is not None and self.cuda is not None
        env_set = distenv.set_init_env(os.environ, self.args.out, self.denv.rank, "")
        self.cuda.call("cudaSetDevice", self.denv.local_rank)
        path = id_file(self.args.out, self.denv.master_port)
        t0 = time.monotonic()
        if self.denv.rank == 0:
            uid = self.nccl.unique_id()
            publish_id(path, uid)
        else:
            uid = await_id(path, self.args.init_timeout)
        waited = time.monotonic() - t0
        t0 = time.monotonic()
        self.comm = self.nccl.init_rank(self.denv.world, uid, self.denv.rank)
        self.stream = self.cuda.stream()
        self.scratch = self._malloc(SCRATCH * 8)
        self.cuda.call("cudaMemset", self.scratch, 0, SCRATCH * 8)  # the barrier's sum stays finite
        return {"local_rank": self.denv.local_rank, "world_size": self.denv.world, "id_file": path,
                "id_wait_s": waited, "comm_init_s": time.monotonic() - t0, "env_set": env_set}

    def _all_reduce(self) -> Dict[str, Any]:
        rows = []
        for nbytes in self.args.sizes:
            self.writer.emit("heartbeat", phase="nccl-allreduce", source="main", bytes=nbytes)
            rows.append(self._measure(nbytes))
        return {"rows": rows, "world": self.denv.world, "bus_factor": bandwidth.bus_factor(self.denv.world),
                "trials": self.args.trials}

    def _teardown_comm(self) -> Dict[str, Any]:
        self._free_all()
        destroyed = False
        if self.comm is not None and self.nccl is not None:
            self.nccl.destroy(self.comm)
            self.comm, destroyed = None, True
        return {"destroyed": destroyed}

    # ------------------------------------------------------------ pieces
    def _malloc(self, nbytes: int) -> int:
        assert self.cuda is not None
        ptr = self.cuda.malloc(nbytes)
        self.buffers.append(ptr)
        return ptr

    def _free_all(self) -> None:
        while self.buffers and self.cuda is not None:
            self.cuda.call("cudaFree", self.buffers.pop())

    def _sync(self) -> None:
        assert self.cuda is not None
        self.cuda.call("cudaStreamSynchronize", self.stream)

    def _reduce(self, buf: int, count: int, dtype: int = NCCL_FLOAT32, op: int = NCCL_SUM) -> None:
        assert self.nccl is not None and self.comm is not None
        self.nccl.all_reduce(buf, count, dtype, op, self.comm, self.stream)

    def _barrier(self) -> None:
        """A one-element all-reduce, synchronised: every rank starts a timed region together."""
        self._reduce(self.scratch, 1, NCCL_FLOAT64)
        self._sync()

    def _max_over_ranks(self, values: List[float]) -> List[float]:
        """Each value's maximum over the ranks (the slowest rank decides, as in bandwidth.py; a row's
        `wrong` is so the most any rank saw, where the workload's sweep sums them)."""
        assert self.cuda is not None
        out: List[float] = []
        for start in range(0, len(values), SCRATCH):
            part = values[start:start + SCRATCH]
            host = (ctypes.c_double * len(part))(*part)
            self.cuda.call("cudaMemcpy", self.scratch, host, ctypes.sizeof(host), H2D)
            self._reduce(self.scratch, len(part), NCCL_FLOAT64, NCCL_MAX)
            self._sync()
            self.cuda.call("cudaMemcpy", host, self.scratch, ctypes.sizeof(host), D2H)
            out.extend(float(v) for v in host)
        return out

    def _fill(self, buf: int, nbytes: int) -> int:
        """Copy this rank's pattern over the buffer chunk by chunk; elements per chunk."""
        assert self.cuda is not None
        chunk = min(nbytes, CHUNK_BYTES) // bandwidth.ELEMENT_BYTES
        host = (ctypes.c_float * chunk)(*pattern(self.denv.rank, chunk))
        step = chunk * bandwidth.ELEMENT_BYTES
        for offset in range(0, nbytes, step):
            self.cuda.call("cudaMemcpy", buf + offset, host, min(step, nbytes - offset), H2D)
        return chunk

    def _check_data(self, buf: int, count: int) -> int:
        """Elements wrong after one all-reduce, in the first and the last chunk (the pattern repeats)."""
        assert self.cuda is not None
        nbytes = count * bandwidth.ELEMENT_BYTES
        chunk = self._fill(buf, nbytes)
        self._reduce(buf, count)
        self._sync()
        want = expected(self.denv.world, chunk)
        wrong = 0
        for start in sorted({0, (count - 1) // chunk * chunk}):
            n = min(chunk, count - start)
            host = (ctypes.c_float * n)()
            self.cuda.call("cudaMemcpy", host, buf + start * bandwidth.ELEMENT_BYTES,
                           n * bandwidth.ELEMENT_BYTES, D2H)
            wrong += wrong_count(list(host), want[:n])
        self.cuda.call("cudaMemset", buf, 0, nbytes)  # zeros stay finite through the timed all-reduces
        return wrong

    def _timed(self, buf: int, count: int, iters: int) -> float:
        self._barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self._reduce(buf, count)
        self._sync()
        return (time.perf_counter() - t0) / iters

    def _measure(self, nbytes: int) -> Dict[str, Any]:
        count = max(1, nbytes // bandwidth.ELEMENT_BYTES)
        nbytes = count * bandwidth.ELEMENT_BYTES
        buf = self._malloc(nbytes)
        wrong = self._check_data(buf, count)
        first = self._timed(buf, count, 1)
        for _ in range(self.args.warmup):
            self._reduce(buf, count)
        self._sync()
        trials = []
        for _ in range(self.args.trials):
            trials.append(self._timed(buf, count, self.args.iters))
            self.writer.emit("heartbeat", phase="nccl-allreduce", source="main", bytes=nbytes)
        values = self._max_over_ranks(trials + [first, float(wrong)])
        assert self.cuda is not None
        self.cuda.call("cudaFree", self.buffers.pop())
        return bandwidth.bandwidth_row(nbytes, self.args.iters, values[:-2], values[-2], self.denv.world,
                                       timing=TIMING, wrong=int(values[-1]))

    # ------------------------------------------------------------ Runner's hooks
    def teardown_after_error(self) -> str:
        """Free and destroy what exists, in a thread: a broken communicator may never return."""
        if self.comm is None and not self.buffers:
            return "not-needed"
        done = fingerprint.bounded(self._teardown_comm, TEARDOWN_GRACE_S)
        return done if isinstance(done, str) else ("error: %s" % done["error"] if "error" in done else "ok")

    def _summarise(self, name: str, fields: Dict[str, Any]) -> None:
        if name == "nccl-allreduce":
            super()._summarise("bandwidth", fields)  # the same summary fields as the workload's sweep


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point (control.py): 0 when every phase passed, 1 on an error event; bad flags exit 2."""
    return run_rank(parse_args(argv), Control)
