"""The torch-side phases: init, prepare, step, check, teardown.

Imported lazily by ``main`` inside the first phase, so a broken torch install is reported as an
``import`` error event of that phase instead of a crash before any event.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple, cast

import torch
import torch.distributed as dist

from . import distenv, fingerprint, flight, p2pipc


class State:
    """What the phases hand each other (process group facts, Accelerate objects)."""

    def __init__(self, device: str, rank: int, local_rank: int, world: int) -> None:
        self.device = device
        self.rank = rank
        self.local_rank = local_rank
        self.world = world
        self.backend: Optional[str] = None
        self.accelerator: Any = None
        self.model: Any = None
        self.optimizer: Any = None
        self.dataloader: Any = None
        self.scheduler: Any = None

    @property
    def torch_device(self) -> torch.device:
        if self.device == "cuda":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


def synchronize(state: State) -> None:
    """Wait for queued device work (a no-op on CPU, where gloo calls are synchronous)."""
    if state.device == "cuda":
        torch.cuda.synchronize(state.torch_device)


def tiny_all_reduce(state: State) -> float:
    """One-element all-reduce + sync: makes a lazy NCCL communicator exist; doubles as a barrier."""
    t = torch.ones(1, dtype=torch.float32, device=state.torch_device)
    dist.all_reduce(t)
    synchronize(state)
    return float(t.item())


# ---------------------------------------------------------------- init
def _init_kwargs(state: State, timeout_s: float) -> Dict[str, Any]:
    # No device_id=: torch 2.6.x-2.7.0 hangs randomly with it (pytorch#153960), and the tiny
    # all-reduce below creates the communicator eagerly anyway.
    return {"backend": state.backend, "timeout": timedelta(seconds=timeout_s),
            "rank": state.rank, "world_size": state.world}


def run_init(state: State, out_dir: str, timeout_s: float) -> Dict[str, Any]:
    """Create the process group (nccl on cuda, gloo on cpu) and its communicator."""
    env_set = distenv.set_init_env(os.environ, out_dir, state.rank, torch.__version__)
    for name, value in flight.wanted(os.environ).items():  # read when the group is made: set before it
        os.environ[name] = env_set[name] = value
    flight.serve(out_dir, state.rank)
    state.backend = "nccl" if state.device == "cuda" else "gloo"
    if state.device == "cuda":
        torch.cuda.set_device(state.local_rank)
    dist.init_process_group(**_init_kwargs(state, timeout_s))
    total = tiny_all_reduce(state)
    if total != float(state.world):
        raise RuntimeError("init all-reduce gave %s, expected %d" % (total, state.world))
    return {"backend": str(dist.get_backend()), "world_size": dist.get_world_size(),
            "env_set": env_set,
            "nccl_libs_mapped": fingerprint.mapped_libs("libnccl")}


# ---------------------------------------------------------------- prepare
def _default_group() -> Any:
    try:
        return dist.distributed_c10d._get_default_group()
    except Exception:  # noqa: BLE001 - private API, may move between torch versions
        return None


def _toy_training_objects() -> Tuple[Any, Any, Any, Any]:
    """A 2-layer MLP, SGD, a DataLoader over synthetic data and a StepLR (deterministic)."""
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 16, generator=gen)
    y = torch.randn(64, 1, generator=gen)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
    return model, optimizer, loader, scheduler


def _enum_name(value: Any) -> str:
    """'MULTI_GPU' for DistributedType.MULTI_GPU; str() of a str-mixin enum differs by Python."""
    return str(getattr(value, "value", value))


def run_prepare(state: State) -> Dict[str, Any]:
    """Accelerator() on top of our process group, then prepare(): DDP's first broadcast."""
    from accelerate import Accelerator

    group_before = _default_group()
    accelerator = Accelerator(cpu=(state.device == "cpu"))
    reused = None if group_before is None else (_default_group() is group_before)
    if accelerator.num_processes != state.world:
        raise RuntimeError(
            "Accelerate sees %d processes but the process group has %d ranks "
            "(launcher/environment mismatch)" % (accelerator.num_processes, state.world))
    objs = accelerator.prepare(*_toy_training_objects())
    state.accelerator = accelerator
    state.model, state.optimizer, state.dataloader, state.scheduler = objs
    return {"distributed_type": _enum_name(accelerator.distributed_type),
            "num_processes": int(accelerator.num_processes),
            "process_index": int(accelerator.process_index),
            "accelerate_device": str(accelerator.device),
            "process_group_reused": reused,
            "process_group_initialized": bool(dist.is_initialized()),
            "model_class": type(state.model).__name__}


# ---------------------------------------------------------------- step
def run_step(state: State) -> Dict[str, Any]:
    """One forward, backward (the gradient all-reduce under DDP), optimizer and scheduler step."""
    x, y = next(iter(state.dataloader))
    state.model.train()
    loss = torch.nn.functional.mse_loss(state.model(x), y)
    state.accelerator.backward(loss)
    state.optimizer.step()
    state.scheduler.step()
    state.optimizer.zero_grad()
    synchronize(state)
    return {"loss": float(loss.detach().float().item())}


# ---------------------------------------------------------------- check
def check_values(rank: int, numel: int, modulus: int) -> torch.Tensor:
    """Rank-dependent small non-negative integers, scrambled along the index (int64)."""
    idx = torch.arange(numel, dtype=torch.int64)
    return (idx * 2654435761 + (rank + 1) * 97531) % 1000003 % modulus


def _check_cases(world: int) -> List[Tuple[torch.dtype, int, int]]:
    """(dtype, numel, modulus): exact integers whose sum over ranks and every partial sum stays
    exactly representable (bf16: integers <= 256; float32: <= 2**24)."""
    bf16_top = max(1, min(4, 256 // max(1, world)))      # values 0..bf16_top
    f32_top = max(1, min(999, (1 << 24) // max(1, world)))  # values 0..f32_top
    return [
        (torch.float32, 1000, f32_top + 1),
        (torch.float32, 1 << 18, f32_top + 1),       # 1 MiB
        (torch.bfloat16, 1000, bf16_top + 1),
        (torch.bfloat16, 1 << 19, bf16_top + 1),     # 1 MiB
        (torch.int32, 4099, 1 << 20),
    ]


def check_one(state: State, dtype: torch.dtype, numel: int, modulus: int) -> Dict[str, Any]:
    """All-reduce SUM one pattern and count elements that differ from the locally known sum."""
    mine = check_values(state.rank, numel, modulus)
    expected = cast(torch.Tensor, sum(check_values(r, numel, modulus) for r in range(state.world)))  # world >= 1
    buf = mine.to(dtype).to(state.torch_device)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    synchronize(state)
    got = buf.cpu().to(torch.float64)
    bad = got != expected.to(torch.float64)
    wrong = int(bad.sum().item())
    row = {"dtype": str(dtype).replace("torch.", ""), "numel": numel, "wrong": wrong}
    if wrong:
        first = int(bad.nonzero()[0].item())
        row.update(first_wrong_index=first, first_wrong_got=float(got[first].item()),
                   first_wrong_expected=float(expected[first].item()))
    return row


def p2p_unused(environ: Dict[str, str]) -> Optional[str]:
    """Why NCCL uses no P2P in this cell (the variables that turn it off), or None. The IPC check then
    does not run: on a pair whose P2P hangs, its read would wedge the GPU that the variant exists to spare."""
    if environ.get("NCCL_P2P_DISABLE", "").strip() not in ("", "0"):
        return "NCCL_P2P_DISABLE=%s: NCCL does not use P2P in this cell" % environ["NCCL_P2P_DISABLE"]
    if environ.get("NCCL_P2P_LEVEL", "").strip().upper() in ("LOC", "0"):
        return "NCCL_P2P_LEVEL=%s: NCCL does not use P2P in this cell" % environ["NCCL_P2P_LEVEL"]
    return None


def run_check(state: State) -> Dict[str, Any]:
    """Exact all-reduce checks; wrong data is recorded, not raised (it is an outcome). On GPUs with more
    than one rank, then the P2P path the way NCCL uses it (p2pipc): recorded, never raised either."""
    checks = [check_one(state, *case) for case in _check_cases(state.world)]
    out: Dict[str, Any] = {"checks": checks, "wrong_total": sum(c["wrong"] for c in checks)}
    if state.device == "cuda" and state.world > 1:
        unused = p2p_unused(dict(os.environ))
        out["p2p_ipc"] = {"skipped": unused} if unused else fingerprint.safe(
            lambda: p2pipc.run(state.rank, state.world, state.local_rank))
    return out


# ---------------------------------------------------------------- teardown
def run_teardown() -> Dict[str, Any]:
    was = bool(dist.is_available() and dist.is_initialized())
    if was:
        dist.destroy_process_group()
    return {"destroyed": was}
