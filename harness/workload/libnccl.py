"""The ctypes binding of libnccl and the CUDA runtime (stdlib only: no torch, no compiler, so it loads in
every image and on the host): where a process finds the two libraries, their C signatures, and checked
calls that raise on a non-zero result. The NCCL-only control (nccl_control.py) drives it; bandwidth.py
times ncclAllReduce on torch's own communicator through the same declarations.

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
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import fingerprint

NCCL_INT64, NCCL_FLOAT32, NCCL_FLOAT64 = 4, 7, 8
NCCL_SUM, NCCL_MAX = 0, 2
H2D, D2H = 1, 2
UNIQUE_ID_BYTES = 128


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_P = ctypes.POINTER
NCCL_SIGNATURES: Dict[str, Any] = {  # also bandwidth.py's ncclAllReduce on torch's communicator
    "ncclGetVersion": (ctypes.c_int, [_P(ctypes.c_int)]),
    "ncclGetUniqueId": (ctypes.c_int, [_P(NcclUniqueId)]),
    "ncclCommInitRank": (ctypes.c_int, [_P(ctypes.c_void_p), ctypes.c_int, NcclUniqueId, ctypes.c_int]),
    "ncclAllReduce": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    # sendbuff, recvbuff, sendcount, datatype, comm, stream
    "ncclAllGather": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_void_p, ctypes.c_void_p]),
    # sendbuff, recvbuff, recvcount, datatype, op, comm, stream
    "ncclReduceScatter": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    # sendbuff, recvbuff, count, datatype, root, comm, stream
    "ncclBroadcast": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
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
        self.f = bind(lib, NCCL_SIGNATURES, optional=("ncclGetLastError", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast"))

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


# ---------------------------------------------------------------- the two libraries, found
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

