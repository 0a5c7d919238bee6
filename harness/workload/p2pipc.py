"""GPU peer-to-peer checked the way NCCL's P2P transport uses it (issue 24 item 4): between the rank
processes, through a CUDA IPC handle, by a kernel that reads the peer's buffer and checks every element.

Why a second check: the fingerprint's peer copy (fingerprint.verify_peer_copy) is a copy-engine
``tensor.to()`` inside one process. NCCL's P2P transport (transport/p2p.cc) allocates its buffers in one
rank, exports them with cudaIpcGetMemHandle, opens them in the peer rank's process with
cudaIpcOpenMemHandle(cudaIpcMemLazyEnablePeerAccess) and reads or writes them with its own kernels;
public reports (the RTX 40 hangs, ACS/IOMMU corruption) show the copy pass while that path hangs or
returns wrong data. So here each rank allocates a buffer on its GPU with cuMemAlloc (NCCL's legacy
path), fills it with a pattern of its own (seeded by its rank), and publishes the buffer's IPC handle in
the process group's store; every other rank of the same host on another GPU opens it the same way and
runs a kernel (PTX, compiled by the driver: no compiler needed) that loads every element through the
peer mapping and counts the ones that differ. Each read is bounded in time; rank 0 collects one row per
ordered pair (owner's GPU -> reader's GPU): the result (true, false for wrong data, "timeout", or the
CUDA error that stopped it), the count of wrong elements and the time.

Driver API only (libcuda.so.1 through ctypes) beside torch's own context: nothing beyond the workload's
stdlib + torch. The store keys live under ``harness/p2pipc/`` of the default group's store.
"""
from __future__ import annotations

import ctypes
import json
import socket
import threading
import time
from datetime import timedelta
from typing import Any, Dict, List, Optional, Sequence

ELEMENTS = 1 << 20  # 4 MiB of int32 per owner: every element read, as NCCL's smallest chunks are
READ_TIMEOUT_S = 10.0  # one read; a broken P2P path blocks, it does not slow down
STORE_TIMEOUT_S = 60.0  # for the peers' handles and rows: every rank reaches the check at once
PREFIX = "harness/p2pipc"
GOLDEN = 2654435761  # Knuth's multiplicative hash: element i holds (i * GOLDEN + seed) mod 2**32
BLOCK = 256
IPC_LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the flag NCCL opens with

# harness_p2p_check(src, n, seed, bad): thread i loads src[i] (volatile: through the peer mapping each
# time) and adds one to *bad when it is not (i * GOLDEN + seed) mod 2**32. The driver compiles it for
# the GPU at hand (checked with ptxas for sm_90 in tests/test_p2pipc.py).
PTX = b"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry harness_p2p_check(
	.param .u64 src,
	.param .u32 n,
	.param .u32 seed,
	.param .u64 bad
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<10>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [src];
	ld.param.u32 %r1, [n];
	ld.param.u32 %r2, [seed];
	ld.param.u64 %rd2, [bad];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r6, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r6, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd3, %rd1;
	mul.wide.u32 %rd4, %r6, 4;
	add.s64 %rd5, %rd3, %rd4;
	ld.volatile.global.u32 %r7, [%rd5];
	mad.lo.s32 %r8, %r6, -1640531535, %r2;
	setp.eq.s32 %p2, %r7, %r8;
	@%p2 bra DONE;
	cvta.to.global.u64 %rd6, %rd2;
	atom.global.add.u32 %r9, [%rd6], 1;
DONE:
	ret;
}
\x00"""


class CudaError(RuntimeError):
    """A driver call that did not return CUDA_SUCCESS; its message is the call and the error's name."""


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]  # CUipcMemHandle


def seed_of(rank: int) -> int:
    """Each owner's own pattern, so that a reader that reads another rank's buffer sees it as wrong."""
    return (0x9E3779B9 * (rank + 1)) & 0xFFFFFFFF


def expected(index: int, seed: int) -> int:
    """Element ``index`` of the pattern seeded ``seed``, as an unsigned 32-bit value."""
    return (index * GOLDEN + seed) & 0xFFFFFFFF


def pattern(n: int, seed: int) -> Any:
    """The owner's buffer as a CPU int32 tensor (the same values the kernel expects)."""
    import torch

    values = (torch.arange(n, dtype=torch.int64) * GOLDEN + seed) & 0xFFFFFFFF
    values = values - ((values >> 31) << 32)  # as signed 32-bit, so the cast is exact
    return values.to(torch.int32).contiguous()


def peers_to_read(me: Dict[str, Any], owners: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The owners whose buffers this rank reads: on its host, on another GPU (two ranks of one GPU are
    no peer pair), and published without an error."""
    return [o for o in owners
            if o.get("rank") != me.get("rank") and o.get("host") == me.get("host")
            and o.get("bus") != me.get("bus") and not o.get("error") and o.get("handle")]


class Driver:
    """The few libcuda calls the check needs, each raising CudaError with its name."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        # the handle is passed by value; drivers before CUDA 11 have only the first version of the call
        self.open_ipc = getattr(self.lib, "cuIpcOpenMemHandle_v2", None) or self.lib.cuIpcOpenMemHandle
        self.open_ipc.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
        self.call("cuInit", 0)

    def name(self, code: int) -> str:
        text = ctypes.c_char_p()
        if self.lib.cuGetErrorName(code, ctypes.byref(text)) != 0 or not text.value:
            return "CUDA error %d" % code
        return text.value.decode(errors="replace")

    def call(self, fn: str, *args: Any) -> None:
        code = getattr(self.lib, fn)(*args)
        if code != 0:
            raise CudaError("%s: %s" % (fn, self.name(code)))

    def enter(self, ordinal: int) -> ctypes.c_void_p:
        """Make the device's primary context (torch's own) current on this thread."""
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.call("cuDeviceGet", ctypes.byref(dev), ordinal)
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self.call("cuCtxSetCurrent", ctx)
        return ctx

    def bus_id(self, ordinal: int) -> str:
        dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(dev), ordinal)
        buf = ctypes.create_string_buffer(32)
        self.call("cuDeviceGetPCIBusId", buf, 32, dev)
        return buf.value.decode(errors="replace")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        return ptr.value

    def free(self, ptr: int) -> None:
        self.call("cuMemFree_v2", ctypes.c_uint64(ptr))


class Owner:
    """This rank's buffer: allocated, filled with its pattern, exported as an IPC handle."""

    def __init__(self, driver: Driver, ordinal: int, rank: int, n: int = ELEMENTS) -> None:
        self.driver, self.n, self.seed = driver, n, seed_of(rank)
        driver.enter(ordinal)
        self.ptr = driver.alloc(4 * n)
        host = pattern(n, self.seed)
        driver.call("cuMemcpyHtoD_v2", ctypes.c_uint64(self.ptr), ctypes.c_void_p(host.data_ptr()),
                    ctypes.c_size_t(4 * n))
        handle = IpcHandle()
        driver.call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(self.ptr))
        self.handle = ctypes.string_at(ctypes.addressof(handle), 64).hex()  # .reserved would stop at a NUL

    def free(self) -> None:
        self.driver.free(self.ptr)


def read_peer(driver: Driver, ordinal: int, owner: Dict[str, Any]) -> int:
    """Open the owner's buffer in this process, as NCCL does, read and check every element with the
    kernel on this rank's GPU; the count of elements that differ."""
    driver.enter(ordinal)
    handle = IpcHandle()
    ctypes.memmove(ctypes.addressof(handle), bytes.fromhex(owner["handle"]), 64)
    src = ctypes.c_uint64()
    code = driver.open_ipc(ctypes.byref(src), handle, IPC_LAZY_ENABLE_PEER_ACCESS)
    if code != 0:
        raise CudaError("cuIpcOpenMemHandle: %s" % driver.name(code))
    bad = 0
    try:
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        driver.call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(PTX))
        driver.call("cuModuleGetFunction", ctypes.byref(fn), module, b"harness_p2p_check")
        bad_ptr = driver.alloc(4)
        try:
            driver.call("cuMemsetD32_v2", ctypes.c_uint64(bad_ptr), ctypes.c_uint(0), ctypes.c_size_t(1))
            n = int(owner["n"])
            args = [ctypes.c_uint64(src.value), ctypes.c_uint32(n), ctypes.c_uint32(int(owner["seed"])),
                    ctypes.c_uint64(bad_ptr)]
            params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
            driver.call("cuLaunchKernel", fn, ctypes.c_uint((n + BLOCK - 1) // BLOCK), ctypes.c_uint(1),
                        ctypes.c_uint(1), ctypes.c_uint(BLOCK), ctypes.c_uint(1), ctypes.c_uint(1),
                        ctypes.c_uint(0), None, params, None)
            driver.call("cuCtxSynchronize")
            count = ctypes.c_uint32()
            driver.call("cuMemcpyDtoH_v2", ctypes.byref(count), ctypes.c_uint64(bad_ptr), ctypes.c_size_t(4))
            bad = int(count.value)
        finally:
            driver.free(bad_ptr)
            driver.call("cuModuleUnload", module)
    finally:
        driver.call("cuIpcCloseMemHandle", ctypes.c_uint64(src.value))
    return bad


def bounded_read(driver: Driver, ordinal: int, owner: Dict[str, Any], timeout_s: float) -> Dict[str, Any]:
    """One read on a daemon thread: its row, with "timeout" where it has not returned in time (a broken
    P2P path blocks the kernel; the thread is left behind, as the fingerprint's peer copy is)."""
    box: Dict[str, Any] = {"result": "timeout"}
    t0 = time.monotonic()

    def work() -> None:
        try:
            wrong = read_peer(driver, ordinal, owner)
            box.update(result=wrong == 0, wrong=wrong)
        except Exception as exc:  # noqa: BLE001 - a call that failed is the answer for this pair
            box["result"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
        box["seconds"] = round(time.monotonic() - t0, 4)

    thread = threading.Thread(target=work, name="harness-p2p-ipc", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return dict(box)


def read_all(driver: Driver, me: Dict[str, Any], peers: Sequence[Dict[str, Any]],
             timeout_s: float) -> List[Dict[str, Any]]:
    """This rank's rows: each peer's buffer read in turn, stopping at the first that never answers (the
    device is likely wedged then: further reads would only wait)."""
    rows = []
    for peer in peers:
        row = {"owner": peer["rank"], "reader": me["rank"], "src": peer.get("gpu"), "dst": me["gpu"],
               "src_bus": peer.get("bus"), "dst_bus": me.get("bus"), "bytes": 4 * int(peer["n"])}
        row.update(bounded_read(driver, me["gpu"], peer, timeout_s))
        rows.append(row)
        if row["result"] == "timeout":
            break
    return rows


def _store() -> Any:
    import torch.distributed as dist

    return dist.distributed_c10d._get_default_store()  # private, but in every torch with c10d


def _get(store: Any, key: str, timeout_s: float) -> Any:
    """A value another rank published, waiting for it at most ``timeout_s``."""
    store.wait([key], timedelta(seconds=timeout_s))
    return json.loads(store.get(key).decode())


def exchange(rank: int, world: int, ordinal: int, store: Any, n: int = ELEMENTS,
             read_timeout_s: float = READ_TIMEOUT_S, store_timeout_s: float = STORE_TIMEOUT_S,
             same_gpu: bool = False) -> Dict[str, Any]:
    """The whole check for one rank: publish its buffer, read its peers', publish its rows, wait for every
    rank's rows (so no buffer is freed under a reader), and return them all (rank 0 records them).

    ``same_gpu`` lets two ranks of one GPU read each other (no peer access then, only CUDA IPC and the
    kernel): for a machine with one GPU, where the path can still be exercised (bench/p2p_ipc.py)."""
    me: Dict[str, Any] = {"rank": rank, "host": socket.gethostname(), "gpu": ordinal, "n": n}
    driver: Optional[Driver] = None
    owner: Optional[Owner] = None
    try:
        driver = Driver()
        me["bus"] = driver.bus_id(ordinal)
        owner = Owner(driver, ordinal, rank, n)
        me.update(handle=owner.handle, seed=owner.seed)
    except Exception as exc:  # noqa: BLE001 - the peers record why they could not read this one
        me["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
    store.set("%s/owner/%d" % (PREFIX, rank), json.dumps(me))
    owners = [me if r == rank else _get(store, "%s/owner/%d" % (PREFIX, r), store_timeout_s) for r in range(world)]
    peers = peers_to_read(dict(me, bus=None if same_gpu else me.get("bus")), owners)
    rows = read_all(driver, me, peers, read_timeout_s) if driver is not None else []
    store.set("%s/rows/%d" % (PREFIX, rank), json.dumps(rows))
    every = [row for r in range(world)
             for row in (rows if r == rank else _get(store, "%s/rows/%d" % (PREFIX, r), store_timeout_s))]
    stuck = any(row["result"] == "timeout" for row in every)
    if owner is not None and not stuck:  # under a stuck reader its buffer stays mapped: leave it
        owner.free()
    skipped = [{"rank": o["rank"], "error": o["error"]} for o in owners if o.get("error")]
    return {"pairs": every, "unpublished": skipped} if skipped else {"pairs": every}


def run(rank: int, world: int, ordinal: int) -> Optional[Dict[str, Any]]:
    """The check inside a cell's check phase: None where there is no pair to check (one rank)."""
    if world < 2:
        return None
    return exchange(rank, world, ordinal, _store())
