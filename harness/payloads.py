"""What the workload's phases write, typed (harness/workload: fingerprint.py, bandwidth.py, main.py): the
fingerprint rank 0 takes inside the container, the bandwidth sweep's rows, and the phase_end events
that carry them, with the bounds of every figure. A rank writes them, so they keep the keys the rank
wrote (Written) and unknown ones as written; the harness reads only the declared fields. evidence.py
holds what the supervisor makes of the ranks; both are read and written through harness/codec.py."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, model_validator

from .codec import Count, Flag, Json, Limit, Model, Str, Text, Verified, ints, invariant, nums

__all__ = ["MAX_BYTES", "MAX_GBS", "MAX_SECONDS", "Bytes", "GBs", "Duration", "RankNo", "Wall", "Written", "EnvChange",
           "PeerAccess", "P2pRead", "P2pCheck", "NcclLoaded", "Driver", "Gpu", "Shm", "Libcuda", "Nvml", "Memlock",
           "Fingerprint", "BandwidthRow",
           "Sweep", "size_label", "ranges_apart", "Envelope", "PhaseEnd"]

# The largest figures a real attempt can hold; beyond them a record was damaged, not measured. The
# fastest busbw measured here is 341 GB/s (2x H200 over NVLink, docs/benchmarks.md) and the workload's
# sizes fit in one GPU's memory (141 GB on an H200): a thousand times either is no measurement. A
# one-rank all-reduce communicates nothing, and its "algbw" (about 1.2 million GB/s on an H200) is no
# bandwidth: the tolerant reader leaves such a figure out, so the record stays readable.
MAX_BYTES = 1 << 47  # 128 TiB
MAX_GBS = 1e6
MAX_SECONDS = 1e7  # four months: past any cell's hard cap

Bytes = Annotated[int, ints(1, MAX_BYTES)]
GBs = Annotated[float, nums(MAX_GBS)]
Duration = Annotated[float, nums(MAX_SECONDS)]
RankNo = Annotated[int, ints(0, 1 << 16)]
Wall = Annotated[float, nums()]  # a time.time() stamp


class Written(Model):
    """What a rank wrote: the keys it set, unknown ones kept as written."""

    model_config = ConfigDict(frozen=True, extra="allow")
    WRITTEN_ONLY: ClassVar[bool] = True

    def __bool__(self) -> bool:
        return bool(self.model_fields_set or self.model_extra)


# ---------------------------------------------------------------- the fingerprint (workload/fingerprint.py)
class EnvChange(Model):
    """A variable the launcher changed between what the harness asked for and what the rank saw."""

    expected: Text | None = None
    actual: Text | None = None


class PeerAccess(Written):
    src: RankNo | None = None
    dst: RankNo | None = None
    claimed: Flag | None = None  # as torch says; None when not asked
    verified: Verified | None = None  # True, False, "timeout", ... or None when not checked


class P2pRead(Written):
    """One ordered pair of the IPC peer check (workload/p2pipc.py): the reader rank's kernel read the owner
    rank's buffer through CUDA IPC, as NCCL's P2P transport does."""

    owner: RankNo | None = None
    reader: RankNo | None = None
    src: RankNo | None = None  # the owner's GPU (its CUDA ordinal)
    dst: RankNo | None = None  # the reader's GPU
    src_bus: Str | None = None
    dst_bus: Str | None = None
    bytes: Count | None = None
    result: Verified | None = None  # True, False (wrong data), "timeout", or the CUDA error that stopped it
    wrong: Count | None = None  # elements that differed
    seconds: Duration | None = None

    @property
    def broken(self) -> bool:
        """The path answered wrong data or never answered: what NCCL's P2P would meet (an error that
        stopped the read, such as a GPU this rank cannot see, says nothing of the path)."""
        return self.result is False or self.result == "timeout"


class Unpublished(Written):
    """A rank whose buffer the IPC peer check could not offer its peers, and why (no driver, no memory)."""

    rank: RankNo | None = None
    error: Text | None = None


class P2pCheck(Written):
    """The check phase's IPC peer check: its pairs, or why it did not run."""

    pairs: tuple[P2pRead, ...] = ()
    unpublished: tuple[Unpublished, ...] = ()
    skipped: Text | None = None  # NCCL does not use P2P in this cell (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC)
    error: Text | None = None  # the check itself failed (a peer that never published, no store)


class NcclLoaded(Written):
    """A libnccl the rank mapped, with the version ncclGetVersion gave (or why it could not)."""

    version: Str | None = None
    code: Annotated[int, ints(0)] | None = None
    path: Str | None = None
    source: Str | None = None
    error: Text | None = None
    all: tuple[NcclLoaded, ...] | None = None  # every libnccl mapped, when more than one


class Driver(Written):
    version: Str | None = None
    source: Str | None = None
    cuda_driver_api: Str | None = None


class Gpu(Written):
    index: RankNo | None = None
    name: Str | None = None
    capability: Str | None = None
    total_memory: Count | None = None


class Shm(Written):
    bytes: Count | None = None
    free_bytes: Count | None = None
    mode: Str | None = None  # "1777"
    writable: Flag | None = None  # the rank could create a file in it, as NCCL does; None before it was measured
    write_error: Text | None = None


class Libcuda(Written):
    """The libcuda the rank mapped, and whether it is a CUDA forward-compatibility copy (cuda-compat)."""

    path: Str | None = None
    compat: Flag | None = None
    all: tuple[Str, ...] = ()


class Nvml(Written):
    """What NVML said: each GPU's compute mode, or nvmlInit's error (18: driver library and kernel
    module of different versions)."""

    compute_modes: tuple[Str, ...] = ()
    error_code: Annotated[int, ints(0)] | None = None
    version_mismatch: Flag | None = None


class Memlock(Written):
    soft: Limit | None = None
    hard: Limit | None = None


_FACT_ERROR = "error"  # a fact the workload could not collect is {"error": "Type: message"} in its place
_NOT_FACTS = frozenset({"nccl_loaded", "env", "nccl_env_changed"})  # objects whose own keys may be "error"


class Fingerprint(Written):
    """What rank 0 saw inside the container after the launcher ran (the workload's fingerprint phase).
    A fact the workload could not collect is in `fact_errors` with why (an Accelerate that does not
    import, a driver that does not answer), not in its own field."""

    python: Str | None = None
    torch: Str | None = None
    torch_cuda: Str | None = None
    torch_git: Str | None = None
    cudnn: Annotated[int, ints(0)] | None = None
    accelerate: Str | None = None
    nccl_compiled: Str | None = None
    device: Str | None = None
    hostname: Str | None = None
    cuda_available: Flag | None = None
    cuda_init: Text | None = None
    # written as nccl_loaded and driver; the names readers use give the version (the properties below)
    nccl_loaded_lib: NcclLoaded | None = Field(None, alias="nccl_loaded")
    driver_info: Driver | None = Field(None, alias="driver")
    device_count: Count | None = None
    gpus: tuple[Gpu, ...] = ()
    peer_access: tuple[PeerAccess, ...] = ()
    shm: Shm | None = None
    libcuda: Libcuda | None = None
    nvml: Nvml | None = None
    memlock: Memlock | None = None
    env: dict[str, Text] = {}  # the variables the rank saw (values masked by workload/redact.py)
    nccl_env_changed: dict[str, EnvChange] = {}
    launcher: Str | None = None
    fact_errors: dict[str, Text] | None = None

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """A fact the workload could not collect ({"error": ...} in its place) moves to fact_errors."""
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        errors = dict(data.get("fact_errors") or {}) if isinstance(data.get("fact_errors"), Mapping) else {}
        for key, value in data.items():
            if key == "fact_errors":
                continue
            if key not in _NOT_FACTS and isinstance(value, Mapping) and set(value) == {_FACT_ERROR} \
                    and isinstance(value[_FACT_ERROR], str):
                errors[key] = value[_FACT_ERROR]
                continue
            out[key] = value
        if errors:
            out["fact_errors"] = errors
        return out

    # readers --------------------------------------------------------------
    @property
    def nccl_loaded(self) -> str | None:
        """The NCCL version the rank really loaded (ncclGetVersion on the mapped library)."""
        return self.nccl_loaded_lib.version if self.nccl_loaded_lib else None

    @property
    def nccl_path(self) -> str | None:
        """The file of the libnccl the rank really used."""
        return self.nccl_loaded_lib.path if self.nccl_loaded_lib else None

    def nccl_how(self, asked: str | None) -> str | None:
        """How the NCCL the rank used got there, from what it mapped: torch's own wheel (bundled), a
        pinned pip wheel (pip), a system libnccl the cell asked for (system), or one a host forced in
        over torch's own with LD_PRELOAD; None before the fingerprint."""
        path = self.nccl_path
        if not path:
            return None
        if "/nvidia/nccl/" in path:  # a pip wheel (nvidia-nccl-cuXX), torch's RPATH dependency
            return "pip" if asked == "pip" else "bundled"
        mapped = (self.nccl_loaded_lib.all if self.nccl_loaded_lib else None) or ()
        over_torch = any("/nvidia/nccl/" in (e.path or "") for e in mapped)
        if asked == "system":
            return "system"
        return "system, LD_PRELOAD by the host" if over_torch else "system"

    @property
    def driver(self) -> str | None:
        return self.driver_info.version if self.driver_info else None

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus if g.name)

    @property
    def gpu_count(self) -> int | None:
        """GPUs the rank saw: torch's device count, or the GPUs listed when more; None when neither."""
        counts = [c for c in (self.device_count, len(self.gpus)) if c]
        return max(counts) if counts else None

    @property
    def shm_bytes(self) -> int | None:
        return self.shm.bytes if self.shm else None

    @property
    def shm_writable(self) -> bool | None:
        return self.shm.writable if self.shm else None

    @property
    def compat_loaded(self) -> bool | None:
        """A CUDA forward-compatibility libcuda is mapped; None where none was looked for (CPU, older records)."""
        return self.libcuda.compat if self.libcuda else None

    @property
    def compute_modes(self) -> tuple[str, ...]:
        return self.nvml.compute_modes if self.nvml else ()

    @property
    def nvml_mismatch(self) -> bool | None:
        return self.nvml.version_mismatch if self.nvml else None

    @property
    def min_capability(self) -> str | None:
        """The lowest compute capability among the GPUs the rank saw ("7.5"); None when none was read."""
        caps = [tuple(int(x) for x in g.capability.split(".")) for g in self.gpus
                if g.capability and re.fullmatch(r"\d{1,3}\.\d{1,3}", g.capability)]
        low = min(caps) if caps else None
        return f"{low[0]}.{low[1]}" if low else None

    @property
    def memlock_soft(self) -> float | None:
        """The soft memlock limit in bytes; math.inf for "unlimited"."""
        soft = self.memlock.soft if self.memlock else None
        return math.inf if soft == "unlimited" else soft if isinstance(soft, int) else None

    @property
    def env_changed(self) -> dict[str, EnvChange]:
        """Variables the launcher changed: name -> (what the harness asked for, what the rank saw)."""
        return dict(self.nccl_env_changed)


# ---------------------------------------------------------------- the bandwidth sweep (workload/bandwidth.py)
class BandwidthRow(Written):
    """One size of the bandwidth sweep, nccl-tests style: time per op, algbw and busbw as the median over
    trials, busbw of every trial and its min and max, torch's eager per-call latency, how the time was
    taken, wrong elements. Rows of older records have no trials: their spread is unknown (None), never 0."""

    bytes: Bytes = 0  # 0: a row without its size (never written so)
    dtype: Str | None = None
    iters: Count | None = None
    time_s: Duration = 0.0  # median over trials of the time per op, seconds
    algbw_gbs: GBs = 0.0  # median over trials
    busbw_gbs: GBs = 0.0  # median over trials
    first_call_s: Duration = 0.0
    busbw_trials: tuple[GBs, ...] = ()  # busbw of every trial; empty in older records
    busbw_min: GBs | None = None
    busbw_max: GBs | None = None
    eager_us: Annotated[float, nums()] | None = None  # torch's eager per-call latency (what DDP pays per call), µs
    timing: Str | None = None  # "cuda-graph" or "eager": how time_s was measured
    wrong: Count | None = None  # elements that came back wrong at this size; None where not recorded
    collective: Str = "all_reduce"  # workload/bandwidth.COLLECTIVES; older records measured all-reduce only

    @model_validator(mode="after")
    def _median_within_trials(self) -> BandwidthRow:
        if self.busbw_min is not None and self.busbw_max is not None and not \
                self.busbw_min <= self.busbw_gbs <= self.busbw_max:
            raise invariant(f"busbw_gbs {self.busbw_gbs:g} lies outside its trials' "
                            f"{self.busbw_min:g}-{self.busbw_max:g}")
        return self

    @property
    def trials(self) -> int:
        """How many trials the median is over (0: an older record, which did not say)."""
        return len(self.busbw_trials)

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) busbw over the trials; None when unknown (an older record, or a single trial)."""
        if self.trials == 1:
            return None
        low = self.busbw_min if self.busbw_min is not None else min(self.busbw_trials, default=None)
        high = self.busbw_max if self.busbw_max is not None else max(self.busbw_trials, default=None)
        if low is None or high is None or high < low:
            return None
        return low, high

    @property
    def relative_spread(self) -> float | None:
        """(max - min) / median busbw; None when the spread or the median is unknown."""
        spread = self.spread
        if spread is None or not self.busbw_gbs:
            return None
        return (spread[1] - spread[0]) / self.busbw_gbs

    def apart_from(self, other: BandwidthRow) -> bool | None:
        """Whether the two rows' trial ranges do not overlap; None when either spread is unknown."""
        return ranges_apart(self.spread, other.spread)


class Sweep(Written):
    """One collective's sweep beside all-reduce's (workload/bandwidth.run_bandwidth)."""

    rows: tuple[BandwidthRow, ...] = ()
    bus_factor: Annotated[float, nums(4.0)] | None = None


def size_label(nbytes: int) -> str:
    """A size as the report writes it: 64 KiB, 1 GiB, 4097 B."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


def ranges_apart(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    """Whether two (min, max) ranges do not overlap; None when either is unknown."""
    if a is None or b is None:
        return None
    return a[1] < b[0] or b[1] < a[0]


class Envelope(Written):
    """What every event of a rank starts with (workload/events.EventWriter.emit)."""

    v: Json = None
    event: Str | None = None
    rank: RankNo | None = None
    world: Count | None = None
    wall: Wall | None = None
    mono: Annotated[float, nums(low=-math.inf)] | None = None
    pid: Count | None = None


class PhaseEnd(Envelope):
    """A phase_end event of rank 0 (workload/main.py): the envelope, the phase's time, and the payloads
    readers use; the rest of what the phase returned is kept as written."""

    phase: Str | None = None
    seconds: Duration | None = None
    fingerprint: Fingerprint | None = None  # the fingerprint phase
    env_set: dict[str, Json] | None = None  # init: the variables the workload set itself before init
    rows: tuple[BandwidthRow, ...] | None = None  # bandwidth (all-reduce), and the control's nccl-allreduce
    collectives: dict[str, Sweep] | None = None  # bandwidth: the other collectives' sweeps, by name
    p2p_ipc: P2pCheck | None = None  # check: GPU pairs read through CUDA IPC by a kernel (workload/p2pipc.py)
