"""All-reduce bandwidth sweep, measured the nccl-tests way.

Per size: the first call is timed alone (it pays for lazy setup and is never mixed in), then
warm-up, then ``iters`` back-to-back all-reduces between two host clocks with one synchronise at
the end; time per op = total / iters, and the time reported is the MAX over ranks.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

ELEMENT_BYTES = 4  # float32


def bus_factor(world: int) -> float:
    """nccl-tests' all-reduce bus factor 2(n-1)/n (0 for a world of one: nothing crosses a bus)."""
    return 2.0 * (world - 1) / world if world > 0 else 0.0


def bandwidth_row(nbytes: int, iters: int, time_s: float, first_call_s: float,
                  world: int) -> Dict[str, Any]:
    """One result row; algbw = bytes / time / 1e9, busbw = algbw * 2(n-1)/n."""
    algbw = nbytes / time_s / 1e9 if time_s > 0 else None
    busbw = algbw * bus_factor(world) if algbw is not None else None
    return {"bytes": nbytes, "dtype": "float32", "iters": iters, "time_s": time_s,
            "algbw_gbs": algbw, "busbw_gbs": busbw, "first_call_s": first_call_s}


def _measure_size(state: Any, nbytes: int, iters: int, warmup: int) -> Dict[str, Any]:
    import torch
    import torch.distributed as dist

    from .phases import synchronize, tiny_all_reduce

    numel = max(1, nbytes // ELEMENT_BYTES)
    buf = torch.zeros(numel, dtype=torch.float32, device=state.torch_device)  # zeros stay finite

    tiny_all_reduce(state)
    t0 = time.perf_counter()
    dist.all_reduce(buf)
    synchronize(state)
    first_call = time.perf_counter() - t0

    for _ in range(warmup):
        dist.all_reduce(buf)
    synchronize(state)
    tiny_all_reduce(state)  # barrier: everyone starts the timed region together

    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    synchronize(state)
    per_op = (time.perf_counter() - t0) / iters

    times = torch.tensor([per_op, first_call], dtype=torch.float64, device=state.torch_device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    synchronize(state)
    per_op_max, first_max = (float(v) for v in times.cpu().tolist())
    del buf
    return bandwidth_row(numel * ELEMENT_BYTES, iters, per_op_max, first_max, state.world)


def run_bandwidth(state: Any, sizes: List[int], iters: int, warmup: int,
                  progress: Optional[Callable[[int], None]] = None) -> Dict[str, Any]:
    """Sweep ``sizes`` (bytes); ``progress(nbytes)`` is called as each size starts."""
    rows = []
    for nbytes in sizes:
        if progress is not None:
            progress(nbytes)
        rows.append(_measure_size(state, nbytes, iters, warmup))
    return {"rows": rows, "world": state.world, "bus_factor": bus_factor(state.world)}
