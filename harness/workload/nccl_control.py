"""The NCCL-only control: a torch-free all-reduce through the libnccl the cell would load (issue 16, item 1).

Each rank loads libnccl and the CUDA runtime with ctypes (no torch, no compiler: it runs in every image
and on the host), builds a communicator, runs a checked all-reduce at a few sizes and measures busbw the
way bandwidth.py does. It is a ``main.Runner`` with its own phases, so its events (start, phase_start /
phase_end, heartbeat, error, result) are the workload's and the supervisor follows it unchanged:

    nccl-load       find and dlopen libnccl and libcudart; versions; device count
    nccl-init       cudaSetDevice(local rank), the unique id from rank 0, ncclCommInitRank
    nccl-allreduce  per size: fill, one checked all-reduce, warm-up, timed trials, busbw
    nccl-teardown   free the buffers, ncclCommDestroy

Evidence for the ctypes signatures (NVIDIA/nccl src/nccl.h.in; the CUDA runtime's cuda_runtime_api.h):
  ncclResult_t ncclGetVersion(int* version)
  ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId)   typedef struct { char internal[128]; } ncclUniqueId
  ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank)
                                                           -- the id is passed BY VALUE (128-byte struct)
  ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
  ncclResult_t ncclCommDestroy(ncclComm_t comm)
  const char*  ncclGetErrorString(ncclResult_t result)
  const char*  ncclGetLastError(ncclComm_t comm)          -- NCCL >= 2.13; absent before (then not asked)
  ncclDataType_t: ncclInt64 = 4, ncclFloat32 = 7, ncclFloat64 = 8; ncclRedOp_t: ncclSum = 0, ncclMax = 2
  ncclResult_t: 0 success, 1 unhandled cuda, 2 system, 3 internal, 4 invalid argument, 5 invalid usage,
                6 remote, 7 in progress
  cudaError_t cudaSetDevice(int), cudaGetDeviceCount(int*), cudaRuntimeGetVersion(int*),
  cudaMalloc(void**, size_t), cudaFree(void*), cudaMemset(void*, int, size_t),
  cudaMemcpy(void* dst, const void* src, size_t, cudaMemcpyKind) with kind 1 host-to-device, 2 device-to-host,
  cudaStreamCreate(cudaStream_t*), cudaStreamSynchronize(cudaStream_t), cudaStreamDestroy(cudaStream_t);
  const char* cudaGetErrorString(cudaError_t)

The unique id goes from rank 0 to the others through a file in the output folder, not a TCP store on
MASTER_ADDR:MASTER_PORT: under torchrun (and accelerate launch, which runs torchrun) the launcher's own
agent holds MASTER_PORT with its store, so a server of ours there fails with EADDRINUSE; the harness runs
one node per cell (--nnodes 1) and every rank of a cell shares the output folder (host and container
alike); each attempt has a fresh folder, so a file from an earlier run cannot be read.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import os
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import bandwidth, cli, distenv, fingerprint
from .main import TEARDOWN_GRACE_S, Runner, run_rank

PHASES = ("nccl-load", "nccl-init", "nccl-allreduce", "nccl-teardown")
# the error classes only the control reports (the workload's classify.ERROR_CLASSES has the rest)
ERROR_CLASSES = ("nccl-not-found", "cuda-not-found")
DEFAULT_SIZES = (cli.MIB, 64 * cli.MIB, cli.GIB)
TIMING = "nccl-control"

NCCL_INT64, NCCL_FLOAT32, NCCL_FLOAT64 = 4, 7, 8
NCCL_SUM, NCCL_MAX = 0, 2
H2D, D2H = 1, 2
UNIQUE_ID_BYTES = 128
CHUNK_BYTES = cli.MIB  # the host pattern copied over the device buffer chunk by chunk
SCRATCH = 64  # float64/int64 elements of the small buffer for barriers and the max over ranks


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_P = ctypes.POINTER
NCCL_SIGNATURES: Dict[str, Any] = {  # also bandwidth.py's ncclAllReduce on torch's communicator
    "ncclGetVersion": (ctypes.c_int, [_P(ctypes.c_int)]),
    "ncclGetUniqueId": (ctypes.c_int, [_P(NcclUniqueId)]),
    "ncclCommInitRank": (ctypes.c_int, [_P(ctypes.c_void_p), ctypes.c_int, NcclUniqueId, ctypes.c_int]),
    "ncclAllReduce": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    "ncclCommDestroy": (ctypes.c_int, [ctypes.c_void_p]),
    "ncclGetErrorString": (ctypes.c_char_p, [ctypes.c_int]),
    "ncclGetLastError": (ctypes.c_char_p, [ctypes.c_void_p]),
}
_CUDA_SIGNATURES: Dict[str, Any] = {
    "cudaSetDevice": (ctypes.c_int, [ctypes.c_int]),
    "cudaGetDeviceCount": (ctypes.c_int, [_P(ctypes.c_int)]),
    "cudaRuntimeGetVersion": (ctypes.c_int, [_P(ctypes.c_int)]),
    "cudaMalloc": (ctypes.c_int, [_P(ctypes.c_void_p), ctypes.c_size_t]),
    "cudaFree": (ctypes.c_int, [ctypes.c_void_p]),
    "cudaMemset": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]),
    "cudaMemcpy": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
    "cudaStreamCreate": (ctypes.c_int, [_P(ctypes.c_void_p)]),
    "cudaStreamSynchronize": (ctypes.c_int, [ctypes.c_void_p]),
    "cudaStreamDestroy": (ctypes.c_int, [ctypes.c_void_p]),
    "cudaGetErrorString": (ctypes.c_char_p, [ctypes.c_int]),
}


# ---------------------------------------------------------------- errors
class ControlError(RuntimeError):
    """A failure of the control; ``error_class`` names its class where the message cannot (main.Runner
    reads it), else classify.py reads the message as it reads the workload's."""

    error_class: Optional[str] = None


class LibraryNotFound(ControlError):
    def __init__(self, what: str, error_class: str, tried: Sequence[str]) -> None:
        super().__init__("no loadable %s; tried: %s" % (what, "; ".join(tried) or "nothing"))
        self.error_class = error_class


class NcclError(ControlError):
    """An ncclResult_t other than success, with NCCL's name for it and its last error text."""

    def __init__(self, call: str, code: int, name: str, last: str) -> None:
        super().__init__("%s failed: NCCL error %d (%s)%s" % (call, code, name, ": " + last if last else ""))
        self.code = code


class CudaError(ControlError):
    """A cudaError_t other than success, with the runtime's text for it ("out of memory" reads as oom)."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__("%s failed: CUDA error %d (%s)" % (call, code, name))
        self.code = code


# ---------------------------------------------------------------- finding the libraries
def wheel_libs(search_path: Sequence[str], pattern: str) -> List[str]:
    """Files matching ``pattern`` (e.g. nvidia/nccl/lib/libnccl.so*) under each ``sys.path`` entry, in
    path order: where torch's pip wheels put NCCL and the CUDA runtime (found without importing torch)."""
    found: List[str] = []
    for entry in search_path:
        for path in sorted(glob.glob(os.path.join(entry or os.curdir, pattern)), reverse=True):
            if os.path.isfile(path) and path not in found:
                found.append(path)
    return found


def nccl_candidates(search_path: Sequence[str], mapped: Sequence[str]) -> List[str]:
    """libnccl in the order the cell's torch would get it: one already mapped (LD_PRELOAD: the harness's
    system-NCCL cells preload it, fingerprint.nccl_loaded reads the same), torch's wheel copy
    (nvidia/nccl/lib, found through its RPATH), then the loader's soname (the system libnccl2)."""
    return [*mapped, *wheel_libs(search_path, os.path.join("nvidia", "nccl", "lib", "libnccl.so*")),
            "libnccl.so.2"]


def cudart_candidates(search_path: Sequence[str], mapped: Sequence[str]) -> List[str]:
    """libcudart: mapped, then the wheels' (nvidia/cuda_runtime/lib for CUDA 12, nvidia/cu13/lib for 13),
    then the loader's sonames, newest first."""
    wheels = wheel_libs(search_path, os.path.join("nvidia", "*", "lib", "libcudart.so*"))
    return [*mapped, *wheels, "libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]


def load_first(candidates: Sequence[str], what: str, error_class: str,
               loader: Callable[[str], Any] = ctypes.CDLL) -> Any:
    """The first candidate that loads, as (path, library); LibraryNotFound naming every failure."""
    tried = []
    for path in candidates:
        try:
            return path, loader(path)
        except OSError as exc:
            tried.append("%s (%s)" % (path, exc))
    raise LibraryNotFound(what, error_class, tried)


def bind(lib: Any, signatures: Mapping[str, Any], optional: Sequence[str] = ()) -> Dict[str, Any]:
    """The library's functions with their C types set; a missing optional one is None."""
    funcs: Dict[str, Any] = {}
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name, None)
        if fn is None and name not in optional:
            raise AttributeError("%s has no %s" % (lib, name))
        if fn is not None:
            fn.restype, fn.argtypes = restype, argtypes
        funcs[name] = fn
    return funcs


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


# ---------------------------------------------------------------- the two libraries, checked
class Nccl:
    """libnccl's calls used here; every non-zero ncclResult_t becomes an NcclError."""

    def __init__(self, lib: Any) -> None:
        self.f = bind(lib, NCCL_SIGNATURES, optional=("ncclGetLastError",))

    def check(self, call: str, code: int, comm: Optional[ctypes.c_void_p] = None) -> None:
        if code == 0:
            return
        name = _text(self.f["ncclGetErrorString"](code))
        last = ""
        if self.f["ncclGetLastError"] is not None:
            last = _text(self.f["ncclGetLastError"](comm))
        raise NcclError(call, code, name, last)

    def version(self) -> int:
        code = ctypes.c_int(0)
        self.check("ncclGetVersion", self.f["ncclGetVersion"](ctypes.pointer(code)))
        return int(code.value)

    def unique_id(self) -> bytes:
        uid = NcclUniqueId()
        self.check("ncclGetUniqueId", self.f["ncclGetUniqueId"](ctypes.pointer(uid)))
        return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)  # .internal would stop at a NUL

    def init_rank(self, world: int, uid: bytes, rank: int) -> ctypes.c_void_p:
        comm = ctypes.c_void_p()
        ident = NcclUniqueId()
        ctypes.memmove(ctypes.addressof(ident), uid, UNIQUE_ID_BYTES)
        self.check("ncclCommInitRank", self.f["ncclCommInitRank"](ctypes.pointer(comm), world, ident, rank))
        return comm

    def all_reduce(self, buf: int, count: int, dtype: int, op: int, comm: ctypes.c_void_p, stream: Any) -> None:
        self.check("ncclAllReduce", self.f["ncclAllReduce"](buf, buf, count, dtype, op, comm, stream), comm)

    def destroy(self, comm: ctypes.c_void_p) -> None:
        self.check("ncclCommDestroy", self.f["ncclCommDestroy"](comm), comm)


class Cuda:
    """The CUDA runtime's calls used here; every non-zero cudaError_t becomes a CudaError."""

    def __init__(self, lib: Any) -> None:
        self.f = bind(lib, _CUDA_SIGNATURES)

    def call(self, name: str, *args: Any) -> None:
        code = self.f[name](*args)
        if code != 0:
            raise CudaError(name, code, _text(self.f["cudaGetErrorString"](code)))

    def out_int(self, name: str) -> int:
        value = ctypes.c_int(0)
        self.call(name, ctypes.pointer(value))
        return int(value.value)

    def malloc(self, nbytes: int) -> int:
        ptr = ctypes.c_void_p()
        self.call("cudaMalloc", ctypes.pointer(ptr), nbytes)
        return int(ptr.value or 0)

    def stream(self) -> ctypes.c_void_p:
        stream = ctypes.c_void_p()
        self.call("cudaStreamCreate", ctypes.pointer(stream))
        return stream


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

    def _check(self, buf: int, count: int) -> int:
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
        wrong = self._check(buf, count)
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


def load_libraries(search_path: Optional[Sequence[str]] = None) -> Any:
    """(Nccl, Cuda, facts) for the libnccl and libcudart this process finds first."""
    where = list(sys.path if search_path is None else search_path)
    nccl_path, nccl_lib = load_first(nccl_candidates(where, fingerprint.mapped_libs("libnccl.so")),
                                     "libnccl", "nccl-not-found")
    cuda_path, cuda_lib = load_first(cudart_candidates(where, fingerprint.mapped_libs("libcudart.so")),
                                     "libcudart", "cuda-not-found")
    facts = {"nccl": {"path": _resolved(nccl_path, "libnccl.so")},
             "cudart": {"path": _resolved(cuda_path, "libcudart.so")}}
    return Nccl(nccl_lib), Cuda(cuda_lib), facts


def _resolved(path: str, name: str) -> str:
    """The mapped file a soname resolved to (a path stays itself)."""
    if os.sep in path:
        return path
    mapped = fingerprint.mapped_libs(name)
    return mapped[0] if mapped else path


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point (control.py): 0 when every phase passed, 1 on an error event; bad flags exit 2."""
    return run_rank(parse_args(argv), Control)
