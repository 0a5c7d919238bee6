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

import statistics
import time
from typing import Any, Callable, Dict, List, Optional

ELEMENT_BYTES = 4  # float32


def bus_factor(world: int) -> float:
    """nccl-tests' all-reduce bus factor 2(n-1)/n (0 for a world of one: nothing crosses a bus)."""
    return 2.0 * (world - 1) / world if world > 0 else 0.0


def _gbs(nbytes: int, seconds: float) -> Optional[float]:
    return nbytes / seconds / 1e9 if seconds > 0 else None


def bandwidth_row(nbytes: int, iters: int, trial_times: List[float], first_call_s: float, world: int,
                  eager_s: Optional[List[float]] = None, timing: str = "eager",
                  wrong: int = 0) -> Dict[str, Any]:
    """One result row from the per-trial times per op (seconds, max over ranks): the median trial's
    time, algbw = bytes / time / 1e9 and busbw = algbw * 2(n-1)/n, and busbw of every trial."""
    factor = bus_factor(world)
    time_s = statistics.median(trial_times)
    algbw = _gbs(nbytes, time_s)
    trials = [b * factor for b in (_gbs(nbytes, t) for t in trial_times) if b is not None]
    return {"bytes": nbytes, "dtype": "float32", "iters": iters, "time_s": time_s,
            "algbw_gbs": algbw, "busbw_gbs": algbw * factor if algbw is not None else None,
            "busbw_trials": trials, "busbw_min": min(trials) if trials else None,
            "busbw_max": max(trials) if trials else None,
            "eager_us": statistics.median(eager_s) * 1e6 if eager_s else None,
            "timing": timing, "wrong": wrong, "first_call_s": first_call_s}


def _check(state: Any, buf: Any) -> int:
    """Elements that come back wrong from one all-reduce of rank+1 everywhere (exact in float32)."""
    import torch.distributed as dist

    from .phases import synchronize

    buf.fill_(float(state.rank + 1))
    dist.all_reduce(buf)
    synchronize(state)
    want = float(state.world * (state.world + 1) // 2)
    wrong = int((buf != want).sum().item())
    buf.zero_()  # zeros stay finite through any number of timed all-reduces
    return wrong


def _eager_loop(state: Any, buf: Any, iters: int) -> float:
    """Seconds per op of ``iters`` eager all-reduces, synchronised once at the end."""
    import torch.distributed as dist

    from .phases import synchronize, tiny_all_reduce

    tiny_all_reduce(state)  # barrier: everyone starts the timed region together
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    synchronize(state)
    return (time.perf_counter() - t0) / iters


def _graph(state: Any, buf: Any, iters: int) -> Optional[Callable[[], float]]:
    """A CUDA graph of ``iters`` all-reduces and a function timing one replay (seconds per op); None
    where capture fails (the eager loop is then the timing)."""
    import torch
    import torch.distributed as dist

    from .phases import synchronize, tiny_all_reduce

    try:
        stream = torch.cuda.Stream(device=state.torch_device)
        stream.wait_stream(torch.cuda.current_stream(state.torch_device))
        with torch.cuda.stream(stream):  # NCCL wants a warm-up on the capture stream
            dist.all_reduce(buf)
        torch.cuda.current_stream(state.torch_device).wait_stream(stream)
        synchronize(state)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(iters):
                dist.all_reduce(buf)
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




def _nccl_loop(state: Any, buf: Any, iters: int) -> Optional[Callable[[], float]]:
    """A function timing ``iters`` back-to-back ncclAllReduce calls on torch's own communicator, through
    the libnccl this process really uses, on torch's current stream (seconds per op); None where torch
    does not expose its communicator (``_comm_ptr``, torch >= 2.3) or the call fails."""
    import ctypes

    import torch
    import torch.distributed as dist

    from . import fingerprint
    from .libnccl import NCCL_FLOAT32, NCCL_SIGNATURES, NCCL_SUM, bind  # nccl.h, declared once
    from .phases import synchronize, tiny_all_reduce

    all_reduce = None
    try:
        backend = dist.distributed_c10d._get_default_group()._get_backend(state.torch_device)
        comm = ctypes.c_void_p(backend._comm_ptr())  # type: ignore[attr-defined]
        path = (fingerprint.nccl_loaded() or {}).get("path")
        if path and comm.value:
            all_reduce = bind(ctypes.CDLL(path), {"ncclAllReduce": NCCL_SIGNATURES["ncclAllReduce"]})["ncclAllReduce"]
    except Exception:  # noqa: BLE001 - private API: fall back to the next timing
        all_reduce = None
    # every rank must time the same way, or the collectives would not pair up
    agreed = torch.tensor([1 if all_reduce is not None else 0], dtype=torch.int32, device=state.torch_device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    if not int(agreed.item()):
        return None
    assert all_reduce is not None  # every rank has it: the minimum over them is 1
    stream = ctypes.c_void_p(torch.cuda.current_stream(state.torch_device).cuda_stream)
    ptr, count = ctypes.c_void_p(buf.data_ptr()), buf.numel()
    tiny_all_reduce(state)
    all_reduce(ptr, ptr, count, NCCL_FLOAT32, NCCL_SUM, comm, stream)  # warm-up, and a check it works
    synchronize(state)

    def loop() -> float:
        tiny_all_reduce(state)
        t0 = time.perf_counter()
        for _ in range(iters):
            all_reduce(ptr, ptr, count, NCCL_FLOAT32, NCCL_SUM, comm, stream)
        synchronize(state)
        return (time.perf_counter() - t0) / iters

    return loop


def _measure_size(state: Any, nbytes: int, iters: int, warmup: int, trials: int,
                  progress: Callable[[int], None]) -> Dict[str, Any]:
    import torch
    import torch.distributed as dist

    from .phases import synchronize, tiny_all_reduce

    numel = max(1, nbytes // ELEMENT_BYTES)
    buf = torch.zeros(numel, dtype=torch.float32, device=state.torch_device)
    wrong = _check(state, buf)

    tiny_all_reduce(state)
    t0 = time.perf_counter()
    dist.all_reduce(buf)
    synchronize(state)
    first_call = time.perf_counter() - t0

    for _ in range(warmup):
        dist.all_reduce(buf)
    synchronize(state)
    eager = []
    for _ in range(trials):  # every trial is progress: a large size on gloo takes minutes in all
        eager.append(_eager_loop(state, buf, iters))
        progress(nbytes)
    timing = "eager"
    timed: Optional[Callable[[], float]] = None
    if state.device == "cuda":
        timing, timed = "nccl", _nccl_loop(state, buf, iters)
        if timed is None:
            timing, timed = "cuda-graph", _graph(state, buf, iters)
    device_timed: List[float] = []
    if timed is not None:
        for _ in range(trials):
            device_timed.append(timed())
            progress(nbytes)

    # every timing is the max over ranks: the slowest rank decides, as in nccl-tests
    times = torch.tensor(eager + device_timed + [first_call], dtype=torch.float64, device=state.torch_device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    counts = torch.tensor([wrong], dtype=torch.int64, device=state.torch_device)
    dist.all_reduce(counts)
    synchronize(state)
    values = [float(v) for v in times.cpu().tolist()]
    eager_max, device_max, first_max = values[:trials], values[trials:-1], values[-1]
    del buf
    if device_max:
        return bandwidth_row(numel * ELEMENT_BYTES, iters, device_max, first_max, state.world, eager_max,
                             timing, int(counts.item()))
    return bandwidth_row(numel * ELEMENT_BYTES, iters, eager_max, first_max, state.world, eager_max, "eager",
                         int(counts.item()))


def run_bandwidth(state: Any, sizes: List[int], iters: int, warmup: int, trials: int = 1,
                  progress: Optional[Callable[[int], None]] = None) -> Dict[str, Any]:
    """Sweep ``sizes`` (bytes); ``progress(nbytes)`` is called as each size starts and after each trial."""
    rows = []
    say = progress or (lambda nbytes: None)
    for nbytes in sizes:
        say(nbytes)
        rows.append(_measure_size(state, nbytes, iters, warmup, trials, say))
    return {"rows": rows, "world": state.world, "bus_factor": bus_factor(state.world), "trials": trials}
