"""All-reduce bandwidth sweep, measured the nccl-tests way, in repeated trials.

Per size: the data is checked first (every rank contributes rank+1, the sum is known exactly: the
count of wrong elements is the row's #wrong), the first call is timed alone (it pays for lazy setup
and is never mixed in), then warm-up, then ``trials`` trials. A trial is ``iters`` back-to-back
all-reduces between two host clocks with one synchronise at the end; time per op = total / iters, and
the time of a trial is the MAX over ranks. The row holds the median trial and the spread.

Two timings, because they are two different numbers (seen on 2x H200, NCCL 2.28.9: torch's eager
call costs 20-25 us more per op than nccl-tests' own launch, so eager timing read 0.33x nccl-tests'
busbw at 8 KiB and 0.62x at 1 MiB, while large sizes agreed):
- on GPUs the collective is timed as nccl-tests times it: ``iters`` ncclAllReduce calls on torch's own
  communicator through the loaded libnccl (ctypes), no torch in between (``timing: nccl``). Where the
  communicator cannot be had, a CUDA graph of the ``iters`` all-reduces is replayed instead
  (``timing: cuda-graph``; on 2x H200 it read 0.88-0.94x nccl-tests' default mode from 1 to 16 MiB,
  as nccl-tests' own -G mode does), and where that fails too, the eager loop (``timing: eager``);
- the eager loop is timed as well: ``eager_us``, what DDP pays per call.
gloo on CPUs has neither: its eager loop is the timing.
"""
from __future__ import annotations

import functools
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

ELEMENT_BYTES = 4  # float32
# The collectives DDP and FSDP use. Each row's size is nccl-tests' (the whole buffer: all-gather's
# output, reduce-scatter's input) and its bus factor nccl-tests' (doc/PERFORMANCE.md): all-reduce
# 2(n-1)/n, all-gather and reduce-scatter (n-1)/n, broadcast 1. A world of one has 0: nothing crosses a
# bus, and a local copy's rate is no bandwidth.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
_FACTORS: Dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
ROOT = 0  # broadcast's


def bus_factor(world: int, collective: str = "all_reduce") -> float:
    """nccl-tests' bus factor of `collective` for `world` ranks (0 for a world of one)."""
    return _FACTORS[collective](world) if world > 1 else 0.0


def _gbs(nbytes: int, seconds: float) -> Optional[float]:
    return nbytes / seconds / 1e9 if seconds > 0 else None


def bandwidth_row(nbytes: int, iters: int, trial_times: List[float], first_call_s: float, world: int,
                  eager_s: Optional[List[float]] = None, timing: str = "eager",
                  wrong: int = 0, collective: str = "all_reduce") -> Dict[str, Any]:
    """One result row from the per-trial times per op (seconds, max over ranks): the median trial's
    time, algbw = bytes / time / 1e9 and busbw = algbw * the collective's bus factor, and busbw of every
    trial."""
    factor = bus_factor(world, collective)
    time_s = statistics.median(trial_times)
    algbw = _gbs(nbytes, time_s)
    trials = [b * factor for b in (_gbs(nbytes, t) for t in trial_times) if b is not None]
    return {"bytes": nbytes, "dtype": "float32", "iters": iters, "time_s": time_s,
            "algbw_gbs": algbw, "busbw_gbs": algbw * factor if algbw is not None else None,
            "busbw_trials": trials, "busbw_min": min(trials) if trials else None,
            "busbw_max": max(trials) if trials else None,
            "eager_us": statistics.median(eager_s) * 1e6 if eager_s else None,
            "timing": timing, "wrong": wrong, "first_call_s": first_call_s,
            **({"collective": collective} if collective != "all_reduce" else {})}


class _Op:
    """One collective on its buffers (float32, ``count`` elements in nccl-tests' size), with its exact
    check: every rank contributes rank+1, so the right answer is known exactly."""

    def __init__(self, name: str, state: Any, nbytes: int) -> None:
        import torch

        self.name, self.state = name, state
        world = state.world
        count = max(1, nbytes // ELEMENT_BYTES)
        if name in ("all_gather", "reduce_scatter"):
            count = max(1, count // world) * world  # a whole chunk per rank
        self.count, self.chunk = count, count // world
        device = state.torch_device
        if name == "all_gather":
            self.inp = torch.zeros(self.chunk, dtype=torch.float32, device=device)
            self.out = torch.zeros(count, dtype=torch.float32, device=device)
        elif name == "reduce_scatter":
            self.inp = torch.zeros(count, dtype=torch.float32, device=device)
            self.out = torch.zeros(self.chunk, dtype=torch.float32, device=device)
        else:  # in place
            self.inp = self.out = torch.zeros(count, dtype=torch.float32, device=device)

    @property
    def nbytes(self) -> int:
        return self.count * ELEMENT_BYTES

    def __call__(self) -> None:
        """The collective through torch (eager)."""
        import torch.distributed as dist

        if self.name == "all_reduce":
            dist.all_reduce(self.out)
        elif self.name == "all_gather":
            dist.all_gather_into_tensor(self.out, self.inp)
        elif self.name == "reduce_scatter":
            dist.reduce_scatter_tensor(self.out, self.inp)
        else:
            dist.broadcast(self.out, ROOT)

    def check(self) -> int:
        """Elements that come back wrong from one call of rank+1 everywhere (exact in float32)."""
        import torch

        from .phases import synchronize

        rank, world = self.state.rank, self.state.world
        self.inp.fill_(float(rank + 1))
        if self.out is not self.inp:
            self.out.zero_()
        self()
        synchronize(self.state)
        if self.name == "all_gather":  # chunk k is rank k's
            want = torch.arange(1, world + 1, dtype=torch.float32, device=self.out.device).repeat_interleave(self.chunk)
            wrong = int((self.out != want).sum().item())
        else:
            value = {"broadcast": float(ROOT + 1)}.get(self.name, float(world * (world + 1) // 2))
            wrong = int((self.out != value).sum().item())
        self.inp.zero_()  # zeros stay finite through any number of timed calls
        self.out.zero_()
        return wrong

    def nccl(self, lib: Any, comm: Any, stream: Any) -> Callable[[], int]:
        """The same collective as one ncclXxx call on torch's communicator (ctypes), no torch between."""
        import ctypes

        from .libnccl import NCCL_FLOAT32, NCCL_SUM

        send, recv = ctypes.c_void_p(self.inp.data_ptr()), ctypes.c_void_p(self.out.data_ptr())
        if self.name == "all_reduce":
            fn = lib["ncclAllReduce"]
            return lambda: fn(send, recv, self.count, NCCL_FLOAT32, NCCL_SUM, comm, stream)
        if self.name == "all_gather":
            fn = lib["ncclAllGather"]
            return lambda: fn(send, recv, self.chunk, NCCL_FLOAT32, comm, stream)
        if self.name == "reduce_scatter":
            fn = lib["ncclReduceScatter"]
            return lambda: fn(send, recv, self.chunk, NCCL_FLOAT32, NCCL_SUM, comm, stream)
        fn = lib["ncclBroadcast"]
        return lambda: fn(send, recv, self.count, NCCL_FLOAT32, ROOT, comm, stream)


def _eager_loop(state: Any, op: Callable[[], None], iters: int) -> float:
    """Seconds per op of ``iters`` eager calls, synchronised once at the end."""
    from .phases import synchronize, tiny_all_reduce

    tiny_all_reduce(state)  # barrier: everyone starts the timed region together
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    synchronize(state)
    return (time.perf_counter() - t0) / iters


def _graph(state: Any, op: Callable[[], None], iters: int) -> Optional[Callable[[], float]]:
    """A CUDA graph of ``iters`` calls and a function timing one replay (seconds per op); None where
    capture fails (the eager loop is then the timing)."""
    import torch

    from .phases import synchronize, tiny_all_reduce

    try:
        stream = torch.cuda.Stream(device=state.torch_device)
        stream.wait_stream(torch.cuda.current_stream(state.torch_device))
        with torch.cuda.stream(stream):  # NCCL wants a warm-up on the capture stream
            op()
        torch.cuda.current_stream(state.torch_device).wait_stream(stream)
        synchronize(state)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(iters):
                op()
        synchronize(state)
        graph.replay()  # the first replay uploads the graph
        synchronize(state)
    except Exception:  # noqa: BLE001 - no graph on this stack: eager timing it is
        synchronize(state)
        return None

    def replay() -> float:
        tiny_all_reduce(state)
        t0 = time.perf_counter()
        graph.replay()
        synchronize(state)
        return (time.perf_counter() - t0) / iters

    return replay


NCCL_CALLS = {"all_reduce": "ncclAllReduce", "all_gather": "ncclAllGather", "reduce_scatter": "ncclReduceScatter",
              "broadcast": "ncclBroadcast"}


def _nccl_loop(state: Any, op: _Op, iters: int) -> Optional[Callable[[], float]]:
    """A function timing ``iters`` back-to-back NCCL calls of the collective on torch's own communicator,
    through the libnccl this process really uses, on torch's current stream (seconds per op); None
    where torch does not expose its communicator (``_comm_ptr``, torch >= 2.3) or the call fails."""
    import ctypes

    import torch
    import torch.distributed as dist

    from . import fingerprint
    from .libnccl import NCCL_SIGNATURES, bind  # nccl.h, declared once
    from .phases import synchronize, tiny_all_reduce

    call = None
    try:
        backend = dist.distributed_c10d._get_default_group()._get_backend(state.torch_device)
        comm = ctypes.c_void_p(backend._comm_ptr())  # type: ignore[attr-defined]
        path = (fingerprint.nccl_loaded() or {}).get("path")
        if path and comm.value:
            name = NCCL_CALLS[op.name]
            lib = bind(ctypes.CDLL(path), {name: NCCL_SIGNATURES[name]})
            stream = ctypes.c_void_p(torch.cuda.current_stream(state.torch_device).cuda_stream)
            call = op.nccl(lib, comm, stream)
    except Exception:  # noqa: BLE001 - private API: fall back to the next timing
        call = None
    # every rank must time the same way, or the collectives would not pair up
    agreed = torch.tensor([1 if call is not None else 0], dtype=torch.int32, device=state.torch_device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    if not int(agreed.item()):
        return None
    assert call is not None  # every rank has it: the minimum over them is 1
    tiny_all_reduce(state)
    call()  # warm-up, and a check it works
    synchronize(state)

    def loop() -> float:
        tiny_all_reduce(state)
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        synchronize(state)
        return (time.perf_counter() - t0) / iters

    return loop


def _measure_size(state: Any, collective: str, nbytes: int, iters: int, warmup: int, trials: int,
                  progress: Callable[[int], None]) -> Dict[str, Any]:
    import torch
    import torch.distributed as dist

    from .phases import synchronize, tiny_all_reduce

    op = _Op(collective, state, nbytes)
    wrong = op.check()

    tiny_all_reduce(state)
    t0 = time.perf_counter()
    op()
    synchronize(state)
    first_call = time.perf_counter() - t0

    for _ in range(warmup):
        op()
    synchronize(state)
    eager = []
    for _ in range(trials):  # every trial is progress: a large size on gloo takes minutes in all
        eager.append(_eager_loop(state, op, iters))
        progress(op.nbytes)
    timing = "eager"
    timed: Optional[Callable[[], float]] = None
    if state.device == "cuda":
        timing, timed = "nccl", _nccl_loop(state, op, iters)
        if timed is None:
            timing, timed = "cuda-graph", _graph(state, op, iters)
    device_timed: List[float] = []
    if timed is not None:
        for _ in range(trials):
            device_timed.append(timed())
            progress(op.nbytes)

    # every timing is the max over ranks: the slowest rank decides, as in nccl-tests
    times = torch.tensor(eager + device_timed + [first_call], dtype=torch.float64, device=state.torch_device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    counts = torch.tensor([wrong], dtype=torch.int64, device=state.torch_device)
    dist.all_reduce(counts)
    synchronize(state)
    values = [float(v) for v in times.cpu().tolist()]
    eager_max, device_max, first_max = values[:trials], values[trials:-1], values[-1]
    size = op.nbytes
    del op
    if device_max:
        return bandwidth_row(size, iters, device_max, first_max, state.world, eager_max, timing,
                             int(counts.item()), collective)
    return bandwidth_row(size, iters, eager_max, first_max, state.world, eager_max, "eager",
                         int(counts.item()), collective)


def run_bandwidth(state: Any, sizes: List[int], iters: int, warmup: int, trials: int = 1,
                  progress: Optional[Callable[[str, int], None]] = None,
                  collectives: Sequence[str] = ("all_reduce",)) -> Dict[str, Any]:
    """Sweep ``sizes`` (bytes) for each collective, all-reduce first (the table's column: ``rows``), then
    the others (``collectives``: name -> its rows and bus factor); ``progress(collective, nbytes)`` is
    called as each size starts and after each trial."""
    def say(collective: str, nbytes: int) -> None:
        if progress is not None:
            progress(collective, nbytes)

    sweeps: Dict[str, List[Dict[str, Any]]] = {}
    for collective in ["all_reduce", *[c for c in collectives if c != "all_reduce"]]:
        rows = sweeps.setdefault(collective, [])
        for nbytes in sizes:
            say(collective, nbytes)
            rows.append(_measure_size(state, collective, nbytes, iters, warmup, trials,
                                      functools.partial(say, collective)))
    others = {c: {"rows": rows, "bus_factor": bus_factor(state.world, c)} for c, rows in sweeps.items()
              if c != "all_reduce"}
    return {"rows": sweeps["all_reduce"], "world": state.world, "bus_factor": bus_factor(state.world),
            "trials": trials, **({"collectives": others} if others else {})}
