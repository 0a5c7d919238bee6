"""Known-issue hints: every hint fires on a record that shows its signature and stays quiet on a near
miss; real and partial records give no hint and no exception; a malformed data file is refused with
the hint id and the key in the message; a site's own file (HARNESS_HINTS) is used instead of the
packaged one, and a bad one stops `report` before it writes anything (exit 2, file:line, key, fix)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import hints, hintsfile
from harness.errors import HarnessError
from harness.hints import Hint, HintsError, facts, load, match

from .conftest import REPO

DATA = Path(__file__).parent / "data"
GiB = 1 << 30
MiB = 1 << 20
RTX = "NVIDIA GeForce RTX 4090"


def make_record(
    *,
    status: str = "pass",
    phase: str | None = None,
    error_class: str | None = None,
    reason: str = "",
    launcher: str = "accelerate",
    gpus: tuple[str, ...] = ("NVIDIA H200",),
    driver: str | None = "580.159.04",
    torch: str = "2.11.0+cu130",
    accelerate: str = "1.15.0",
    nccl_loaded: str = "2.28.9",
    shm: int | None = 128 * GiB,
    shm_writable: bool | None = True,
    capability: str = "8.9",
    libcuda: dict | None = None,
    nvml: dict | None = None,
    memlock: Any = "unlimited",
    variant_env: dict | None = None,
    rank_env: dict | None = None,
    changed: dict | None = None,
    peer_access: list | None = None,
    error: str | None = None,
    launcher_tail: str = "",
    nccl_warnings: tuple[str, ...] = (),
    detail: dict | None = None,
) -> dict:
    """A cell record shaped like results/<run>/cells/<cell>/record.json, with only what hints read."""
    outcome = {"status": status, "reason": reason, "seconds": 1.0, "phase": phase,
               "error_class": error_class, "detail": detail or {}}
    fingerprint = {
        "torch": torch, "accelerate": accelerate, "nccl_compiled": "2.28.9",
        "nccl_loaded": {"version": nccl_loaded, "path": "/x/libnccl.so.2"},
        "driver": None if driver is None else {"version": driver, "source": "/proc/driver/nvidia/version"},
        "gpus": [{"index": i, "name": n, "capability": capability, "total_memory": 24 * GiB} for i, n in enumerate(gpus)],
        "device_count": len(gpus),
        "peer_access": peer_access or [],
        "shm": None if shm is None else {"bytes": shm, "free_bytes": shm, "mode": "1777"}
        | ({} if shm_writable is None else {"writable": shm_writable}),
        "memlock": {"soft": memlock, "hard": memlock},
        **({"libcuda": libcuda} if libcuda is not None else {}),
        **({"nvml": nvml} if nvml is not None else {}),
        "env": rank_env or {},
        "nccl_env_changed": changed or {},
        "launcher": launcher,
    }
    rank_error = None if error is None else {"phase": phase, "error_class": error_class,
                                             "type": "DistBackendError", "message": error}
    raw = {
        "ranks": {"0": {"phase": phase or "teardown", "error": rank_error, "result": None}},
        "phases": {"fingerprint": {"phase": "fingerprint", "fingerprint": fingerprint}},
        "nccl": {"0": {"version": nccl_loaded, "transports": {}, "p2p_disabled": [], "env": {},
                       "warnings": list(nccl_warnings), "errors": [], "init_complete": True}},
        "launcher_tail": launcher_tail,
        "forensics": {},
    }
    return {
        "schema": 1,
        "cell": {"cuda": "12.4.1", "torch": torch.split("+")[0], "accelerate": accelerate, "nccl": "bundled",
                 "nccl_via": "bundled", "variant": "default", "launcher": launcher, "id": "test-cell"},
        "env": variant_env or {},
        "outcome": outcome,
        "attempts": [{"attempt": 1, "outcome": outcome, "command": [], "raw": raw}],
    }


def ids(record: Any) -> list[str]:
    """The hints that match for certain (every condition true); possible ones are tested in
    tests/test_hints_real.py."""
    return [m.hint.id for m in match(record) if m.certain]


def rtx_hang(**kw: Any) -> dict:
    base = dict(status="hang", phase="prepare", gpus=(RTX, RTX), driver="545.29.06",
                reason="no progress for 120s in prepare")
    return make_record(**(base | kw))


RAY_SHM = ("2023-11-18 03:39:16,283 WARNING services.py:1996 -- WARNING: The object store is using /tmp instead of "
           "/dev/shm because /dev/shm has only 67108864 bytes available. This will harm performance!")
# NCCL 2.8-2.11's remote allocation service given a message that was not for it (bootstrap.cc)
REM_ALLOC = ("bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)",
             "include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'")


def shm_fail(**kw: Any) -> dict:
    base = dict(status="fail", phase="init", error_class="shm", shm=64 * MiB,
                error="NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)")
    return make_record(**(base | kw))


def numa_fail(**kw: Any) -> dict:
    base = dict(status="fail", phase="init", error_class="nccl", nccl_loaded="2.25.1",
                nccl_warnings=("misc/cudawrap.cc:197 NCCL WARN Cuda failure 'operation not permitted' cuMemCreate",),
                error="ncclUnhandledCudaError: Call to CUDA function failed.")
    return make_record(**(base | kw))


def accel_changed(**kw: Any) -> dict:
    base = dict(launcher="accelerate", gpus=(RTX, RTX),
                changed={"NCCL_P2P_DISABLE": {"expected": None, "actual": "1"},
                         "NCCL_IB_DISABLE": {"expected": None, "actual": "1"}})
    return make_record(**(base | kw))


def memlock_fail(**kw: Any) -> dict:
    base = dict(status="fail", phase="init", error_class="oom", memlock=64 * 1024,
                error="NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory")
    return make_record(**(base | kw))


PEERS_BROKEN = [{"src": 0, "dst": 1, "claimed": True, "verified": "timeout"}]
BARRIER_WARNING = ("[rank1]:[W ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 1]  using GPU 1 to perform barrier as "
                   "devices used by this process are currently unknown. This can potentially cause a hang.")


# the fingerprint's libcuda and NVML facts (workload/fingerprint.py: libcuda, nvml_facts)
COMPAT = {"path": "/usr/local/cuda-12.4/compat/libcuda.so.550.54.15", "compat": True}
HOST_LIBCUDA = {"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "compat": False}
NVML_MISMATCH = {"error_code": 18, "version_mismatch": True}
NVML_DEFAULT = {"compute_modes": ["default"], "version_mismatch": False}


def failed(error: str, **kw: Any) -> dict:
    """A failed cell whose rank recorded `error` (and the outcome reason says it)."""
    base = dict(status="fail", phase="init", error_class="nccl", error=error or None, reason=error)
    return make_record(**(base | kw))


def refused(launcher_tail: str, **kw: Any) -> dict:
    """A cell that failed at start-up with only the launcher's (or the container runtime's) output: no rank
    started, so no rank recorded an error."""
    return failed("", **(dict(phase="startup", error_class="launcher", launcher_tail=launcher_tail) | kw))


def warned(*warnings: str, **kw: Any) -> dict:
    """A failed cell whose NCCL log holds these warnings."""
    base = dict(status="fail", phase="init", error_class="nccl", nccl_warnings=warnings)
    return make_record(**(base | kw))

# torch's watchdog line, and the hang detail the classifier writes (outcome._hang, _caught_by_watchdog)
WATCHDOG = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=90000) ran for 90011 milliseconds before timing out.")
# torch 2.5+'s ProcessGroupNCCL warning at an exit without destroy_process_group (torch 2.4: "process group has NOT
# been destroyed before we destruct ProcessGroupNCCL")
NO_DESTROY_WARNING = ("[rank1]:[W205 18:00:35.271546125 ProcessGroupNCCL.cpp:1538] Warning: WARNING: "
                      "destroy_process_group() was not called before program exit, which can leak resources.")
BEHIND = {"ranks_behind": [1], "why_behind": {"1": "silent for 9s (stopped or frozen)"}}
ALL_WAITING: dict = {"ranks_behind": [], "why_behind": {}}


def stalled(detail: dict, phase: str = "step") -> dict:
    """The supervisor's own hang verdict: no watchdog text, only the stall and who was behind."""
    who = "rank 1 silent for 9s (stopped or frozen)" if detail.get("ranks_behind") else "all ranks waiting"
    return make_record(status="hang", phase=phase, reason=f"no progress for 9s in {phase} (threshold 8s); {who}",
                       detail=detail)


def coll_hang(*calls: tuple[int, int, int, int], status: str = "hang") -> dict:
    """A cell whose NCCL log (NCCL_DEBUG_SUBSYS=COLL) holds one AllReduce line per (pid, opCount, count,
    datatype), on communicators of 2 ranks."""
    lines = [f"node1:{pid}:{pid} [0] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f0000000000 recvbuff "
             f"0x7f0000000000 count {count} datatype {dtype} op 0 root 0 comm 0x5500000000 [nranks=2] stream 0x5600"
             for pid, op, count, dtype in calls]
    return make_record(status=status, phase="step", launcher_tail="\n".join(lines))


# (hint id, record that shows the signature, near misses that must not trigger it)
CASES = [
    ("rtx40-p2p-hang", rtx_hang(), {
        "pass": rtx_hang(status="pass", phase=None),
        "driver at the bound": rtx_hang(driver="550.40.07"),
        "driver above": rtx_hang(driver="560.35.03"),
        "one GPU": rtx_hang(gpus=(RTX,)),
        "p2p-off variant": rtx_hang(variant_env={"NCCL_P2P_DISABLE": "1"}),
        "hang in bandwidth": rtx_hang(phase="bandwidth"),
        "no driver known": rtx_hang(driver=None),
        "not RTX 40": rtx_hang(gpus=("NVIDIA GeForce RTX 3090",) * 2),
    }),
    ("shm-too-small", shm_fail(), {
        "large shm": shm_fail(shm=GiB),
        "other failure": shm_fail(error_class="cuda", error="CUDA error: an illegal memory access"),
        "shm unknown": shm_fail(shm=None),
        "permission denied": shm_fail(error="NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x "
                                            "(size 9637888), error: Permission denied (13)"),
        # Ray's start-up warning measures /dev/shm, but a passing run prints it too: beside a CUDA failure it is
        # not the cause, and with a large /dev/shm it is not printed for want of size
        "Ray's warning beside a CUDA failure": shm_fail(error_class="cuda", error="CUDA error: an illegal memory access",
                                                         launcher_tail=RAY_SHM),
        "Ray's warning, large shm": shm_fail(shm=GiB, error_class="nccl", error="ncclSystemError",
                                             launcher_tail=RAY_SHM),
        # UCX's shared-memory FIFO failing where /dev/shm was measured large: its size is not the cause
        "UCX's FIFO, large shm": failed("", launcher_tail="mm_iface failed to allocate receive FIFO\n[ucp_address_unpack] "
                                                          "Caught signal 11 (Segmentation fault)", shm=16 * GiB),
        # NCCL 2.18.3-2.22 say the errno only in the INFO trace before the segment's WARN
        "NCCL 2.19's permission denied": shm_fail(error="NCCL INFO misc/shmutils.cc:68 -> 2 (Permission denied)\n"
                                                        "NCCL WARN Error while creating shared memory segment "
                                                        "/dev/shm/nccl-x (size 9637888)"),
    }),
    ("shm-permission-denied", warned("include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
                                     error_class="shm", shm_writable=False), {
        # the fact decides: the rank could write to /dev/shm, so the words are about something else
        "shm measured writable": warned("include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
                                        error_class="shm", shm_writable=True),
        "out of space": warned("include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
                               error_class="shm"),
        "newer NCCL, out of space": warned("misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment "
                                           "/dev/shm/nccl-x (size 9637888), error: No space left on device (28)"),
    }),
    ("nccl-vgpu-unsupported", warned("init.cc:426 NCCL WARN Cuda failure 'operation not supported'", nccl_loaded="2.27.5"), {
        "NCCL 2.21": warned("init.cc:426 NCCL WARN Cuda failure 'operation not supported'", nccl_loaded="2.21.5"),
    }),
    ("nccl-cumem-host-numa", numa_fail(), {
        "NCCL 2.26.5": numa_fail(nccl_loaded="2.26.5"),
        "NCCL 2.23.4": numa_fail(nccl_loaded="2.23.4"),
        "no NUMA text": numa_fail(nccl_warnings=("NCCL WARN NET/Socket : no interface found",)),
    }),
    ("torch-device-id-hang", make_record(status="hang", phase="init", torch="2.7.0+cu126"), {
        "torch 2.7.1": make_record(status="hang", phase="init", torch="2.7.1+cu126"),
        "torch 2.5.1": make_record(status="hang", phase="init", torch="2.5.1"),
        "hang in prepare": make_record(status="hang", phase="prepare", torch="2.6.0"),
        "pass": make_record(status="pass", torch="2.6.0"),
    }),
    ("accelerate-launcher-changed-env", accel_changed(), {
        "torchrun": accel_changed(launcher="torchrun"),
        "nothing changed": accel_changed(changed={}),
        "other variable": accel_changed(changed={"NCCL_DEBUG": {"expected": None, "actual": "INFO"}}),
    }),
    ("two-ranks-one-gpu", make_record(status="fail", phase="init", error_class="nccl",
                                      error="ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"), {
        "pass": make_record(status="pass"),
        "other NCCL error": make_record(status="fail", phase="init", error_class="nccl",
                                        error="ncclSystemError: socket connect failed"),
    }),
    ("rank-gpu-index-out-of-range", failed("RuntimeError: CUDA error: invalid device ordinal", error_class="cuda"), {
        "passed": make_record(status="pass", launcher_tail="RuntimeError: CUDA error: invalid device ordinal"),
        "the container hook": failed("", phase="startup", launcher_tail="nvidia-container-cli: initialization "
                                     "error: cuda error: invalid device ordinal"),
        "two ranks on one GPU": failed("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000"),
    }),
    ("memlock-too-low", memlock_fail(), {
        "unlimited": memlock_fail(memlock="unlimited"),
        "64 MiB": memlock_fail(memlock=64 * MiB),
        "unrelated failure": memlock_fail(error="RuntimeError: init all-reduce gave 1.0, expected 2"),
    }),
    ("p2p-claimed-not-verified", make_record(gpus=(RTX, RTX), peer_access=PEERS_BROKEN), {
        "verified": make_record(gpus=(RTX, RTX), peer_access=[{"src": 0, "dst": 1, "claimed": True, "verified": True}]),
        "not claimed": make_record(gpus=(RTX, RTX), peer_access=[{"src": 0, "dst": 1, "claimed": False, "verified": None}]),
        "not checked": make_record(gpus=(RTX, RTX), peer_access=[{"src": 1, "dst": 0, "claimed": True, "verified": None}]),
    }),
    ("peer-access-unsupported", warned("transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer "
                                       "access is not supported between these two devices"), {
        "cuMem host sharing": warned("transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported "
                                     "between these two devices'"),
        "another IPC error": warned("transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 11 invalid "
                                    "argument"),
    }),
    ("shm-sigbus", failed("Caught signal 7 (Bus error: nonexistent physical address)", shm=64 * MiB), {
        "large shm": failed("Caught signal 7 (Bus error: nonexistent physical address)", shm=16 * GiB),
        "another signal": failed("Caught signal 11 (Segmentation fault: address not mapped)", shm=64 * MiB),
        # DeepSpeed's launcher line as reporters quote it, for a SIGKILL (host-oom-killed's)
        "the launcher's -9": failed("", launcher_tail="[Error][launch.py:324:sigkill_handler]exits with return -9",
                                    shm=64 * MiB),
    }),
    ("watchdog-timeout", failed(WATCHDOG, status="hang", phase="prepare", detail=BEHIND), {
        "watchdog ended by an error": failed("Process group watchdog thread terminated with exception: CUDA error: "
                                             "an illegal memory access was encountered"),
        "every rank waited inside the collective": failed(WATCHDOG, status="hang", phase="prepare", detail=ALL_WAITING),
        "the supervisor's hang, no rank behind": stalled(ALL_WAITING),
        # torch 2.4+'s flight recorder dump, written for an error as well as a timeout
        "a dump signal, no timeout said": failed("[PG ID 0 PG GUID 0(default_pg) Rank 1] Observed flight recorder dump "
                                                 "signal from another rank via TCPStore.", phase="step",
                                                 detail=BEHIND),
    }),
    ("store-barrier-timeout", failed("RuntimeError: Timed out initializing process group in store based barrier on rank: "
                                     "0, for key: store_based_barrier_key:1 (world_size=2, worker_count=1, "
                                     "timeout=0:30:00)", error_class="timeout"), {
        "the collective's watchdog": failed(WATCHDOG, status="hang", phase="prepare", detail=BEHIND),
    }),
    ("transport-hang", stalled(ALL_WAITING), {
        "rank 1 behind": stalled(BEHIND),
        "torch's watchdog, rank 1 behind": failed(WATCHDOG, status="hang", phase="prepare", detail=BEHIND),
        "a failure": failed("ncclSystemError: socket connect failed", detail=ALL_WAITING),
        "who was behind not known": stalled({}),
        "hung before any collective": stalled(ALL_WAITING, phase="fingerprint"),
    }),
    ("remote-peer-lost", failed("DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited or there "
                                "was a network error, NCCL version 2.21.5"), {
        "own internal error": failed("ncclInternalError: Internal check failed."),
        # gloo's connect refused: nobody listening yet, a rendezvous problem, not a peer lost
        "gloo's refused connect": failed("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
                                         "[10.0.0.2]:34567: Connection refused"),
    }),
    ("host-oom-killed", failed("", launcher_tail="[launch.py:315:sigkill_handler] Killing subprocess 5012\n"
                                 "subprocess.CalledProcessError: Command '['python', 'train.py']' died with "
                                 "<Signals.SIGKILL: 9>.", error_class=None), {
        "the harness stopped a hang": failed("", status="hang", launcher_tail="died with <Signals.SIGKILL: 9>."),
        "a SIGTERM": failed("", launcher_tail="died with <Signals.SIGTERM: 15>.", error_class=None),
        "Open MPI's rank segfaulted": failed("", error_class=None, launcher_tail=(
            "mpirun noticed that process rank 3 with PID 0 on node n1 exited on signal 11 (Segmentation fault).")),
        "docker's 128+11": failed("", launcher_tail="trainer-1 exited with code 139", error_class=None),
        "spawn's SIGSEGV": failed("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with "
                                  "signal SIGSEGV", error_class=None),
        "srun's task failed": failed("", launcher_tail="srun: error: gpu-n12: task 3: Exited with exit code 1",
                                     error_class=None),
        # Ray's summary where its memory monitor killed none (only crashes of other causes)
        "Ray's summary with no OOM kill": failed("", error_class=None, launcher_tail=(
            "(raylet) node_manager.cc:3040: 0 Workers (tasks / actors) killed due to memory pressure (OOM), 2 Workers "
            "crashed due to other reasons at node (ID: 2c82, IP: 172.31.183.172) over the last time period.")),
    }),
    ("ddp-unused-parameters", failed("RuntimeError: Expected to have finished reduction in the prior iteration before "
                                     "starting a new one.", phase="step", error_class="other"), {
        "another reducer error": failed("RuntimeError: Expected to mark a variable ready only once.", phase="step"),
        "marked ready twice": failed("Parameter at index 3 with name lin.weight has been marked as ready twice. This "
                                     "means that multiple autograd engine  hooks have fired for this particular "
                                     "parameter during this iteration.", phase="step"),
    }),
    ("cuda-in-forked-process", failed("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA "
                                      "with multiprocessing, you must use the 'spawn' start method",
                                      error_class="cuda"), {
        "spawned": failed("RuntimeError: CUDA error: initialization error", error_class="cuda"),
    }),
    ("process-group-not-initialized", failed("ValueError: Default process group has not been initialized, please "
                                             "make sure to call init_process_group.", error_class="launcher"), {
        "initialised twice": failed("RuntimeError: trying to initialize the default process group twice!"),
    }),
    ("local-rank-argument", failed("main.py: error: unrecognized arguments: --local-rank=0", error_class="launcher"), {
        "another argument": failed("main.py: error: unrecognized arguments: --batch-size=8", error_class="launcher"),
        # DeepSpeed's --local_rank before a single config file: the parser refused the file (its own hint)
        "a config file left over too": failed("ValueError: Some specified arguments are not used by the HfArgumentParser: "
                                              "['--local_rank=0', 'examples/train_lora/llama3_lora_sft.yaml']",
                                              error_class="other"),
        "another click option": failed("Error: No such option: --local-batch-size", error_class="other"),
    }),
    ("world-size-mismatch", warned("bootstrap.cc:190 NCCL WARN Bootstrap Root : mismatch in rank count from procs 6 : 3"), {
        "a bootstrap that could not connect": warned("bootstrap.cc:68 NCCL WARN Bootstrap Root : Connection refused"),
        # NCCL 2.23+: the same rank count, but the ranks disagree on the number of bootstrap roots
        "same nranks, other roots": warned("bootstrap.cc:310 NCCL WARN Bootstrap Root : mismatch in info from procs, "
                                           "nranks 16 vs 16, nroots 1 vs 2, iroot 0 vs 1"),
    }),
    ("cpu-tensor-in-nccl-collective", failed("RuntimeError: Tensors must be CUDA and dense", error_class="nccl"), {
        "a sparse GPU tensor elsewhere": failed("RuntimeError: sparse tensors are not supported here", error_class="other"),
    }),
    ("ddp-model-mismatch", failed("RuntimeError: DDP expects same model across all ranks, but Rank 6 has 59 params, while "
                                  "rank 0 has inconsistent 48 params.", error_class="other"), {
        "unused parameters": failed("RuntimeError: Expected to have finished reduction in the prior iteration before "
                                    "starting a new one.", error_class="other"),
        "a checkpoint of another shape": failed("RuntimeError: Error(s) in loading state_dict for Net:\n\tsize mismatch "
                                                "for fc.weight: copying a param with shape torch.Size([10, 512]) from "
                                                "checkpoint, the shape in current model is torch.Size([20, 512]).",
                                                error_class="other"),
    }),
    ("ddp-reentrant-checkpointing", failed("RuntimeError: Expected to mark a variable ready only once.", error_class="other"), {
        "unused parameters": failed("RuntimeError: Expected to have finished reduction in the prior iteration before "
                                    "starting a new one.", error_class="other"),
    }),
    ("launcher-got-sighup", failed("torch.distributed.elastic.multiprocessing.api.SignalException: Process 81061 got "
                                   "signal: 1", error_class="other"), {
        "SIGTERM": failed("torch.distributed.elastic.multiprocessing.api.SignalException: Process 81061 got signal: 15",
                          error_class="other"),
    }),
    ("slurm-tasks-not-started", make_record(status="hang", phase="init", reason="no progress",
                                            launcher_tail="Multi-processing is handled by Slurm.\ninitializing ddp: "
                                                          "GLOBAL_RANK: 0, MEMBER: 1/8"), {
        "every member there": make_record(status="hang", phase="init", reason="no progress",
                                          launcher_tail="Multi-processing is handled by Slurm.\ninitializing ddp: "
                                                        "GLOBAL_RANK: 7, MEMBER: 8/8"),
        "Lightning 2.x, each rank once": make_record(status="hang", phase="init", reason="no progress",
                                                     launcher_tail="Initializing distributed: GLOBAL_RANK: 0, MEMBER: "
                                                                   "1/2\nInitializing distributed: GLOBAL_RANK: 1, "
                                                                   "MEMBER: 2/2"),
    }),
    ("rank-env-unset", failed("ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
                              "variable MASTER_PORT expected, but not set", error_class="launcher"), {
        "set but unreachable": failed("torch.distributed.DistNetworkError: The client socket has timed out after "
                                      "600000ms while trying to connect to (10.0.0.1, 29500).", error_class="launcher"),
    }),
    ("open-files-limit", warned("misc/socket.cc:638 NCCL WARN ncclOsSocketTryAccept: Accept failed: Too many open "
                                "files"), {
        "another accept failure": warned("misc/socket.cc:638 NCCL WARN ncclOsSocketTryAccept: Accept failed: "
                                         "Connection reset by peer", status="pass"),
    }),
    ("collective-mismatch", failed("RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running "
                                   "collective: CollectiveFingerPrint(OpType=ALLREDUCE, TensorShape=[20])",
                                   phase="step"), {
        "a mismatch of versions": failed("RuntimeError: NCCL version mismatch between ranks", phase="step"),
        # NCCL_DEBUG_SUBSYS=COLL lines that do not show two ranks posting one call differently
        "one process on two communicators": coll_hang((100, 0, 5, 7), (100, 0, 9, 4)),
        "two ranks, the same call": coll_hang((100, 0, 5, 7), (101, 0, 5, 7)),
        "two ranks at different calls": coll_hang((100, 0, 5, 7), (101, 1, 9, 4)),
        "no hang": coll_hang((100, 0, 5, 7), (101, 0, 9, 7), status="fail"),
    }),
    ("nccl-gpu-memory", warned("include/alloc.h:125 NCCL WARN Cuda failure 2 'out of memory'", error_class="oom"), {
        "the model's own OOM": failed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
                                      error_class="oom", phase="step"),
        # NCCL 2.8-2.11's remote allocator cudaMallocs a size a stray message sent: not the GPU's memory
        "the remote allocator's random size": warned(*REM_ALLOC, error_class="oom", nccl_loaded="2.10.3"),
    }),
    ("nccl-socket-ifname", warned("misc/socket.cc:556 NCCL WARN socketStartConnect: Connect to 172.17.0.1<43215> "
                                  "failed : No route to host"), {
        "passed": warned("misc/socket.cc:556 NCCL WARN socketStartConnect: Connect to 172.17.0.1<43215> failed : "
                         "No route to host", status="pass", phase=None),
        "peer reset": warned("misc/socket.cc:46 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.2<5000> "
                             "failed : Connection reset by peer"),
        # NCCL 2.26+ retrying a refused connect that then succeeded: only the INFO, not the WARN
        "a retry that went on": warned("NCCL INFO socketStartConnect: connect to 10.0.0.2<43215> returned Connection "
                                       "refused, retrying (1/34) after sleep for 100 msec"),
    }),
    ("nccl-no-socket-interface", warned("bootstrap.cc:112 NCCL WARN Bootstrap : no socket interface found"), {
        "an interface was found": warned("NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"),
    }),
    ("ib-hca-unusable", warned("misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device"), {
        "another qp error": warned("misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Connection "
                                   "timed out"),
    }),
    ("ib-qp-connect-timeout", warned("[5] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_modify_qp failed with 110 "
                                     "Connection timed out, on dev mlx5_3:1, curr state INIT, next state RTR"), {
        "the port is gone": warned("misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device"),
        "a socket timeout": warned("misc/socket.cc:556 NCCL WARN socketStartConnect: Connect to 10.0.0.2<41234> failed "
                                   ": Connection timed out", status="pass"),
    }),
    ("kube-sidecar-injected", failed("", phase="startup", launcher_tail=(
        "NAME                        READY   STATUS             RESTARTS   AGE\n"
        "train-job-master-0          2/2     Running            0          3m\n"
        "train-job-worker-0          1/2     CrashLoopBackOff   4          3m")), {
        "one container per pod": failed("", phase="startup", launcher_tail=(
            "NAME                        READY   STATUS             RESTARTS   AGE\n"
            "train-job-worker-0          0/1     CrashLoopBackOff   4          3m")),
    }),
    # the pre-2.12 wording of NCCL's socket check, here with a second NCCL version's family value
    ("nccl-socket-bad-address", warned("include/socket.h:402 NCCL WARN Net : connecting to address 10.0.0.2<41234> "
                                       "with family 0 is neither AF_INET(2) nor AF_INET6(10)"), {
        "a normal connect failure": warned("misc/socket.cc:556 NCCL WARN socketStartConnect: Connect to "
                                           "10.0.0.2<41234> failed : Connection refused"),
    }),
    ("gloo-socket-ifname", failed("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
                                  "[127.0.1.1]:12345: Connection refused", error_class="other"), {
        "gloo's own timeout": failed("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                                     "Timed out waiting 1800000ms for recv operation to complete",
                                     error_class="timeout"),
        # a connected pair whose peer went away mid-run (pair.cc's read path), not its address
        "a peer gone mid-run": failed("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
                                      "closed by peer [10.0.0.2]:43275", error_class="other"),
        "a write to a peer that reset": failed("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
                                               "write: Connection reset by peer", error_class="other"),
    }),
    ("efa-devices-not-in-container", warned("nccl_net_ofi_rdma_init:8012 NCCL WARN NET/OFI OFI fi_getinfo() call "
                                            "failed: No data available"), {
        "EFA selected": warned("NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)"),
    }),
    ("rdma-device-unopenable", failed("libfabric:7:efa:ep_data:efa_device_construct_gid():47<warn> ibv_open_device failed! "
                                      "errno: 2"), {
        "no EFA device at all": failed("libfabric:7:core:core:fi_getinfo_():1391<warn> fi_getinfo: provider efa output "
                                       "empty list"),
    }),
    ("efa-forked-process", failed("Unable to write to EQ: Missing or unavailable event queue. err: Input/output error (5) "
                                  "prov_errno: Unknown error -114 (-114) prov/rxr/src/rxr.h:1042"), {
        "another libfabric error": failed("libfabric:7:efa:cq:rxr_cq_handle_error():180<warn> err: 113, message: No "
                                          "route to host (113)"),
    }),
    ("efa-security-group", warned("nccl_net_ofi_rdma.c:4020 NCCL WARN NET/OFI Unable to insert remote address into "
                                  "address vector for device 0. RC: -22"), {
        "endpoint error": warned("NCCL WARN NET/OFI Creating new endpoint for domain 0x7f failed: Invalid argument"),
    }),
    ("efa-libfabric-too-old", warned("register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to register memory (type "
                                     "= 2) for device 3. RC: -22, Error: Invalid argument", nccl_loaded="2.21.5"), {
        "NCCL 2.18": warned("register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to register memory (type = 2) for "
                            "device 3. RC: -22, Error: Invalid argument", nccl_loaded="2.18.6"),
    }),
    ("nccl-topology-file", warned("graph/xml.h:101 NCCL WARN Attribute vendor of node cpu not found"), {
        "passed with a topology file": warned("NCCL INFO NCCL_TOPO_FILE set by environment to /opt/topo.xml",
                                              status="pass", phase=None),
        "graph file but passed": warned("NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/graph.xml",
                                        status="pass", phase=None),
    }),
    ("ib-mtu-mismatch", warned("transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access "
                               "violation work queue error", nccl_loaded="2.20.3"), {
        "NCCL before 2.20": warned("transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access "
                                   "violation work queue error", nccl_loaded="2.19.3"),
    }),
    ("ib-retry-exceeded", failed("[1700000000.123] [node1:1234:0] ib_mlx5_log.c:171 Transport retry count exceeded "
                                 "on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)"), {
        "another completion error": failed("send completion with error: local protection error"),
    }),
    ("roce-gid-index", warned("transport/net_ib.cc:320 NCCL WARN NET/IB: read failed in ncclIbRoceGetVersionNum: "
                              "Invalid argument"), {
        "flush error": warned("transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 5, opcode 1, "
                              "len 0, vendor err 249"),
    }),
    ("gdr-disabled-peermem", make_record(status="slow", launcher_tail="NCCL INFO NET/IB : GPU Direct RDMA Disabled "
                                                                      "for HCA 0 'mlx5_0'"), {
        "enabled": make_record(status="slow", launcher_tail="NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 "
                                                            "'mlx5_0'"),
    }),
    ("gdr-broken", make_record(status="wrong", launcher_tail="node:1:1 [4] INFO 3 -> 12 via NET/IB/0/GDRDMA"), {
        "right results": make_record(status="pass", launcher_tail="node:1:1 [4] INFO 3 -> 12 via NET/IB/0/GDRDMA"),
    }),
    ("driver-too-old", failed("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime "
                              "version", phase="startup"), {
        "out of memory": failed("RuntimeError: CUDA error: out of memory", phase="startup"),
    }),
    # NCCL built for CUDA 12 on a driver that runs CUDA 11 at most (470)
    ("nccl-built-for-newer-cuda", warned("NCCL INFO NCCL version 2.21.5+cuda12.4",
                                         "init.cc:1582 NCCL WARN Cuda failure 'CUDA driver version is insufficient "
                                         "for CUDA runtime version'", error_class="driver", driver="470.82.01"), {
        "a driver that runs that CUDA": warned("NCCL INFO NCCL version 2.21.5+cuda12.4",
                                               "init.cc:1582 NCCL WARN Cuda failure 'CUDA driver version is "
                                               "insufficient for CUDA runtime version'", error_class="driver"),
        "the application's own CUDA": failed("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA "
                                             "runtime version", phase="startup"),
    }),
    ("cuda-compat-unsupported-gpu", failed("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 804: "
                                           "forward compatibility was attempted on non supported HW", phase="startup",
                                           libcuda=COMPAT), {
        "the host driver's own libcuda": failed("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 804: "
                                                "forward compatibility was attempted on non supported HW",
                                                phase="startup", libcuda=HOST_LIBCUDA),
        "fabric manager": failed("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet "
                                 "initialized", phase="startup"),
    }),
    ("driver-module-not-loaded", failed("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                        "Make sure that the latest NVIDIA driver is installed and running.",
                                        error_class="driver"), {
        "the module there, its library another version": failed("Failed to initialize NVML: Driver/library version "
                                                                "mismatch", error_class="driver"),
    }),
    ("nvidia-probe-conflict", failed("", phase="startup", launcher_tail="NVRM: The NVIDIA probe routine was not called "
                                     "for 3 device(s).\nNVRM: This can occur when a driver such as: \nNVRM: nouveau, "
                                     "rivafb, nvidiafb or rivatv \nNVRM: was loaded", error_class="driver"), {
        "no module at all": failed("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                                   error_class="driver"),
    }),
    ("gpu-device-permission-denied", failed("Failed to initialize NVML: Insufficient Permissions", error_class="driver"), {
        "devices lost from the cgroup": failed("Failed to initialize NVML: Unknown Error", error_class="driver"),
    }),
    ("nvml-driver-mismatch", failed("", phase="startup", launcher_tail="Failed to initialize NVML: Driver/library "
                                                                      "version mismatch", nvml=NVML_MISMATCH), {
        "NVML answered in the rank": failed("", phase="startup", launcher_tail="Failed to initialize NVML: "
                                            "Driver/library version mismatch", nvml=NVML_DEFAULT),
        "another NVML error": failed("", phase="startup", launcher_tail="Failed to initialize NVML: Unknown Error"),
        "pynvml's other errors": failed("", phase="startup", launcher_tail="pynvml.NVMLError_LibraryNotFound: NVML "
                                        "Shared Library Not Found"),
    }),
    ("cuda-stub-library", failed("CUDA API Error at line 28: CUDA driver is a stub library", error_class="driver"), {
        "the driver's own library missing": failed("libcuda.so.1: cannot open shared object file: No such file or "
                                                   "directory", error_class="import"),
    }),
    ("display-watchdog", failed("RuntimeError: CUDA error: the launch timed out and was terminated", error_class="cuda"), {
        "a collective that timed out": failed(WATCHDOG, status="hang", error_class="timeout"),
    }),
    ("wsl-driver-library", failed("Windows 11 WSL2 CUDA 12.2 - Call to cuInit results in CUDA_ERROR_NO_DEVICE",
                                  error_class="driver"), {
        "no device outside WSL": failed("cuInit results in CUDA_ERROR_NO_DEVICE", error_class="driver"),
    }),
    ("nvidia-uvm-unavailable", failed("nvidia-docker | Error: Could not load UVM kernel module. Is nvidia-modprobe "
                                      "installed?", error_class="driver"), {
        "another module": failed("modprobe: FATAL: Module nvidia_peermem not found", error_class="driver"),
    }),
    ("no-gpu-in-container", failed("RuntimeError: Found no NVIDIA driver on your system. Please check that you "
                                   "have an NVIDIA GPU and installed a driver", phase="startup"), {
        "the host hook": failed("", phase="startup", launcher_tail="nvidia-container-cli: initialization error: cuda "
                                "error: no cuda-capable device is detected"),
        "a lost GPU": failed("CUDA Error: no CUDA-capable device is detected\nUnable to determine the device handle "
                             "for GPU 0000:03:00.0: GPU is lost.", phase="startup"),
    }),
    ("container-lost-gpu-devices", failed("", phase="fingerprint", launcher_tail="$ nvidia-smi\nFailed to "
                                          "initialize NVML: Unknown Error", error_class="driver"), {
        "a version mismatch": failed("", phase="fingerprint", launcher_tail="Failed to initialize NVML: "
                                     "Driver/library version mismatch", error_class="driver"),
    }),
    ("peer-mapping-exhausted", warned("transport/p2p.cc:300 NCCL WARN Cuda failure 'peer mapping resources "
                                      "exhausted'", error_class="cuda"), {
        "peer access unsupported": warned("transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer "
                                          "access is not supported between these two devices"),
    }),
    ("container-gpu-runtime-missing", failed("", phase="startup", launcher_tail="docker: Error response from daemon: "
                                             "could not select device driver \"\" with capabilities: [[gpu]]."), {
        "NVML mismatch in the hook": failed("", phase="startup", launcher_tail="nvidia-container-cli: initialization "
                                            "error: nvml error: driver/library version mismatch: unknown."),
        # Docker 25 to 28.1 asked for a CDI device with the cdi feature off: engine-without-cdi
        "the cdi driver off": failed("", phase="startup", launcher_tail="docker: Error response from daemon: could not "
                                     "select device driver \"cdi\" with capabilities: []."),
        "another runtime class": failed("", phase="startup", launcher_tail="Failed to create pod sandbox: rpc error: "
                                        "code = Unknown desc = failed to get sandbox runtime: no runtime for \"kata\" "
                                        "is configured"),
    }),
    ("cdi-device-unresolvable", failed("", phase="startup", launcher_tail="Error: setting up CDI devices: unresolvable "
                                       "CDI devices nvidia.com/gpu=all", error_class="launcher"), {
        "no NVIDIA device driver in docker": failed("", phase="startup", launcher_tail="docker: Error response from "
                                                    "daemon: could not select device driver \"\" with capabilities: [[gpu]]."),
    }),
    ("container-driver-files-in-image", failed("", phase="startup", launcher_tail="nvidia-container-cli: mount error: file "
                                               "creation failed: /var/lib/docker/overlay2/4f79/merged/usr/lib/x86_64-"
                                               "linux-gnu/libnvidia-ml.so.1: file exists: unknown.", error_class="launcher"), {
        "another mount error": failed("", phase="startup", launcher_tail="nvidia-container-cli: mount error: stat "
                                      "failed: /GeForce: no such file or directory", error_class="launcher"),
    }),
    ("container-cli-mount-error", failed("", phase="startup", launcher_tail="nvidia-container-cli: mount error: stat "
                                         "failed: /GeForce: no such file or directory", error_class="launcher"), {
        "the image's own copy": failed("", phase="startup", launcher_tail="nvidia-container-cli: mount error: file "
                                       "creation failed: /merged/usr/bin/nvidia-smi: file exists", error_class="launcher"),
        "a rootless engine's device cgroup": refused(
            "nvidia-container-cli: mount error: open failed: /sys/fs/cgroup/devices/user.slice/devices.allow: "
            "permission denied"),
        "an unprivileged LXC's cgroup v2": refused(
            "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device "
            "filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not permitted"),
    }),
    ("container-cli-driver-init", failed("nvidia-container-cli: initialization error: driver rpc error: failed to process "
                                         "request: unknown.", error_class="launcher"), {
        "the driver's library missing": failed("nvidia-container-cli: initialization error: load library failed: "
                                               "libnvidia-ml.so.1: cannot open shared object file", error_class="launcher"),
        "the library another version": failed("nvidia-container-cli: initialization error: nvml error: "
                                              "Driver/library version mismatch", error_class="launcher"),
        "under WSL without an adapter": failed("nvidia-container-cli: initialization error: WSL environment detected "
                                               "but no adapters were found: unknown", error_class="launcher"),
    }),
    ("nccl-library-corrupt", failed("bus error when Loading nccl from library /root/.config/vllm/nccl/cu12/libnccl.so.2.18.1",
                                    error_class="import"), {
        "a bus error from /dev/shm": failed("ERROR: Unexpected bus error encountered in worker. This might be caused by "
                                            "insufficient shared memory (shm).", error_class="shm"),
    }),
    ("nccl-two-libraries", failed("ImportError: /venv/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
                                  phase="startup"), {
        "one NCCL wheel": failed("", phase="startup", launcher_tail="[pip3] nvidia-nccl-cu12==2.21.5\n"
                                                                   "[pip3] nvidia-cudnn-cu12==9.1.0.70"),
    }),
    ("nvls-multicast-failed", warned("transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be "
                                     "performed in the present state'"), {
        "NVLS just not available": warned("NCCL INFO NVLS multicast support is not available on dev 0"),
    }),
    ("fabric-manager-not-running", failed("RuntimeError: CUDA error: system not yet initialized", phase="startup"), {
        "no GPU": failed("RuntimeError: CUDA error: no CUDA-capable device is detected", phase="startup"),
    }),
    ("illegal-memory-access", failed("CUDA error: an illegal memory access was encountered", error_class="cuda"), {
        "misaligned": failed("CUDA error: misaligned address", error_class="cuda"),
    }),
    ("cuda-toolkit-mismatch", failed("Exception: Installed CUDA version 11.0 does not match the version torch was compiled "
                                     "with 11.1", error_class="cuda"), {
        "the same versions": failed("Installed CUDA version 12.4 matches the version torch was compiled with 12.4",
                                    error_class="cuda", status="pass"),
    }),
    ("cuda-arch-not-in-build", failed("RuntimeError: CUDA error: no kernel image is available for execution on the "
                                      "device", error_class="cuda"), {
        "illegal address": failed("CUDA error: an illegal memory access was encountered", error_class="cuda"),
    }),
    ("gpu-lost-hardware-fault", failed("RuntimeError: CUDA error: uncorrectable ECC error encountered",
                                       error_class="cuda"), {
        "NVLS state": warned("transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error'"),
        "correctable": failed("RuntimeError: CUDA error: an illegal memory access was encountered", error_class="cuda"),
        "an application's Xid": failed("", launcher_tail="NVRM: Xid (PCI:0000:48:00): 13, pid=2338, Graphics "
                                       "Exception: ESR 0x404600=0x80000002", error_class="cuda"),
    }),
    ("gpu-exclusive-process", failed("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
                                     error_class="cuda", nvml={"compute_modes": ["exclusive_process"]}), {
        "every GPU in default mode": failed("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or "
                                            "unavailable", error_class="cuda", nvml=NVML_DEFAULT),
        "out of memory": failed("RuntimeError: CUDA error: out of memory", error_class="oom"),
    }),
    ("bf16-unsupported-gpu", failed("RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype "
                                    "to float16.", phase="prepare", error_class="cuda", capability="7.0"), {
        "an Ampere GPU": failed("RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype "
                                "to float16.", phase="prepare", error_class="cuda", capability="8.0"),
        "fp16 overflow": failed("RuntimeError: value cannot be converted to type at::Half without overflow",
                                phase="step", error_class="other"),
        # below what vLLM supports at all: float16 does not help (gpu-capability-below-minimum)
        "a P100 under vLLM": failed("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                                    "Tesla P100-PCIE-16GB GPU has compute capability 6.0.\nRuntimeError: GPUs with "
                                    "compute capability below 7.0 are not supported.", error_class="cuda",
                                    capability="6.0"),
    }),
    ("gpu-memory-held-elsewhere", failed("RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 47.54 GiB "
                                         "total capacity; 194.45 MiB already allocated; 4.88 MiB free; 686.00 MiB reserved "
                                         "in total by PyTorch)", error_class="oom", phase="step"), {
        "this process held the GPU": failed("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 28.77 GiB. "
                                            "GPU 2 has a total capacity of 39.39 GiB of which 7.31 GiB is free. Of the "
                                            "allocated memory 29.76 GiB is allocated by PyTorch, and 1.64 GiB is reserved "
                                            "by PyTorch but unallocated.", error_class="oom", phase="step"),
    }),
    ("ddp-prepare-oom", failed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB",
                               phase="prepare", error_class="oom"), {
        "in the step": failed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB",
                              phase="step", error_class="oom"),
    }),
    ("nccl-local-ports-exhausted", warned("misc/socket.cc:409 NCCL WARN Call to bind failed: Address already in use"), {
        "torch's store on a taken port": failed("torch.distributed.DistNetworkError: The server socket has failed to "
                                                "listen on any local network address. port: 29500, useIpv6: 0, code: -98, "
                                                "name: EADDRINUSE, message: address already in use",
                                                error_class="launcher"),
    }),
    ("rendezvous-port-in-use", failed("", phase="startup", launcher_tail="[c10d] The server socket has failed to listen "
                                      "on any local network address. port: 29500, useIpv6: 0, code: -98, name: "
                                      "EADDRINUSE, message: address already in use"), {
        "refused": failed("", phase="startup", launcher_tail="[c10d] The client socket has failed to connect to "
                                                             "[localhost]:29500 (errno: 111 - Connection refused)."),
    }),
    ("mpi-host-slots-syntax", failed("ssh: Could not resolve hostname localhost:4: Temporary failure in name resolution",
                                     error_class="launcher"), {
        "a host name that does not resolve": failed("ssh: Could not resolve hostname node7: Name or service not known",
                                                    error_class="launcher"),
    }),
    ("mpi-daemon-not-found", failed("bash: orted: command not found", error_class="launcher"), {
        "another command": failed("bash: nvcc: command not found", error_class="launcher"),
    }),
    ("mpi-tcp-nonrouted-interface", failed("[node1:06805] btl: tcp: Match incoming connection from [[27443,1],1] "
                                           "44.128.0.4 with locally known IP 2.2.2.77 failed (iface 0/4)!",
                                           error_class="launcher"), {
        "btl verbose that matched": failed("[node1:06805] btl: tcp: Match incoming connection from [[27443,1],1] "
                                           "44.128.0.4 with locally known IP 44.128.0.3 succeeded", status="pass"),
    }),
    ("duplicate-hostname", failed("/build/src/host/mem/mem_heap.cpp:exchange_heap_memory_handle:775: Fatal IPC "
                                  "Failure"), {
        "another NVSHMEM failure": failed("/build/src/host/init/init.cu:nvshmemi_check_state_and_init:1117: nvshmem "
                                          "initialization failed, exiting"),
    }),
    ("rendezvous-closed", failed("torch.distributed.elastic.rendezvous.api.RendezvousClosedError", error_class="launcher"), {
        "a rendezvous that timed out": failed("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
                                              error_class="launcher"),
    }),
    ("master-address-resolves-elsewhere", failed("[W socket.cpp:558] [c10d] The client socket has failed to connect to "
                                                 "[fake-host]:1234 (errno: 113 - No route to host).\n[E socket.cpp:610] "
                                                 "[c10d] The client socket has failed to connect to any network address of "
                                                 "(192.168.1.99, 1234).", error_class="launcher"), {
        "the address itself unreachable": failed("[E socket.cpp:610] [c10d] The client socket has failed to connect to "
                                                 "any network address of (192.168.1.99, 1234).", error_class="launcher"),
    }),
    ("net-plugin-on-some-nodes", make_record(status="hang", phase="step", reason="no progress", launcher_tail=(
        "h11:1:2 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
        "h04:3:4 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so")), {
        "no plugin anywhere": make_record(status="hang", phase="step", reason="no progress", launcher_tail=(
            "h11:1:2 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")),
    }),
    ("hostname-unresolvable", failed("", phase="startup", launcher_tail="[W1008 23:40:22.781961348 socket.cpp:767] "
                                     "[c10d] The IPv4 network addresses of (node-7.internal, 29500) cannot be "
                                     "retrieved (gai error: -2 - Name or service not known)."), {
        "resolved, then refused": failed("", phase="startup", launcher_tail="[c10d] The client socket has failed to "
                                         "connect to [node-7.internal]:29500 (errno: 111 - Connection refused)."),
    }),
    ("rendezvous-unreachable", failed("", phase="startup", launcher_tail="[E socket.cpp:860] [c10d] The client socket "
                                      "has timed out after 900s while trying to connect to (10.0.0.1, 29400).\n"
                                      "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
                                      "connection to the C10d store has failed. See inner exception for details."), {
        "the server side": failed("", phase="startup", launcher_tail="[c10d] The server socket has failed to listen "
                                  "on any local network address."),
    }),
    ("libnccl-missing", failed("ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
                               phase="startup"), {
        "another library": failed("ImportError: libcudnn.so.9: cannot open shared object file: No such file or "
                                  "directory", phase="startup"),
        "torch's preload of another library": failed("ValueError: libcublas.so.*[0-9] not found in the system path "
                                                     "['/usr/lib/python3.10']", phase="startup"),
    }),
    ("nccl-not-built-in", failed("RuntimeError: Distributed package doesn't have NCCL built in"), {
        "no MPI": failed("RuntimeError: Distributed package doesn't have MPI built in"),
        # torch's own warning where NCCL is built in but finds no GPU (no-gpu-in-container's territory)
        "NCCL with no GPU": failed("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"),
    }),
    ("barrier-device-unknown", make_record(status="hang", phase="init", launcher_tail=BARRIER_WARNING), {
        "passed": make_record(status="pass", launcher_tail=BARRIER_WARNING),
    }),
    ("nccl-peers-disagree-on-network", warned("misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3"), {
        "a socket that failed": warned("misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43123> "
                                       "failed : Software caused connection abort"),
        # NCCL 2.30.7: a stray connection (another job, a port scan) that is not NCCL's at all
        "a stray connection": warned("NCCL INFO socketFinalizeAccept from 10.0.0.9<51234>: socket magic mismatch (peer "
                                     "0x474554202f20485 != expected 0x3f8a2c51b7e9d406), discarding peer connection"),
    }),
    ("nccl-version-bug", warned("graph/rings.cc:38 NCCL WARN Error : ring 0 does not loop back to start (13 != 15).",
                                nccl_loaded="2.19.3"), {
        "fixed NCCL": warned("graph/rings.cc:38 NCCL WARN Error : ring 0 does not loop back to start (13 != 15).",
                             nccl_loaded="2.21.5"),
    }),
    ("nccl-invalid-usage", failed("RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)"), {
        "two ranks on one GPU": failed("ncclInvalidUsage: invalid usage (run with NCCL_DEBUG=WARN for details). Last "
                                       "error: Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000"),
    }),
    ("ib-device-not-visible", failed("", launcher_tail="node1:12:40 [0] NCCL INFO NCCL_IB_DISABLE set by environment "
                                     "to 0.\nnode1:12:40 [0] NCCL INFO NET/IB : No device found."), {
        "IB not asked for": failed("", launcher_tail="node1:12:40 [0] NCCL INFO NET/IB : No device found."),
    }),
    ("nccl-comm-id-subnet", warned("misc/socket.cc:120 NCCL WARN No interface found in the same subnet as remote "
                                   "address 10.1.2.3<23456>"), {
        "no interface at all": warned("bootstrap.cc:84 NCCL WARN Bootstrap : no socket interface found"),
    }),
    ("deepspeed-pdsh-ssh-args", failed("KeyError: 'PDSH_SSH_ARGS_APPEND'", phase="startup", error_class="launcher"), {
        "another variable": failed("KeyError: 'LOCAL_RANK'", phase="startup", error_class="launcher"),
    }),
    ("torch-sees-no-gpu", failed("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"), {
        "a torch without NCCL": failed("RuntimeError: Distributed package doesn't have NCCL built in"),
        "Ray with no GPU node free": refused(
            "ValueError: No available node types can fulfill resource request {'GPU': 1.0}."),
    }),
    ("vllm-kv-cache-too-small", failed("ValueError: The model's max seq len (8192) is larger than the maximum number of "
                                       "tokens that can be stored in KV cache (5120).", error_class="oom"), {
        "out of memory": failed("torch.OutOfMemoryError: CUDA out of memory.", error_class="oom"),
    }),
    ("cdi-spec-stale", failed("", phase="startup", launcher_tail="Error: setting up CDI devices: failed to inject "
                              "devices: failed to stat CDI host device \"/dev/nvidia3\": no such file or directory"), {
        "no spec at all": failed("", phase="startup", launcher_tail="Error: setting up CDI devices: unresolvable CDI "
                                 "devices nvidia.com/gpu=all"),
    }),
    ("nccl-graph-capture-unsupported", warned("enqueue.cc:1012 NCCL WARN NCCL cannot be captured in a graph if either "
                                              "it wasn't built with CUDA runtime >= 11.3 or if the installed CUDA "
                                              "driver < R465."), {
        "a capture that failed otherwise": warned("enqueue.cc:1012 NCCL WARN Cuda failure 'operation not permitted "
                                                  "when stream is capturing'"),
    }),
    ("nccl-1x", failed("", launcher_tail="# NCCL Tests compiled with NCCL 1.0\n# Using devices"), {
        "NCCL 2": failed("", launcher_tail="# NCCL Tests compiled with NCCL 2.21\n# Using devices"),
    }),
    ("mpirun-env-local-only", failed("", launcher_tail="$ NCCL_SHM_DISABLE=1 mpirun -H a,b -np 2 ./all_reduce_perf -g 4"), {
        "exported with -x": failed("", launcher_tail="$ NCCL_SHM_DISABLE=1 mpirun -x NCCL_SHM_DISABLE -H a,b -np 2 ./a"),
        "torchrun": failed("", launcher_tail="$ NCCL_SHM_DISABLE=1 torchrun --nproc_per_node 2 train.py"),
    }),
    ("wildcard-address-advertised", failed("", phase="startup", launcher_tail="INFO Etcd machines: ['http://0.0.0.0:2379']"), {
        "a routable endpoint": failed("", phase="startup", launcher_tail="INFO Etcd machines: ['http://10.0.0.5:2379']"),
        "a listener on every interface": failed("", phase="startup", launcher_tail="Serving on http://0.0.0.0:8265"),
    }),
    ("mpi-version-skew", failed("", phase="startup", error_class="launcher",
                                launcher_tail='Error: unknown option "--hnp-topo-sig"'), {
        "a script's own option": failed("", phase="startup", error_class="launcher",
                                        launcher_tail='train.py: error: unknown option "--epochs"'),
    }),
    ("mpich-given-openmpi-options", refused(
            "[mpiexec@master] match_arg (utils/args/args.c:159): unrecognized argument allow-run-as-root"), {
        "an unknown option of MPICH's own syntax": refused(
            "[mpiexec@master] match_arg (utils/args/args.c:159): unrecognized argument genvv"),
    }),
    ("ibverbs-missing", failed("", launcher_tail="NCCL INFO Failed to open libibverbs.so[.1]\n"
                                                  "NCCL INFO NET/Socket : Using [0]ib0:10.1.0.2<0>"), {
        "no IB on the host": failed("", launcher_tail="NCCL INFO Failed to open libibverbs.so[.1]\n"
                                                      "NCCL INFO NET/Socket : Using [0]eth0:10.1.0.2<0>"),
    }),
    ("tcpstore-without-libuv", failed("RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
                                      phase="init", error_class="launcher"), {
        "another store error": failed("RuntimeError: The server socket has failed to listen on any local network address.",
                                      phase="init", error_class="launcher"),
    }),
    ("engine-without-cdi", failed("", phase="startup", launcher_tail="Error: stat nvidia.com/gpu=all: no such file or directory"), {
        "a device path missing": failed("", phase="startup", launcher_tail="Error: stat /dev/nvidia3: no such file or directory"),
        "no NVIDIA device driver in docker": failed("", phase="startup", launcher_tail="docker: Error response from "
                                                    "daemon: could not select device driver \"\" with capabilities: [[gpu]]."),
    }),
    ("cdi-spec-unparsable", failed("", phase="startup", launcher_tail=(
            'failed to load CDI Spec failed to parse CDI Spec "/etc/cdi/nvidia.yaml": failed to unmarshal CDI Spec: '
            'error unmarshaling JSON: while decoding JSON: json: unknown field "additionalGids"')), {
        "an unresolvable device alone": failed("", phase="startup", launcher_tail=(
            "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0")),
    }),
    ("cdi-hook-1-17-0", failed("", phase="startup", launcher_tail="NVIDIA CDI Hook version 1.17.0\ncommit: 5bc0315"), {
        "the fixed release": failed("", phase="startup", launcher_tail="NVIDIA CDI Hook version 1.17.1\ncommit: 1a2b3c4"),
    }),
    ("nvml-library-not-loaded", failed("", phase="startup", launcher_tail="loading NVML\nFailed to start nvml with error:  "
                                                                           "could not load NVML library"), {
        "the toolkit's own hook": failed("", phase="startup", launcher_tail=(
            "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
            "object file: no such file or directory")),
        # NVML loaded and answering: the kernel module is the one missing (driver-module-not-loaded)
        "the driver not loaded": failed("", phase="startup", launcher_tail="Failed to initialize NVML: Driver Not Loaded"),
    }),
    ("gpu-memory-too-small", failed("RuntimeError: CUDA out of memory. Tried to allocate 450.00 MiB (GPU 0; 10.73 GiB total "
                                    "capacity; 9.23 GiB already allocated; 7.75 MiB free; 542.02 MiB cached)",
                                    phase="step", error_class="oom"), {
        "held by another process": failed("RuntimeError: CUDA out of memory. Tried to allocate 450.00 MiB (GPU 0; 10.73 GiB "
                                          "total capacity; 1.23 GiB already allocated; 7.75 MiB free; 542.02 MiB cached)",
                                          phase="step", error_class="oom"),
        "no figures": failed("torch.OutOfMemoryError: CUDA out of memory.", phase="step", error_class="oom"),
        "NCCL's own allocation": failed("NCCL WARN Cuda failure 'out of memory'", phase="step", error_class="nccl"),
        "THC's other runtime error": failed("RuntimeError: cuda runtime error (59) : device-side assert triggered at "
                                            "/pytorch/aten/src/THC/generic/THCTensorMath.cu:26", phase="step",
                                            error_class="cuda"),
    }),
    ("nccl-sysfs-pci-path", warned("graph/xml.cc:332 NCCL WARN Could not find real path of "
                                   "/sys/class/pci_bus/0000:01/../../0000:01:00.0"), {
        "another topology error": warned("graph/xml.cc:332 NCCL WARN Could not find NUMA node of /sys/class/pci_bus"),
    }),
    ("vllm-ray-node-ip", failed("", launcher_tail="(autoscaler +7s) Error: No available node types can fulfill resource "
                                                  "request {'node:10.0.0.5': 0.001, 'GPU': 1.0}."), {
        "GPUs short": failed("", launcher_tail="(autoscaler +7s) Error: No available node types can fulfill resource "
                                               "request {'GPU': 1.0}."),
    }),
    ("mpi-libraries-not-found", refused(
            "/usr/local/mpi/bin/mpirun: error while loading shared libraries: libopen-orted-mpir.so: cannot open "
            "shared object file: No such file or directory"), {
        "the application's own library": refused(
            "python: error while loading shared libraries: libpython3.11.so.1.0: cannot open shared object file"),
    }),
    ("ompi-without-slurm-pmi", refused(
            'The application appears to have been direct launched using "srun",\nbut OMPI was not built with '
            "SLURM's PMI support and therefore cannot\nexecute."), {
        "srun's own failure": failed("", phase="startup", error_class="launcher",
                                     launcher_tail="srun: error: Unable to create step for job 42: Invalid generic resource"),
        # Open MPI 5's PMIx_Init failing for another reason than srun's PMI-1/2 (no server at all, mpirun's own)
        "PMIx failing otherwise": refused(
            "PMIx_Init failed for the following reason:\n\n  NOT-SUPPORTED\n\nOpen MPI requires access to a local PMIx "
            "server to execute."),
    }),
    ("pmix-psec-munge-missing", failed("", phase="startup", launcher_tail=(
            "A requested component was not found, or was unable to be opened.\n\nHost:      n1\n"
            "Framework: psec\nComponent: munge")), {
        "another framework": failed("", phase="startup", launcher_tail=(
            "A requested component was not found, or was unable to be opened.\n\nHost:      n1\n"
            "Framework: btl\nComponent: openib")),
    }),
    ("ray-node-ip-unroutable", failed("", phase="startup", launcher_tail=(
            "worker node.py:421 -- Failed to get node info b'RPC error: Deadline Exceeded'\nException: The current "
            "node timed out during startup")), {
        "a task's own timeout": failed("", phase="startup", launcher_tail="ray.exceptions.GetTimeoutError: Get timed out")
    }),
    ("ofi-plugin-libfabric-version", failed("", launcher_tail=(
            "NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' not found "
            "(required by /x/libnccl-net.so) No plugin found (libnccl-net.so), using internal implementation")), {
        "no plugin at all": failed("", launcher_tail="NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using "
                                                     "internal implementation"),
    }),
    ("fsdp-mixed-requires-grad", failed("ValueError: `FlatParameter` requires uniform `requires_grad`",
                                        phase="prepare", error_class="other"), {
        "another FSDP error": failed("ValueError: Expects tensors to be on the compute device", phase="prepare",
                                     error_class="other"),
        "torch 2's other flatten check": failed("ValueError: Must flatten tensors on the same device but got both "
                                                "cuda:0 and cpu", phase="prepare", error_class="other"),
    }),
    ("privileged-port", failed("The server socket has failed to listen on any local network address. The server socket "
                               "has failed to bind to [::]:520 (errno: 13 - Permission denied).", phase="init",
                               error_class="launcher"), {
        "a high port in use": failed("The server socket has failed to listen on any local network address. The server "
                                     "socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
                                     phase="init", error_class="launcher"),
    }),
    ("toolkit-no-cgroups", failed("", phase="startup", launcher_tail=(
            "Failed to initialize NVML: Unknown Error\n$ grep no-cgroups /etc/nvidia-container-runtime/config.toml\n"
            "no-cgroups = true")), {
        "cgroups left on": failed("", phase="startup", launcher_tail=(
            "Failed to initialize NVML: Unknown Error\n$ grep no-cgroups /etc/nvidia-container-runtime/config.toml\n"
            "#no-cgroups = false")),
    }),
    ("ofi-no-provider", warned("NCCL WARN NET/OFI Only EFA provider is supported"), {
        "the plugin loaded": warned("NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)"),
    }),
    ("custom-allreduce-needs-p2p", failed("", launcher_tail="[TensorRT-LLM][WARNING] Device 2 peer access Device 5 is not "
                                                            "available."), {
        "peers reachable": failed("", launcher_tail="[TensorRT-LLM][INFO] Device 2 peer access Device 5 is available."),
    }),
    ("launcher-ssh-unreachable", failed("", phase="startup", error_class="launcher",
                                        launcher_tail="ssh: connect to host 192.168.13.2 port 22: Connection timed out"), {
        "the rendezvous unreachable": refused(
            "The client socket has failed to connect to [node1]:29500 (errno: 110 - Connection timed out)."),
    }),
    ("deepspeed-behind-torch", failed("TypeError: DSElasticAgent._set_master_addr_port() takes 3 positional arguments "
                                      "but 4 were given", phase="startup", error_class="launcher"), {
        "another TypeError": failed("TypeError: forward() takes 2 positional arguments but 3 were given",
                                    phase="step", error_class="other"),
    }),
    ("device-id-not-a-device", failed('    if device_id is not None and (device_id.index is None or device_id.type == "cpu"):'
                                      "\nAttributeError: 'device' object has no attribute 'index'",
                                      phase="init", error_class="other"), {
        "another AttributeError": failed("AttributeError: 'NoneType' object has no attribute 'index'",
                                         phase="init", error_class="other"),
    }),
    ("nccl-rem-allocator-stray-message", warned(*REM_ALLOC, error_class="oom", nccl_loaded="2.10.3"), {
        # NCCL's own buffers not fitting beside the model: the allocation WARN without the remote allocator
        "NCCL's buffers out of memory": warned("include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
                                               error_class="oom", nccl_loaded="2.10.3"),
        # NCCL 2.12 and later have no remote allocator: a measured newer NCCL contradicts the words
        "a newer NCCL measured": warned(*REM_ALLOC, error_class="oom", nccl_loaded="2.17.1"),
    }),
    # --- ninth split, group h9b-
    ("toolkit-cgroup-v2-unsupported", refused(
            "stderr: nvidia-container-cli: container error: cgroup subsystem devices not found: unknown."), {
        "a rootless engine's device cgroup": refused(
            "nvidia-container-cli: mount error: open failed: /sys/fs/cgroup/devices/user.slice/devices.allow: "
            "permission denied"),
        "the toolkit's device filter on an old kernel": refused(
            "nvidia-container-cli: mount error: failed to add device rules: unable to replace original device filters "
            "program with new one: failed to call BPF_PROG_ATTACH (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI): can't attach "
            "program: invalid argument: unknown"),
    }),
    ("toolkit-cgroups-not-writable", refused(
            "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device filters "
            "attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not permitted: unknown."), {
        "the toolkit's device filter on an old kernel": refused(
            "nvidia-container-cli: mount error: failed to add device rules: unable to replace original device filters "
            "program with new one: failed to call BPF_PROG_ATTACH (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI): can't attach "
            "program: invalid argument: unknown"),
        "no devices controller at all": refused(
            "nvidia-container-cli: container error: cgroup subsystem devices not found: unknown."),
        # the query refused for another reason than the right to change cgroups (the kernel's)
        "the query refused by the kernel": refused(
            "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device filters "
            "attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: invalid argument: unknown."),
        "NVML refused inside a started container": failed("", phase="startup", error_class="driver",
                                                          launcher_tail="Failed to initialize NVML: Unknown Error"),
    }),
    ("ptx-newer-than-driver", failed("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported "
                                     "toolchain.", phase="step", error_class="cuda"), {
        "no kernel image for the GPU": failed("RuntimeError: CUDA error: no kernel image is available for execution on "
                                              "the device", phase="step", error_class="cuda"),
        "the runtime newer than the driver": failed("RuntimeError: CUDA error: CUDA driver version is insufficient for "
                                                    "CUDA runtime version", phase="init", error_class="driver"),
    }),
    ("wsl-no-gpu-adapter", refused(
            "stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: WSL environment "
            "detected but no adapters were found: unknown"), {
        "WSL2's libcuda path": refused(
            "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
            "object file: no such file or directory: unknown"),
        "the driver RPC": refused(
            "nvidia-container-cli: initialization error: driver rpc error: timed out: unknown."),
    }),
    # ninth split, group h9c-
    ("deepspeed-visible-devices-ignored", refused(
            "Detected CUDA_VISIBLE_DEVICES=2,4,5,7 but ignoring it because one or several of --include/--exclude/"
            "--num_gpus/--num_nodes cl args were used. If you want to use CUDA_VISIBLE_DEVICES don't pass any of "
            "these arguments to deepspeed."), {
        "the first GPUs anyway": refused(
            "Detected VISIBLE_DEVICES=0,1,2,3 but ignoring it because one or several of --include/--exclude/"
            "--num_gpus/--num_nodes cl args were used."),
        "honoured": refused(
            "Detected CUDA_VISIBLE_DEVICES=2,4: setting --include=localhost:2,4"),
    }),
    ("deepspeed-include-slot-missing", failed("ValueError: No slot '2' specified on host 'work1'", phase="startup",
                                              error_class="launcher"), {
        "a host not in the hostfile": failed("ValueError: Hostname 'work3' not found in hostfile", phase="startup",
                                             error_class="launcher"),
    }),
    ("deepspeed-local-rank-before-config", refused(
            "[INFO] [launch.py:256:main] process 3357036 spawned with command: ['/usr/bin/python3', '-u', "
            "'src/train.py', '--local_rank=0', 'examples/train_lora/llama3_lora_sft_ds3.yaml']"), {
        "options as flags": refused(
            "[INFO] [launch.py:256:main] process 42 spawned with command: ['/usr/bin/python3', '-u', 'train.py', "
            "'--local_rank=0', '--output_dir', 'out', '--deepspeed', 'ds_config.json']"),
        "failed later, in a step": failed("", phase="step", error_class="nccl", launcher_tail=(
            "[INFO] [launch.py:256:main] process 42 spawned with command: ['/usr/bin/python3', '-u', 'train.py', "
            "'--local_rank=0', 'config.yaml']")),
    }),
    ("notebook-launcher-num-processes", failed(
            'ValueError: You have to specify the number of GPUs you would like to use, add `num_processes=...` to '
            "your call.", phase="startup", error_class="launcher"), {
        "another notebook_launcher check": failed("ValueError: The node_rank must be less than the number of nodes.",
                                                  phase="startup", error_class="launcher"),
    }),
    ("windows-rendezvous-address-invalid", refused(
            "[W socket.cpp:697] [c10d] The client socket has failed to connect to [activate.navicat.com]:25851 "
            "(system error: 10049 - The requested address is not valid in its context.)."), {
        "refused on Linux": refused(
            "[W socket.cpp:697] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 111 - "
            "Connection refused)."),
        "a torch without libuv": refused(
            "[W socket.cpp:697] [c10d] The client socket has failed to connect to [kubernetes.docker.internal]:29500 "
            "(system error: 10049 - The requested address is not valid in its context.).\ntorch.distributed."
            "DistStoreError: use_libuv was requested but PyTorch was built without libuv support"),
    }),
    ("deepspeed-master-addr-empty", refused(
            "[INFO] [runner.py:417:main] Using IP address of  for node ddp-0.ddp.svc.cluster.local"), {
        "an address found": refused(
            "[INFO] [runner.py:417:main] Using IP address of 10.0.0.4 for node ddp-0.ddp.svc.cluster.local"),
    }),
    ("launcher-not-on-path", failed("", phase="startup", error_class="launcher",
                                    launcher_tail="run.sh: line 12: torchrun: command not found"), {
        "MPI's daemon": refused("bash: orted: command not found"),
        "fish missing another command": failed("", phase="startup", error_class="launcher",
                                               launcher_tail="fish: Unknown command: nvidia-smi"),
        "the package missing in python": failed("ModuleNotFoundError: No module named 'accelerate'", phase="startup",
                                                error_class="import"),
    }),
    ("torch18-cublas-handle-segfault", failed("", phase="step", error_class="killed", torch="1.8.0+cu111", launcher_tail=(
            "Program terminated with signal SIGSEGV, Segmentation fault.\n#0  0x00007f92fef2548f in "
            "at::cuda::getCurrentCUDABlasHandle() ()")), {
        # the same frame on a later torch is another bug (a thread race fixed in 2025), not this release's
        "a later torch": failed("", phase="step", error_class="killed", torch="2.4.0+cu121", launcher_tail=(
            "Program terminated with signal SIGSEGV, Segmentation fault.\n#0  0x00007f92fef2548f in "
            "at::cuda::getCurrentCUDABlasHandle() ()")),
        "another frame": failed("", phase="step", error_class="killed", torch="1.8.0+cu111", launcher_tail=(
            "Program terminated with signal SIGSEGV, Segmentation fault.\n#0  0x00007f3d43c5e48f in "
            "at::cuda::detail::CUDAHooks::initCUDA() const ()")),
    }),
    ("ucc-tl-failed-on-some-ranks", make_record(status="hang", phase="init", launcher_tail=(
            "[1730120424.285612] [node1:26352:0]     ucc_context.c:817  UCC  DEBUG ctx create epilog for mlx5 failed: "
            "Unhandled error")), {
        "no hang": failed("", launcher_tail="[1730120424.285612] [node1:26352:0]     ucc_context.c:817  UCC  DEBUG ctx "
                                            "create epilog for mlx5 failed: Unhandled error"),
        "a TL only skipped": make_record(status="hang", phase="init", launcher_tail=(
            "[1719127270.717034] [node3:116665:0] cl_basic_context.c:39   CL_BASIC DEBUG TL mlx5 context is not "
            "available, skipping")),
    }),
    # --- tenth split, group h10b-
    ("mpirun-as-root", refused(
            "--------------------------------------------------------------------------\nprterun has detected an "
            "attempt to run as root.\n\nRunning as root is *strongly* discouraged"), {
        "MPICH given the override": refused(
            "[mpiexec@node1] match_arg (utils/args/args.c:163): unrecognized argument allow-run-as-root"),
        "allowed, then too few slots": refused(
            "+ mpirun --allow-run-as-root -np 8 python train.py\nThere are not enough slots available in the "
            "system to satisfy the 8\nslots that were requested by the application:"),
    }),
    ("torch-without-mpi-backend", failed("RuntimeError: Distributed package doesn't have MPI built in. MPI is only "
                                         "included if you build PyTorch from source on a host that has MPI installed.",
                                         error_class="import"), {
        "a torch without NCCL": failed("RuntimeError: Distributed package doesn't have NCCL built in",
                                       error_class="import"),
    }),
    ("torch-without-distributed", failed("RuntimeError: PyTorch built without distributed support",
                                         error_class="import"), {
        "a torch without NCCL": failed("RuntimeError: Distributed package doesn't have NCCL built in",
                                       error_class="import"),
        "a newer collective on an old torch": failed("AttributeError: module 'torch.distributed' has no attribute "
                                                     "'all_gather_object'", error_class="other"),
    }),
    ("slurm-invalid-gres", refused(
            "srun: error: Unable to create step for job 4242: Invalid generic resource (gres) specification"), {
        "CPUs, not GRES": refused(
            "srun: error: Unable to create step for job 4242: More processors requested than permitted"),
        "a node configuration the partition lacks": refused(
            "sbatch: error: Batch job submission failed: Requested node configuration is not available"),
    }),
    ("slurm-step-resources-busy", failed("", status="hang", phase="startup", error_class=None, launcher_tail=(
            "srun: Job 77 step creation temporarily disabled, retrying (Requested nodes are busy)")), {
        "the job itself waiting in the queue": failed("", status="hang", phase="startup", error_class=None,
                                                      launcher_tail=("srun: job 77 queued and waiting for resources")),
        "a step refused outright": refused(
            "srun: error: Unable to create step for job 77: More processors requested than permitted"),
    }),
    ("accelerate-config-file-missing", failed("FileNotFoundError: The passed configuration file `configs/fsdp.yaml` "
                                              "does not exist. Please pass an existing file to `accelerate launch`, "
                                              "or use the default one created through `accelerate config`",
                                              phase="startup", error_class="launcher"), {
        "a model file missing": failed("FileNotFoundError: [Errno 2] No such file or directory: "
                                       "'/root/.cache/huggingface/hub/models--gpt2/config.json'", phase="startup",
                                       error_class="other"),
        "DeepSpeed's config missing": failed("FileNotFoundError: [Errno 2] No such file or directory: "
                                             "'configs/ds_config.json'", phase="startup", error_class="other"),
    }),
    ("lightning-requested-gpu-missing", failed("lightning.fabric.utilities.exceptions.MisconfigurationException: You "
                                               "requested gpu: [0, 1, 2, 3]\n But your machine only has: [0, 1]",
                                               phase="startup", error_class="launcher"), {
        "no GPU at all": failed("lightning_fabric.utilities.exceptions.MisconfigurationException: No supported gpu "
                                "backend found!", phase="startup", error_class="launcher"),
        "CUDA's bad ordinal": failed("RuntimeError: CUDA error: invalid device ordinal", phase="init",
                                     error_class="cuda"),
    }),
    ("stray-context-on-gpu0", failed("", phase="step", error_class="oom", launcher_tail=(
            "|    0   N/A  N/A     41233      C   /usr/bin/python3                      20112MiB |\n"
            "|    0   N/A  N/A     41234      C   /usr/bin/python3                        522MiB |\n"
            "|    1   N/A  N/A     41234      C   /usr/bin/python3                      20080MiB |")), {
        "one process per GPU": failed("", phase="step", error_class="oom", launcher_tail=(
            "|    0   N/A  N/A     41233      C   /usr/bin/python3                      20112MiB |\n"
            "|    1   N/A  N/A     41234      C   /usr/bin/python3                      20080MiB |")),
        "another PID beginning alike": failed("", phase="step", error_class="oom", launcher_tail=(
            "|    0      4123     C   python                                        11000MiB |\n"
            "|    1      41234    C   python                                        11000MiB |")),
    }),
    ("gpu-capability-below-minimum", failed(
            "RuntimeError: Found Tesla P40 which is too old to be supported by the triton GPU compiler, which is used "
            "as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA "
            "capability 6.1", phase="step", error_class="other", capability="6.1"), {
        # a V100 lacks bf16 only: float16 runs (bf16-unsupported-gpu)
        "bf16 on a V100": failed("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
                                 "8.0. Your Tesla V100-SXM2-32GB GPU has compute capability 7.0.", error_class="other",
                                 capability="7.0"),
        "the GPU measured newer": failed("RuntimeError: GPUs with compute capability below 7.0 are not supported.",
                                         error_class="other", capability="8.0"),
        "a build without the architecture": failed(
            "Found GPU0 Tesla K80 which is of cuda capability 3.7. PyTorch no longer supports this GPU because it is "
            "too old. The minimum cuda capability supported by this library is 5.0.", error_class="cuda",
            capability="3.7"),
    }),
    ("nvidia-dkms-build-failed", failed("", phase="startup", error_class="driver", launcher_tail=(
            "Error! Bad return status for module build on kernel: 6.8.0-31-generic (x86_64)\n"
            "Consult /var/lib/dkms/nvidia/535.171.04/build/make.log for more information.")), {
        "another module's DKMS build": failed("", phase="startup", error_class="driver", launcher_tail=(
            "Error! Bad return status for module build on kernel: 6.8.0-31-generic (x86_64)\n"
            "Consult /var/lib/dkms/zfs/2.2.2/build/make.log for more information.")),
        "the module built, not loaded": failed("", phase="startup", error_class="driver", launcher_tail=(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
            "NVIDIA driver is installed and running.")),
    }),
    ("container-device-unknown", refused(
            "docker: Error response from daemon: failed to create task for container: ... error running hook #0: "
            "error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
            "nvidia-container-cli: device error: GPU-3f1c8a2e-77b0-1d5e-9c4a-2b6e0d8f1a93: unknown device: unknown."), {
        "a rank's own ordinal": failed("RuntimeError: CUDA error: invalid device ordinal", error_class="cuda"),
        "the hook's driver": refused(
            "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown."),
    }),
    ("toolkit-ldconfig-path", refused(
            "stderr: nvidia-container-cli: ldcache error: process /sbin/ldconfig failed with error code: 127: "
            "unknown."), {
        # ldconfig ran and failed: not its path
        "ldconfig itself failed": refused(
            "stderr: nvidia-container-cli: ldcache error: process /sbin/ldconfig.real failed with error code: 1: "
            "unknown."),
    }),
    ("tgi-warmup-token-budget", failed(
            "RuntimeError: Not enough memory to handle 8192 prefill tokens. You need to decrease "
            "`--max-batch-prefill-tokens`", phase="startup", error_class="oom"), {
        # the router's own form, and 0.9's, are the same budget (in the signature); a plain CUDA OOM is not
        "a CUDA OOM while serving": failed("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                                           "GiB", phase="step", error_class="oom"),
        "vLLM's KV cache check": failed("ValueError: No available memory for the cache blocks. Try increasing "
                                        "`gpu_memory_utilization` when initializing the engine.", error_class="oom"),
    }),
    ("engine-memory-fraction-too-low", failed(
            "(EngineCore_DP0 pid=2231) ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory for the "
            "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            phase="startup", error_class="oom"), {
        # the KV cache exists but is shorter than the model's length: vllm-kv-cache-too-small
        "a KV cache shorter than max_model_len": failed(
            "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
            "stored in KV cache (16816). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            "when initializing the engine.", error_class="oom"),
        # other processes hold memory: vLLM's start-up check of the free memory, another cause's message
        "less free memory than the share": failed(
            "ValueError: Free memory on device (59.32/79.15 GiB) on startup is less than desired GPU memory "
            "utilization (0.9, 71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
            "processes.", error_class="oom"),
    }),
    ("tp-size-not-dividing-heads", failed(
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, Total "
            "number of attention heads (64) must be divisible by tensor parallel size (3).", phase="startup",
            error_class="other"), {
        "more ranks than GPUs": failed("ValueError: The number of required GPUs exceeds the total number of "
                                       "available GPUs in the placement group.", phase="startup", error_class="other"),
        "an expert-parallel count": failed("AssertionError: n_physical_experts=256 must be divisible by ep_size=3. "
                                           "Adjust num_redundant_experts.", phase="startup", error_class="other"),
    }),
    ("triton-libcuda-missing", failed(
            "/usr/bin/ld: cannot find -lcuda: No such file or directory\ncollect2: error: ld returned 1 exit status",
            phase="step", error_class="import"), {
        # the driver library found but a stub: another cause's message
        "the toolkit's stub libcuda": failed("RuntimeError: CUDA driver is a stub library", error_class="cuda"),
        "another library missing": failed("/usr/bin/ld: cannot find -lcudart: No such file or directory",
                                          error_class="import"),
    }),
    ("trtllm-mpi-world-size", failed(
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: MPI size 1 != TP size 2 * PP size 1 "
            "(/src/tensorrt_llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)", phase="startup", error_class="other"), {
        "an MPI error of its own": failed("terminate called after throwing an instance of "
                                          "'tensorrt_llm::common::TllmException' what():  [TensorRT-LLM][ERROR] "
                                          "Assertion failed: Failed: MPI error", error_class="other"),
        "torch's world size": failed("ValueError: Error initializing torch.distributed using env:// rendezvous: "
                                     "environment variable WORLD_SIZE expected, but not set", error_class="launcher"),
    }),
    ("vllm-pp-unsupported-model", failed(
            "NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement "
            "the `SupportsPP` interface.", phase="startup", error_class="other"), {
        "an unsupported architecture altogether": failed(
            "ValueError: Model architectures ['FooForCausalLM'] are not supported for now.", error_class="other"),
        "layers not divisible": failed("ValueError: Total number of hidden layers (61) must be divisible by "
                                       "pipeline parallel size (2).", error_class="other"),
    }),
    ("ray-resources-oversubscribed", failed("", status="hang", phase="init", error_class=None, launcher_tail=(
            "(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, "
            "'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. Consider creating "
            "fewer actors or adding more nodes to this Ray cluster.")), {
        # a request no node type can ever satisfy: another message (and cause)
        "an infeasible request": failed("", status="hang", phase="init", error_class=None, launcher_tail=(
            "(autoscaler +1m2s) Error: No available node types can fulfill resource request {'node:10.0.0.5': 0.001, "
            "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.")),
        "vLLM waiting for its placement group": failed("", status="hang", phase="init", error_class=None,
                                                       launcher_tail=(
            "INFO 08-23 10:16:22 ray_utils.py:174] Waiting for creating a placement group of specs for 10 seconds. "
            "specs=[{'node:10.0.0.5': 0.001, 'GPU': 1.0}, {'GPU': 1.0}].")),
    }),
    ("ddp-no-trainable-params", failed(
        "[rank1]: RuntimeError: DistributedDataParallel is not needed when a module doesn't have any parameter "
        "that requires a gradient.", phase="prepare", error_class="other"), {
        # unused parameters are another DDP refusal, at the first backward
        "unused parameters": failed(
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
            "This error indicates that your module has parameters that were not used in producing loss.",
            phase="step", error_class="other"),
    }),
    ("zero3-device-map", failed(
        "ValueError: DeepSpeed Zero-3 is not compatible with passing a `device_map`.", phase="prepare",
        error_class="other"), {
        "quantized model on another device": failed(
            "ValueError: You can't train a model that has been loaded in 8-bit or 4-bit precision on a different "
            "device than the one you're training on.", phase="prepare", error_class="other"),
    }),
    ("quantized-model-device-map", failed(
        "ValueError: You can't train a model that has been loaded in 8-bit or 4-bit precision on a different device "
        "than the one you're training on. Make sure you loaded the model on the correct device using for example "
        "`device_map={'':torch.cuda.current_device()}`", phase="prepare", error_class="other"), {
        # offloaded to CPU or disk: not a per-rank placement
        "cpu offload": failed(
            "ValueError: You can't train a model that has been loaded in 8-bit or 4-bit precision with CPU or disk "
            "offload.", phase="prepare", error_class="other"),
        "zero-3": failed(
            "ValueError: DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a "
            "`device_map`.", phase="prepare", error_class="other"),
    }),
    ("cuda-home-missing", failed(
        "deepspeed.ops.op_builder.builder.MissingCUDAException: CUDA_HOME does not exist, unable to compile CUDA "
        "op(s)", phase="prepare", error_class="other"), {
        # a CPU-only torch warns about CUDA_HOME too: another cause
        "cpu-only torch": failed(
            "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'\nAssertionError: Torch not compiled with "
            "CUDA enabled", phase="prepare", error_class="cuda"),
        "toolkit of another version": failed(
            "RuntimeError: The detected CUDA version (12.1) mismatches the version that was used to compile "
            "PyTorch (11.8). Please make sure to use the same CUDA versions.", phase="prepare", error_class="other"),
    }),
    ("wrapper-prefix-state-dict", failed(
        'RuntimeError: Error(s) in loading state_dict for GPT:\n\tMissing key(s) in state_dict: "wte.weight", '
        '"lm_head.weight". \n\tUnexpected key(s) in state_dict: "module.wte.weight", "module.lm_head.weight".',
        phase="prepare", error_class="other"), {
        # another architecture's checkpoint: no wrapper prefix
        "other architecture": failed(
            'RuntimeError: Error(s) in loading state_dict for GPT:\n\tUnexpected key(s) in state_dict: '
            '"transformer.h.12.attn.weight".', phase="prepare", error_class="other"),
    }),
    ("toolkit-containerd-socket-unreachable", failed(
        'level=fatal msg="Error: unable to restart containerd: unable to signal containerd: unable to dial: dial unix '
        '/runtime/sock-dir/containerd.sock: connect: no such file or directory"', phase="startup",
        error_class="other"), {
        # kubelet losing containerd while it restarts: not the toolkit's setup
        "kubelet dialing containerd": failed(
            'grpc: addrConn.createTransport failed to connect to {unix:///run/containerd/containerd.sock  <nil> 0 '
            '<nil>}. Err :connection error: desc = "transport: Error while dialing dial unix:///run/containerd/'
            'containerd.sock: timeout". Reconnecting...', phase="startup", error_class="other"),
    }),
    ("containerd-nvidia-runtime-missing", failed(
        'Warning  FailedCreatePodSandBox  12s (x10 over 2m11s)  kubelet  Failed to create pod sandbox: rpc error: '
        'code = Unknown desc = failed to get sandbox runtime: no runtime for "nvidia" is configured',
        phase="startup", error_class="other"), {
        # Docker's unknown runtime: another engine, another cause
        "docker unknown runtime": failed(
            "docker: Error response from daemon: unknown or invalid runtime name: nvidia.", phase="startup",
            error_class="other"),
    }),
    ("slurm-built-without-nvml", failed(
        "slurmd: fatal: We were configured to autodetect nvml functionality, but we weren't able to find that lib "
        "when Slurm was configured.", phase="startup", error_class="launcher"), {
        # built with NVML, but the node has no libnvidia-ml: another cause
        "nvml library missing on the node": failed(
            "slurmd: We were configured with nvml functionality, but that lib wasn't found on the system.",
            phase="startup", error_class="launcher"),
        "rsmi": failed("slurmd: Configured with rsmi, but that lib wasn't found.", phase="startup",
                       error_class="launcher"),
    }),
    ("slurm-gres-count-lower", failed(
        "slurmctld: error: Setting node gpu-3 state to INVAL with reason:gres/gpu count reported lower than "
        "configured (7 < 8)", phase="startup", error_class="launcher"), {
        # a GRES request Slurm refuses at submission: another message and cause
        "invalid gres request": failed(
            "srun: error: Unable to create step for job 4242: Invalid generic resource (gres) specification",
            phase="startup", error_class="launcher"),
        "node down for another reason": failed(
            "Reason=Not responding [slurm@2024-03-09T11:03:34]", phase="startup", error_class="launcher"),
    }),
    ("kubelet-gpu-admission-unavailable", failed(
        "Warning  UnexpectedAdmissionError  4s  kubelet  Allocate failed due to requested number of devices "
        "unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected", phase="startup",
        error_class="other"), {
        # the device plugin's own failure at Allocate: GPU lost, another cause
        "gpu lost in the plugin": failed(
            "Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = "
            "Unknown desc = Unable to retrieve list of available devices: error creating nvml.Device 3: nvml: GPU "
            "is lost, which is unexpected", phase="startup", error_class="other"),
        "scheduler insufficient": failed(
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", phase="startup", error_class="other"),
    }),
    ("driver-container-kernel-headers", failed(
        "Resolving Linux kernel version...\nCould not resolve Linux kernel version\nStopping NVIDIA persistence "
        "daemon...", phase="startup", error_class="driver"), {
        # the module built but would not load: another cause
        "module not loading": failed(
            "modprobe: ERROR: could not insert 'nvidia': Required key not available", phase="startup",
            error_class="driver"),
    }),
    ("ib-dmabuf-unsupported", failed(
        "node1:123:456 [0] misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not "
        "supported", phase="init", error_class="nccl"), {
        # the same call out of pinned memory: the memlock limit, another cause
        "out of locked memory": failed(
            "misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory",
            phase="init", error_class="nccl"),
        "plain ibv_reg_mr": failed(
            "misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Invalid argument",
            phase="init", error_class="nccl"),
    }),
    ("gsp-rpc-timeout", failed(
        "NVRM: Xid (PCI:0000:1b:00): 119, pid=2345, name=python, Timeout after 6s of waiting for RPC response from "
        "GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).", phase="startup", error_class="driver"), {
        # a GPU that fell off the bus: the hardware-fault hint's
        "fallen off the bus": failed(
            "NVRM: Xid (PCI:0000:1b:00): 79, pid=2345, name=python, GPU has fallen off the bus.",
            phase="step", error_class="cuda"),
        "Xid 19 not 119": failed("NVRM: Xid (PCI:0000:1b:00): 19, pid=2345, name=python, Ch 00000010",
                                 phase="step", error_class="cuda"),
        "collective timeout": failed(
            "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600008 milliseconds before "
            "timing out.", status="hang", phase="step", error_class="timeout"),
    }),
    # --- eleventh split, h11c-
    ("ddp-module-on-cpu", failed(
        "ValueError: DistributedDataParallel device_ids and output_device arguments only work with single-device GPU "
        "modules, but got device_ids [0], output_device 0, and module parameters {device(type='cpu')}.",
        phase="prepare", error_class="other"), {
        # a model split over several GPUs (device_map="auto" under torchrun): another cause, same words
        "split over GPUs": failed(
            "ValueError: DistributedDataParallel device_ids and output_device arguments only work with "
            "single-device/multiple-device GPU modules or CPU modules, but got device_ids [0], output_device 0, and "
            "module parameters {device(type='cuda', index=0), device(type='cuda', index=1)}.",
            phase="prepare", error_class="other"),
        "devices cut off": failed(
            "DistributedDataParallel device_ids and output_device arguments only work with single-device CUDA "
            "modules, but got device_ids 1", phase="prepare", error_class="other"),
        "no trainable params": failed(
            "RuntimeError: DistributedDataParallel is not needed when a module doesn't have any parameter that "
            "requires a gradient.", phase="prepare", error_class="other"),
    }),
    ("deepspeed-batch-size-mismatch", failed(
        "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size 16 != 5 * 1 * 3", phase="prepare", error_class="other"), {
        # a world size of 1: DeepSpeed 0.9.0 under Accelerate, zero.Init before the process group, one GPU
        "world size 1": failed(
            "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
            "gradient_acc_step * world_size 16 != 8 * 1 * 1", phase="prepare", error_class="other"),
        "world size 1, older format": failed(
            "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
            "gradient_acc_step * world_size4096 != 128 * 4 * 1", phase="prepare", error_class="other"),
        "micro batch zero": failed("AssertionError: Micro batch size per gpu: 0 has to be greater than 0",
                                   phase="prepare", error_class="other"),
    }),
    ("fsdp-wrap-class-not-found", failed(
        "ValueError: Could not find the transformer layer class LlamaDecoderLayer in the model.", phase="prepare",
        error_class="other"), {
        # FSDP's flattening of unlike parameters: another FSDP cause
        "uniform dtype": failed(
            "ValueError: Must flatten tensors with uniform dtype but got torch.bfloat16 and torch.float32",
            phase="prepare", error_class="other"),
        "module not found by name": failed("AttributeError: 'LlamaForCausalLM' object has no attribute 'transformer'",
                                           phase="prepare", error_class="other"),
    }),
    ("deepspeed-no-sync-zero", failed(
        "[rank0]:     assert not self.zero_optimization_partition_gradients(), \\\n[rank0]: AssertionError: no_sync "
        "context manager is incompatible with gradient partitioning logic of ZeRO stage 3", phase="step",
        error_class="other"), {
        # DDP's no_sync misuse, and DeepSpeed's pipeline engine: other messages
        "ddp reentrant": failed(
            "RuntimeError: Expected to mark a variable ready only once. This error is caused by use of a module "
            "parameter outside the `forward` function.", phase="step", error_class="other"),
        "zero-3 device_map": failed(
            "ValueError: DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a "
            "`device_map`.", phase="prepare", error_class="other"),
    }),
    ("nvcc-arch-unsupported", failed(
        "nvcc fatal   : Unsupported gpu architecture 'compute_90a'\nninja: build stopped: subcommand failed.\n"
        "RuntimeError: Error building extension 'fused_adam'", phase="prepare", error_class="import"), {
        # an arch the newer toolkit dropped (CUDA 11 without compute_30, 12 without sm_35): another cause
        "arch dropped by a newer toolkit": failed(
            "nvcc fatal   : Unsupported gpu architecture 'compute_30'", phase="prepare", error_class="import"),
        "sm_35 on CUDA 12": failed("nvcc fatal   : Value 'sm_35' is not defined for option 'gpu-architecture'",
                                   phase="prepare", error_class="import"),
        "build failed, no reason": failed("RuntimeError: Error building extension 'fused_adam'", phase="prepare",
                                          error_class="import"),
        "no kernel image": failed(
            "RuntimeError: CUDA error: no kernel image is available for execution on the device", phase="step",
            error_class="cuda"),
    }),
    ("fp16-trainable-params", failed(
        "  File \"/usr/lib/python3/dist-packages/torch/amp/grad_scaler.py\", line 260, in _unscale_grads_\n"
        "    raise ValueError(\"Attempting to unscale FP16 gradients.\")\nValueError: Attempting to unscale FP16 "
        "gradients.", phase="step", error_class="other"), {
        # fp16 overflow and dtype mismatches: other causes
        "overflow": failed("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
                           phase="step", error_class="other"),
        "dtype mismatch": failed("RuntimeError: expected scalar type Half but found Float", phase="step",
                                 error_class="other"),
        "fsdp dtype": failed(
            "ValueError: Must flatten tensors with uniform dtype but got torch.float16 and torch.float32",
            phase="prepare", error_class="other"),
    }),
    # --- eleventh split, h11a-, h11b-, h11e-
    ("kho-scratch-unpinnable", refused(
        "$ sudo ls /sys/kernel/debug/kho/out/\nfdt  scratch_len  scratch_phys  sub_fdts\n"
        "scratch_len  = 0xc000000     0x12ba00000", phase="init"), {
        # the ENOMEM of the verbs alone: memlock-too-low's (whose fix names KHO where memlock is unlimited)
        "verbs ENOMEM alone": failed(
            "misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"),
        "kho=off on the command line": refused(
            "BOOT_IMAGE=/boot/vmlinuz-7.0.0-31-generic root=UUID=1234 ro kho=off", phase="init"),
    }),
    ("ib-port-error-event", warned(
        "node1:123:456 [0] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_2:1 Got async error event: port error",
        status="hang", phase="step"), {
        # the link back up, a re-registration with the subnet manager, an MTU mismatch: not a link down
        "port active": warned("node1:123:456 [0] NCCL WARN NET/IB : mlx5_2:1 Got async error event: port active"),
        "client reregistration": warned(
            "node1:123:456 [0] NCCL WARN NET/IB : Got async event : client reregistration"),
        "mtu mismatch": warned(
            "node1:123:456 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access "
            "violation work queue error"),
    }),
    ("torchrun-store-gil-segfault", refused(
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f4ebf9d3740 (most recent call first):\n"
        "  File \"/usr/lib/python3.12/site-packages/torch/distributed/elastic/utils/store.py\", line 31 in get_all\n"
        "  File \"/usr/lib/python3.12/site-packages/torch/distributed/elastic/utils/store.py\", line 53 in synchronize",
        torch="2.3.0"), {
        # fixed in 2.4 (pytorch PR #128212); a segfault in the script's own frames is another crash
        "torch 2.4": refused(
            "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f4ebf9d3740 (most recent call first):\n"
            "  File \"/usr/lib/python3.12/site-packages/torch/distributed/elastic/utils/store.py\", line 31 in get_all",
            torch="2.4.0"),
        "segfault in the script": refused(
            "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f4ebf9d3740 (most recent call first):\n"
            "  File \"train.py\", line 12 in forward", torch="2.3.0"),
        "GIL message from another extension": refused(
            "Fatal Python error: _PyMem_DebugMalloc: Python memory allocator called without holding the GIL\n"
            "  File \"/usr/lib/python3.12/site-packages/numpy/core/numeric.py\", line 88 in zeros", torch="2.3.0"),
    }),
    ("zero3-init-in-main-process-first", make_record(
        status="hang", phase="prepare", launcher_tail=(
            "Thread 101 (idle): \"MainThread\"\n    main_process_first (accelerate/accelerator.py:968)\n"
            "    __init__ (deepspeed/runtime/zero/partition_parameters.py:1043)\n    from_pretrained (transformers/"
            "modeling_utils.py:3310)")), {
        # preprocessing under main_process_first (the slow rank's timeout), ZeRO-3 without it, a passing cell
        "dataset map": make_record(status="hang", phase="prepare", launcher_tail=(
            "    main_process_first (accelerate/accelerator.py:968)\n    map (datasets/arrow_dataset.py:602)")),
        "zero3 without main_process_first": make_record(status="hang", phase="prepare", launcher_tail=(
            "    __init__ (deepspeed/runtime/zero/partition_parameters.py:1043)\n    all_gather_into_tensor "
            "(torch/distributed/distributed_c10d.py:2949)")),
        "pass": make_record(status="pass", launcher_tail=(
            "main_process_first (accelerate/accelerator.py:968)\n__init__ (deepspeed/runtime/zero/partition_parameters.py:1043)")),
    }),
    ("horovod-built-against-other-framework", failed(
        "ImportError: /usr/local/lib/python3.8/dist-packages/horovod/tensorflow/mpi_lib.cpython-38-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN10tensorflow8OpKernel11TraceStringEPNS_15OpKernelContextEb", error_class="import"), {
        # an old-CUDA kernel-launch symbol in the same library: nccl-built-for-old-cuda-launch-api's
        "cuda launch symbol": failed(
            "OSError: horovod/mxnet/mpi_lib.cpython-36m-x86_64-linux-gnu.so: undefined symbol: cudaSetupArgument",
            error_class="import"),
        "torch's own library": failed(
            "ImportError: /usr/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: "
            "_ZN3c1010cuda_dispatch", error_class="import"),
    }),
    ("nccl-built-for-old-cuda-launch-api", failed(
        "OSError: /opt/nccl/lib/libnccl.so.2: undefined symbol: cudaSetupArgument", error_class="import"), {
        # a newer CUDA symbol missing (a runtime older than the library), and a framework symbol in Horovod
        "newer cuda symbol": failed(
            "OSError: /opt/nccl/lib/libnccl.so.2: undefined symbol: cudaGetDriverEntryPoint", error_class="import"),
        "framework symbol": failed(
            "ImportError: horovod/torch/mpi_lib_v2.cpython-37m-x86_64-linux-gnu.so: undefined symbol: "
            "_ZN6caffe26detail37_typeMetaDataInstance_preallocated_32E", error_class="import"),
    }),
    ("vllm-wake-up-oom", failed(
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/device_allocator/cumem.py", line 207, in wake_up\n'
        '    create_and_map(handle)\n'
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/device_allocator/cumem.py", line 75, in create_and_map\n'
        '    python_create_and_map(*allocation_handle)\n'
        'RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62', phase="step",
        error_class="oom"), {
        # the same allocator out of memory while the model loads: the model's own size, not the wake-up
        "at load": failed("CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
                          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB.", phase="prepare",
                          error_class="oom"),
        "another CUDA error in wake_up": failed(
            '  File "/opt/vllm/device_allocator/cumem.py", line 207, in wake_up\n    create_and_map(handle)\n'
            'RuntimeError: CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:62', phase="step",
            error_class="cuda"),
    }),
    ("ray-version-mismatch", failed(
        "RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 2.12.0\n    Python: 3.11.11\n"
        "This process on node 10.123.3.87 was started with:\n    Ray: 2.42.0\n    Python: 3.9.21",
        phase="startup", error_class="launcher"), {
        # Ray 2.4x+ warns of a patch-level difference and goes on: not the refusal
        "the patch-level warning": failed(
            "WARNING utils.py:1591 -- Python patch version mismatch: The cluster was started with:\n    Ray: 2.41.0\n"
            "    Python: 3.12.8\nThis process on Ray Client was started with:\n    Ray: 2.41.0\n    Python: 3.12.3",
            phase="startup", error_class="launcher"),
        "the run passed": make_record(status="pass", launcher_tail=(
            "RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 2.12.0\n    Python: 3.11.11")),
        "another version check": failed("RuntimeError: Version mismatch between libnccl.so.2.18.1 and NCCL headers",
                                        phase="startup", error_class="import"),
    }),
    ("extension-built-for-other-torch", failed(
        "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi", phase="startup", error_class="import"), {
        # torch's own library missing a torch symbol: a broken torch install, not an extension's build
        "torch's own library": failed(
            "OSError: /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: undefined symbol: "
            "_ZN3c1021throwNullDataPtrErrorEv", phase="startup", error_class="import"),
        "torch's _C": failed(
            "ImportError: /opt/conda/lib/python3.10/site-packages/torch/_C.cpython-310-x86_64-linux-gnu.so: "
            "undefined symbol: _ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE", phase="startup",
            error_class="import"),
        # an NCCL symbol in torch: two NCCL libraries (nccl-two-libraries)
        "an NCCL symbol": failed(
            "ImportError: /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: "
            "ncclCommWindowRegister", phase="startup", error_class="import"),
        # a CUDA runtime symbol: the extension's CUDA, not torch's API
        "a CUDA symbol": failed(
            "ImportError: /usr/local/lib/python3.10/dist-packages/xformers/_C.so: undefined symbol: "
            "cudaGetDriverEntryPointByVersion, version libcudart.so.12", phase="startup", error_class="import"),
    }),
    # the twelfth split's (h12e-) new hints
    ("ninja-missing", failed(
        '  File "/usr/lib/python3/dist-packages/torch/utils/cpp_extension.py", line 1681, in verify_ninja_availability\n'
        '    raise RuntimeError("Ninja is required to load C++ extensions")\nRuntimeError: Ninja is required to load '
        'C++ extensions', phase="prepare", error_class="import"), {
        # ninja ran and the build failed: the compiler's error, not a missing ninja
        "the build failed": failed("ninja: build stopped: subcommand failed.\nRuntimeError: Error building extension "
                                   "'cpu_adam'", phase="prepare", error_class="import"),
        # DeepSpeed's op that cannot be JIT-built for another reason
        "op incompatible": failed("RuntimeError: Unable to JIT load the async_io op due to it not being compatible due "
                                  "to hardware/software issue.", phase="prepare", error_class="other"),
    }),
    ("torch-lacks-imported-name", failed(
        "ImportError: cannot import name 'DTensor' from 'torch.distributed.tensor' "
        "(/usr/lib/python3.10/site-packages/torch/distributed/tensor/__init__.py)", phase="startup",
        error_class="import"), {
        # another package's name, torchvision's, a circular import, a torch without its package, a local torch.py
        "another package": failed("ImportError: cannot import name 'is_torch_tpu_available' from 'transformers' "
                                  "(/venv/lib/python3.10/site-packages/transformers/__init__.py)", phase="startup",
                                  error_class="import"),
        "torchvision": failed("ImportError: cannot import name 'rgb_to_grayscale' from "
                              "'torchvision.transforms.functional_tensor'", phase="startup", error_class="import"),
        "circular import": failed("ImportError: cannot import name 'nn' from partially initialized module 'torch' "
                                  "(most likely due to a circular import) (/venv/lib/python3.10/site-packages/torch/"
                                  "__init__.py)", phase="startup", error_class="import"),
        "no torch package": failed("ImportError: cannot import name 'Tensor' from 'torch' (unknown location)",
                                   phase="startup", error_class="import"),
        "a local torch.py": failed("ImportError: cannot import name 'nn' from 'torch' (/home/u/project/torch.py)",
                                   phase="startup", error_class="import"),
    }),
    # the twelfth split's (h12d-)
    ("ray-driver-node-without-gpu", failed(
        "ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group "
        "or running the driver on a GPU node.", phase="startup", error_class="launcher"), {
        # a placement group still pending: too few GPUs, an IP Ray does not know, PACK over one-GPU nodes
        "a pending placement group": failed(
            "INFO 08-23 10:16:22 ray_utils.py:174] Waiting for creating a placement group of specs for 10 seconds. "
            "specs=[{'GPU': 1.0, 'node:192.168.50.192': 0.001}, {'GPU': 1.0}] (PACK)", phase="startup",
            error_class="launcher"),
        # another platform's device key on a GPU node (an NPU build on a GPU host): not the driver's node
        "another device": failed(
            "ValueError: Current node has no NPU available. current_node_resource={'CPU': 192.0, 'GPU': 8.0}. vLLM "
            "engine cannot start without NPU.", phase="startup", error_class="launcher"),
        "the run passed": make_record(status="pass", launcher_tail=(
            "ValueError: Ray does not allocate any GPUs on the driver node.")),
    }),
    ("vllm-custom-allreduce-ipc-hang", make_record(
        status="hang", phase="prepare", launcher_tail=(
            "2024-04-15 13:59:04.981153 Call to _gather_ipc_meta in /workspace/vllm/model_executor/parallel_utils/"
            "custom_all_reduce.py:222")), {
        # the exchange returned: the hang is elsewhere
        "returned": make_record(status="hang", phase="prepare", launcher_tail=(
            "2024-04-15 13:59:04.981153 Call to _gather_ipc_meta in /vllm/custom_all_reduce.py:222 from __init__ in "
            "/vllm/custom_all_reduce.py:180\n2024-04-15 13:59:05.001 Return from _gather_ipc_meta in "
            "/vllm/custom_all_reduce.py:240 to __init__ in /vllm/custom_all_reduce.py:181")),
        # an error raised inside it is that error's cause, not a hang
        "a failure in it": failed(
            '  File "/vllm/distributed/device_communicators/custom_all_reduce.py", line 230, in _gather_ipc_meta\n'
            "    dist.broadcast_object_list(all_data[i], src=rank, group=self.group)\n"
            "RuntimeError: NCCL error: unhandled system error", phase="prepare"),
        # the all-reduce itself running (a hang in the kernel, not the set-up)
        "another function": make_record(status="hang", phase="step", launcher_tail=(
            "Thread 1113 (idle): \"MainThread\"\n    all_reduce (vllm/distributed/device_communicators/"
            "custom_all_reduce.py:301)")),
    }),
    ("hostname-resolves-to-loopback", refused("RuntimeError: IP address 127.0.1.1 not found in cluster IPs: ['10.1.2.3']"), {
        # the node's address from another interface: not loopback, another cause
        "another interface": refused("RuntimeError: IP address 10.102.3.53 not found in cluster IPs: "
                                     "['10.244.10.126', '10.244.10.127']"),
        "loopback elsewhere": refused("[c10d] The client socket has failed to connect to [127.0.1.1]:29500 "
                                      "(errno: 111 - Connection refused)."),
    }),
    # the twelfth split, h12a-
    ("persistenced-socket-under-host-run", refused(
        "nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/4a1b/merged/run/"
        "nvidia-persistenced/socket: no such device or address: unknown"), {
        # another file the hook could not create, and the socket's path refused for another reason
        "another file": refused("nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/"
                                "4a1b/merged/usr/bin/nvidia-smi: read-only file system: unknown"),
        "another errno": refused("nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/"
                                 "4a1b/merged/run/nvidia-persistenced/socket: permission denied: unknown"),
    }),
    ("persistenced-socket-mountpoint-missing", refused(
        "FATAL:   container creation failed: mount /run/nvidia-persistenced/socket->/run/nvidia-persistenced/socket "
        "error: while mounting /run/nvidia-persistenced/socket: destination /run/nvidia-persistenced/socket doesn't "
        "exist in container"), {
        # another bind's destination, another mount point
        "another bind": refused("FATAL:   container creation failed: mount /data->/data error: while mounting /data: "
                                "destination /data doesn't exist in container"),
        "another mount point": refused("Error: mount: /mnt/scratch: mount point does not exist.\nfailed to apply "
                                       "mount from Container Device Interface for NVIDIA"),
    }),
    ("open-module-unsupported-gpu", refused(
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:15f8) installed in\nNVRM: this system is not supported by open "
        "nvidia.ko because it does not\nNVRM: include the required GPU System Processor (GSP).", phase="fingerprint"), {
        # the adapter failing alone (a BIOS BAR setting, a GPU fault), and a vGPU the open module refuses
        "RmInitAdapter alone": refused("NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)\nNVRM: GPU "
                                       "0000:01:00.0: rm_init_adapter failed, device minor number 0", phase="fingerprint"),
        "vGPU": refused("NVRM: The NVIDIA vGPU 10de:2236 is not supported by open nvidia.ko", phase="fingerprint"),
    }),
    # the thirteenth split, h13c-
    ("slurm-gres-duplicate-records", refused(
        "Feb 20 18:59:13 node2 slurmd[57977]: fatal: gres.conf duplicate records for gpu"), {
        # gres.conf's other checks, and slurmctld's count check (slurm-gres-count-lower's)
        "mixed File": refused("slurmd: fatal: gres.conf for gpu, some records have File specification while others "
                              "do not"),
        "count lower": refused("slurmctld: error: Setting node node1 state to INVAL with reason:gres/gpu count "
                               "reported lower than configured (0 < 8)"),
    }),
    ("k8s-service-account-forbidden", refused(
        'error retrieving resource lock kubeflow/mpi-operator: endpoints "mpi-operator" is forbidden: User '
        '"system:serviceaccount:kubeflow:mpi-operator" cannot get resource "endpoints" in API group "" in the '
        'namespace "kubeflow"'), {
        # a person's user, a rejected credential (401), a quota and an admission policy: not a service account's role
        "a person": refused('Error from server (Forbidden): pods is forbidden: User "alice@example.com" cannot list '
                            'resource "pods" in API group "" in the namespace "default"'),
        "unauthorized": refused("error: You must be logged in to the server (Unauthorized)\ncommand terminated with "
                                "exit code 1"),
        "quota": refused('Error from server (Forbidden): pods "train-0" is forbidden: exceeded quota: gpu-quota, '
                         'requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, limited: '
                         'requests.nvidia.com/gpu=4'),
        "admission": refused('Error from server (Forbidden): pods "train-0" is forbidden: violates PodSecurity '
                             '"restricted:latest": privileged (container "main" must not set '
                             'securityContext.privileged=true)'),
    }),
    # the thirteenth split, h13b-
    ("torch-extensions-stale-lock", make_record(status="hang", phase="startup", launcher_tail=(
        "Timeout (0:02:00)!\nFile \"/venv/lib/python3.12/site-packages/torch/utils/file_baton.py\", line 50 in wait\n"
        "File \"/venv/lib/python3.12/site-packages/torch/utils/cpp_extension.py\", line 2156 in _jit_compile")), {
        # the lock removed under the builder (another problem), the extensions root alone, another module's wait
        "release": failed('  File "/venv/lib/python3.10/site-packages/torch/utils/file_baton.py", line 49, in release\n'
                          "    os.remove(self.lock_file_path)\nFileNotFoundError: [Errno 2] No such file or directory: "
                          "'/root/.cache/torch_extensions/py310_cu118/utils/lock'", phase="startup", error_class="other"),
        "extensions root only": make_record(status="hang", phase="startup", launcher_tail=(
            "Using /root/.cache/torch_extensions/py310_cu118 as PyTorch extensions root...")),
        "threading wait": make_record(status="hang", phase="startup", launcher_tail=(
            'File "/usr/lib/python3.10/threading.py", line 320 in wait\nFile "/usr/lib/python3.10/queue.py", line 171 '
            "in get")),
        "the run passed": make_record(status="pass", launcher_tail=(
            'File "/venv/lib/python3.12/site-packages/torch/utils/file_baton.py", line 50 in wait')),
    }),
    # the thirteenth split, group h13d-
    ("cupy-nccl-submodule-not-imported", failed(
        '  File "/env/lib/python3.12/site-packages/cupy/cuda/__init__.py", line 84, in __getattr__\n'
        "    raise AttributeError(\nAttributeError: module 'cupy.cuda' has no attribute 'nccl'", phase="startup",
        error_class="other"), {
        # another lazily loaded submodule, and NCCL itself missing where the submodule is imported
        "another submodule": failed("AttributeError: module 'cupy.cuda' has no attribute 'cudnn'", phase="startup",
                                    error_class="other"),
        "no libnccl": failed("ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
                             phase="startup", error_class="import"),
    }),
    ("tf-strategy-created-after-ops", failed("RuntimeError: Collective ops must be configured at program startup",
                                             phase="startup", error_class="other"), {
        # configuring them twice with other settings is another refusal
        "already configured": failed("ValueError: Collective ops are already configured.", phase="startup",
                                     error_class="other"),
    }),
    ("stale-object-files", failed(
        "/usr/bin/ld: megatron/fused_kernels/build/scaled_masked_softmax.o: file not recognized: file format not "
        "recognized\ncollect2: error: ld returned 1 exit status", phase="startup", error_class="import"), {
        # a shared library or an archive of another architecture, a linker that ran out of memory
        "incompatible library": failed("/usr/bin/ld: skipping incompatible /opt/lib/libfoo.so when searching for "
                                       "-lfoo", phase="startup", error_class="import"),
        "a shell script as a library": failed("/usr/bin/ld:/usr/lib/libcuda.so: file format not recognized; treating "
                                              "as linker script", phase="startup", error_class="import"),
        "ld killed": failed("collect2: fatal error: ld terminated with signal 9 [Killed]", phase="startup",
                            error_class="import"),
    }),
    ("jax-distributed-init-after-backend", failed(
        "RuntimeError: jax.distributed.initialize() must be called before any JAX calls that might initialise the "
        "XLA backend. This includes any computation, but also calls to jax.devices, jax.device_put, and others.",
        phase="init", error_class="other"), {
        # initialize() called twice, and the coordinator unreachable: other causes
        "called twice": failed("RuntimeError: distributed.initialize should only be called once.", phase="init",
                               error_class="other"),
        "coordinator": failed("DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect", phase="init",
                              error_class="timeout"),
    }),
    ("horovodrun-mpirun-wrapper", refused(
        "Open MPI not found in output of mpirun --version.\nException: horovodrun convenience script does not find an "
        "installed OpenMPI.\n$ mpirun --version\nmpirun.real (OpenRTE) 4.0.1"), {
        # the same check with MPICH's or no version line: not a wrapper of Open MPI
        "MPICH": refused("Open MPI not found in output of mpirun --version.\nException: horovodrun convenience script "
                         "does not find an installed OpenMPI.\n$ mpirun --version\nHYDRA build details:\n    Version:"
                         "                                  3.3.2"),
        "no version line": refused("Open MPI not found in output of mpirun --version.\nException: horovodrun "
                                   "convenience script does not find an installed OpenMPI."),
        "a wrapper that works": refused("$ mpirun --version\nmpirun.real (OpenRTE) 4.0.1\n[1,0]<stdout>:loss 0.3"),
    }),
    ("mpi-binding-library-missing", failed(
        '  File "/src/dist_util.py", line 10, in <module>\n    from mpi4py import MPI\nImportError: libmpi.so.12: '
        "cannot open shared object file: No such file or directory", phase="startup", error_class="import"), {
        # mpirun's own loader line (mpi-libraries-not-found), and another library of the MPI stack
        "mpirun's own": refused("mpirun: error while loading shared libraries: libmpi.so.40: cannot open shared "
                                "object file: No such file or directory"),
        "libfabric": failed("ImportError: libfabric.so.1: cannot open shared object file: No such file or directory",
                            phase="startup", error_class="import"),
    }),
    # the fourteenth split, groups h14a- and h14b-
    ("deepspeed-config-precision-mismatch", failed(
        "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\n"
        "[rank0]: - ds bf16.enabled=True vs hf bf16|bf16_full_eval=False\nThe easiest method is to set these "
        "DeepSpeed config values to 'auto'.", phase="startup", error_class="other"), {
        # the batch figures in the same list, a GPU without bf16, a value left 'auto' that Accelerate cannot fill
        "batch size": failed("ValueError: Please correct the following DeepSpeed config values that mismatch "
                             "TrainingArguments values:\n- ds train_batch_size=32 vs hf train_batch_size (calculated)=4",
                             phase="startup", error_class="other"),
        "no bf16 on this GPU": failed("ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using "
                                      "Ampere GPU with cuda>=11.0", phase="startup", error_class="other"),
        "auto left": failed("ValueError: `train_micro_batch_size_per_gpu` not found in kwargs. Please specify "
                            "`train_micro_batch_size_per_gpu` without `auto`(set to correct value) in the DeepSpeed "
                            "config file or pass it in kwargs.", phase="startup", error_class="other"),
    }),
    ("accelerate-deepspeed-without-dataloader", failed(
        "    result = self._prepare_deepspeed(*args)\nValueError: When using DeepSpeed `accelerate.prepare()` requires "
        "you to pass at least one of training or evaluation dataloaders or alternatively set an integer value in "
        "`train_micro_batch_size_per_gpu` in the deepspeed config file", phase="startup", error_class="other"), {
        # the accelerate config itself missing, DeepSpeed's own batch check, a value left 'auto'
        "no config file": failed("ValueError: The passed configuration file `/root/ds.yaml` does not exist.",
                                 phase="startup", error_class="launcher"),
        "batch check": failed("AssertionError: Check batch related parameters. train_batch_size is not equal to "
                              "micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 4", phase="init",
                              error_class="other"),
        "auto left": failed("ValueError: `train_micro_batch_size_per_gpu` not found in kwargs. Please specify "
                            "`train_micro_batch_size_per_gpu` without `auto`(set to correct value) in the DeepSpeed "
                            "config file or pass it in kwargs.", phase="startup", error_class="other"),
    }),
    ("zero3-checkpoint-partitioned-weights", make_record(status="fail", phase="startup", error_class="other",
                                                          launcher_tail=(
        "$ python inspect.py zero_pp_rank_0_mp_rank_00_model_states.pt\nmodel.embed_tokens.weight : torch.Size([0])\n"
        "model.layers.0.input_layernorm.weight : torch.Size([0])")), {
        # a ZeRO-2 file with real shapes, a vocabulary resized after training, a ZeRO-3 model run outside its engine
        "ZeRO-2 shapes": make_record(status="fail", phase="startup", error_class="other", launcher_tail=(
            "zero_pp_rank_0_mp_rank_00_model_states.pt\nmodel.embed_tokens.weight : torch.Size([65024, 4096])")),
        "vocab resized": failed("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n\tsize mismatch "
                                "for lm_head.weight: copying a param with shape torch.Size([32001, 4096]) from "
                                "checkpoint, the shape in current model is torch.Size([32000, 4096]).",
                                phase="startup", error_class="other"),
        "outside the engine": failed("RuntimeError: 'weight' must be 2-D", phase="step", error_class="other"),
    }),
    # the fourteenth split, group h14c-
    ("driver-container-modules-in-use", refused(
        "Starting installation of NVIDIA driver version 460.32.03 for Linux kernel version 4.15.0-136-generic\n\n"
        "Stopping NVIDIA persistence daemon...\nUnloading NVIDIA driver kernel modules...\nCould not unload NVIDIA "
        "driver kernel modules, driver is in use", phase="startup", error_class="driver"), {
        # the driver container's other failures: no kernel headers, the kernel version unresolved, a host module
        # that does not load at all
        "no headers": refused("Installing Linux kernel headers...\nCould not resolve Linux kernel version",
                              phase="startup", error_class="driver"),
        "build failed": refused("ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently "
                                "when this kernel module was built against the wrong or improperly configured kernel "
                                "sources", phase="startup", error_class="driver"),
        "the modules unloaded": refused("Unloading NVIDIA driver kernel modules...\nUnmounting NVIDIA driver rootfs..."
                                        "\nChecking NVIDIA driver packages...", phase="startup", error_class="driver"),
    }),
    # the fifteenth split, groups h15a- and h15c-
    ("rdzv-endpoint-without-port", refused(
        "run: Running torch.distributed.run with args: ['/usr/lib/python3/torch/distributed/run.py', '--nnodes=2', "
        "'--nproc_per_node=8', '--rdzv_backend=c10d', '--rdzv_endpoint=10.1.2.3', 'train.py']"), {
        # the port given; one node only; a port in use (rendezvous-port-in-use's)
        "port given": refused("run: Running torch.distributed.run with args: ['run.py', '--nnodes=2', "
                              "'--rdzv_backend=c10d', '--rdzv_endpoint=10.1.2.3:29400', 'train.py']"),
        "one node": refused("  min_nodes        : 1\n  max_nodes        : 1\n  rdzv_endpoint    : localhost\n"),
        "port in use": failed("RuntimeError: The server socket has failed to listen on any local network address. "
                              "The server socket has failed to bind to [::]:29400 (errno: 98 - Address already in use).",
                              phase="startup", error_class="launcher"),
        "port in the config": refused("  min_nodes        : 2\n  rdzv_endpoint    : node-0.cluster:29400\n"),
    }),
    ("rendezvous-numeric-hostname", failed(
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [::ffff:0.18.214.135]:40233 (errno: 110 "
        "- Connection timed out).\n[E socket.cpp:657] [c10d] The client socket has failed to connect to any network "
        "address of (1234567, 40233).", phase="init", error_class="launcher"), {
        # a named host or a routable address that times out (a firewall: rendezvous-unreachable's); 0.0.0.0 is local
        "named host": failed("[E socket.cpp:657] [c10d] The client socket has failed to connect to any network "
                             "address of (node-0, 29500).", phase="init", error_class="launcher"),
        "routable address": failed("[W socket.cpp:601] [c10d] The client socket has failed to connect to "
                                   "10.0.0.5:29500 (errno: 110 - Connection timed out).", phase="init",
                                   error_class="launcher"),
        "all zeros": failed("[W socket.cpp:601] [c10d] The client socket has failed to connect to 0.0.0.0:29500 "
                            "(errno: 111 - Connection refused).", phase="init", error_class="launcher"),
    }),
    # the fifteenth split, group h15f-
    ("zero-offload-client-optimizer", failed(
        "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
        "(<class 'torch.optim.adamw.AdamW'>) which in most cases will yield poor performance.", phase="init",
        error_class="other"), {
        # DeepSpeed's own CPU optimizer refused (the check's bug); ZeRO's untested-optimizer refusal without offload
        "DeepSpeed's own": failed("ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
                                  "(<class 'deepspeed.ops.lion.cpu_lion.DeepSpeedCPULion'>) which in most cases will "
                                  "yield poor performance.", phase="init", error_class="other"),
        "untested optimizer": failed("AssertionError: You are using an untested ZeRO Optimizer. Please add "
                                     "<\"zero_allow_untested_optimizer\": true> in the configuration file to use it.",
                                     phase="init", error_class="other"),
    }),
    ("deepspeed-cpu-optimizer-check-bug", failed(
        "ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer (<class "
        "'deepspeed.ops.lion.cpu_lion.DeepSpeedCPULion'>) which in most cases will yield poor performance.",
        phase="init", error_class="other"), {
        # a torch optimizer, and DeepSpeed's GPU FusedAdam, which ZeRO-Offload rightly refuses
        "torch's AdamW": failed("ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
                                "(<class 'torch.optim.adamw.AdamW'>)", phase="init", error_class="other"),
        "FusedAdam": failed("ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
                            "(<class 'deepspeed.ops.adam.fused_adam.FusedAdam'>)", phase="init", error_class="other"),
    }),
    ("ddp-wrapper-attribute", failed("AttributeError: 'DistributedDataParallel' object has no attribute 'generate'",
                                     phase="step", error_class="other"), {
        # the converse (an unwrapped model asked for .module), another object's missing attribute
        "unwrapped model": failed("AttributeError: 'LlamaForCausalLM' object has no attribute 'module'", phase="step",
                                  error_class="other"),
        "a module object": failed("AttributeError: module 'torch.distributed' has no attribute 'DistributedDataParallel'",
                                  phase="startup", error_class="other"),
    }),
    ("fsdp-current-device-unset", failed("AssertionError: Expects tensor to be on the compute device cuda:1",
                                         phase="step", error_class="other"), {
        # tensors on two devices outside FSDP, FSDP's device_id that is no GPU of this rank
        "two devices": failed("RuntimeError: Expected all tensors to be on the same device, but found at least two "
                              "devices, cuda:0 and cuda:1!", phase="step", error_class="other"),
        "invalid ordinal": failed("RuntimeError: CUDA error: invalid device ordinal", phase="init", error_class="cuda"),
    }),
    ("lightning-ddp-interactive", failed(
        "MisconfigurationException: `Trainer(strategy='ddp')` is not compatible with an interactive environment. Run "
        "your code as a script, or choose one of the compatible strategies", phase="startup", error_class="launcher"), {
        # Lightning's other strategy refusals: a CPU-only machine asked for GPUs, fork after CUDA
        "no GPUs": failed("MisconfigurationException: GPUAccelerator can not run on your system since the accelerator "
                          "is not available.", phase="startup", error_class="other"),
        "fork after CUDA": failed("RuntimeError: Lightning can't create new processes if CUDA is already initialized. "
                                  "Did you manually call `torch.cuda.*` functions", phase="startup", error_class="other"),
    }),
    ("mpi-torch-rank-mismatch", failed("AssertionError: MPI world size 16 does not match torch world size 8",
                                       phase="init", error_class="launcher"), {
        # NCCL's bootstrap counting other ranks, the launcher's argument unknown to the script
        "bootstrap count": failed("NCCL WARN Bootstrap Root : mismatch in rank count from procs 6 : 3", phase="init",
                                  error_class="nccl"),
        "argparse": failed("train.py: error: unrecognized arguments: --local_rank=0", phase="startup",
                           error_class="launcher"),
    }),
    ("master-addr-localhost-resolution", failed(
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
        "assign requested address).", phase="init", error_class="launcher"), {
        # another host's refusal, and localhost with nothing listening (another errno)
        "another host": failed("[W socket.cpp:601] [c10d] The client socket has failed to connect to [node-1]:29500 "
                               "(errno: 99 - Cannot assign requested address).", phase="init", error_class="launcher"),
        "refused": failed("The client socket has failed to connect to [localhost]:29500 (errno: 111 - Connection "
                          "refused).", phase="init", error_class="launcher"),
    }),
    ("batch-not-divisible-by-world-size", failed(
        "AssertionError: only support equal chunk. Got size of DataProto 2 and chunk 4.", phase="step",
        error_class="other"), {
        # DeepSpeed's batch check, and the dataset smaller than the batch
        "DeepSpeed's batch": failed("AssertionError: Check batch related parameters. train_batch_size is not equal to "
                                    "micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 4",
                                    phase="init", error_class="other"),
        "another assertion": failed("AssertionError: only support equal shape", phase="step", error_class="other"),
    }),
    ("unsloth-multi-gpu-unsupported", failed(
        "Unsloth currently does not support multi GPU setups - but we are working on it!\nMultiple CUDA devices "
        "detected but we require a single device.", phase="startup", error_class="other"), {
        # Unsloth's warning alone, and a model spread over two GPUs without Unsloth's words
        "warning alone": failed("UserWarning: Unsloth: 'CUDA_VISIBLE_DEVICES' is currently 0", phase="startup",
                                error_class="other"),
        "cross-device": failed("RuntimeError: Expected all tensors to be on the same device, but found at least two "
                               "devices, cuda:0 and cuda:1!", phase="step", error_class="other"),
    }),
    # the fifteenth split, group h15e-
    ("enroot-path-not-writable", refused(
        "slurmstepd: error: pyxis: printing contents of log file ...\nslurmstepd: error: pyxis:     mkdir: cannot "
        "create directory '/run/enroot/user-1000': Permission denied\nslurmstepd: error: pyxis: couldn't start "
        "container"), {
        # the enroot mount of a user's data that root squashing refuses, another program's directory, a full disk
        "a mount refused": refused("slurmstepd: error: pyxis:     enroot-mount: failed to mount: /home/u/data at "
                                   "/tmp/enroot-data/user-0/pyxis_x/data: Permission denied"),
        "another directory": refused("mkdir: cannot create directory '/run/myapp': Permission denied"),
        "disk full": refused("mkdir: cannot create directory '/tmp/enroot-data/user-1000': No space left on device"),
    }),
    ("docker-runtime-flag-and-file", refused(
        "unable to configure the Docker daemon with file /etc/docker/daemon.json: the following directives are "
        "specified both as a flag and in the configuration file: runtimes: (from flag: [nvidia], from file: "
        "map[nvidia:map[path:nvidia-container-runtime runtimeArgs:[]]])"), {
        # another directive given twice (the hosts of -H fd://), daemon.json that is not JSON, an unknown runtime
        "hosts twice": refused("unable to configure the Docker daemon with file /etc/docker/daemon.json: the "
                               "following directives are specified both as a flag and in the configuration file: "
                               "hosts: (from flag: [fd://], from file: [tcp://0.0.0.0:2375])"),
        "bad json": refused("unable to configure the Docker daemon with file /etc/docker/daemon.json: invalid "
                            "character '\"' after object key:value pair"),
        "unknown runtime": refused("docker: Error response from daemon: unknown or invalid runtime name: nvidia."),
    }),
    ("wsl-container-toolkit-too-old", failed(
        "NVIDIA Driver 555.85 with WSL2 returns error 500 \"named symbol not found\" when running CUDA apps inside "
        "container", phase="startup", error_class="cuda"), {
        # the same 500 without WSL (NCCL's kernels missing from the build), WSL without a container (its libcuda
        # path), WSL with another error
        "no WSL": failed("NCCL WARN Cuda failure 500 'named symbol not found'", phase="init", error_class="cuda"),
        "no container": failed("WSL2: CUDA_ERROR_NO_DEVICE from libcuda.so, /usr/lib/wsl/lib not on the path",
                               phase="startup", error_class="cuda"),
        "another error": failed("docker run under WSL2: CUDA error: out of memory", phase="step", error_class="oom"),
    }),
    ("mig-monitor-devices-unset", refused(
        "error starting plugins: unable to add default resources to config: error visiting devices: error visiting "
        "device: error visiting device: error getting device memory info: Insufficient Permissions"), {
        # NVML refused at its initialisation (the device nodes), the MIG strategy's error, one GPU's walk failing
        # otherwise
        "NVML init refused": refused("Failed to initialize NVML: Insufficient Permissions"),
        "strategy": refused("failed to construct NVML resource managers: error building device map: MIG strategy "
                            "single: devices with different MIG profiles"),
        "another failure": refused("error visiting devices: error visiting device: error visiting device: error "
                                   "getting device memory info: Unknown Error"),
    }),
    # the fifteenth split, group h15b-
    ("no-destroy-process-group", make_record(status="hang", phase="teardown", launcher_tail=(
        "[INFO:swift] End time of running main: 2026-02-05 18:00:31.710947\n"
        "[rank0]:[W205 18:00:34.953145631 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not "
        "called before program exit, which can leak resources. For more info, please see "
        "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")), {
        # the same warning after a run that ended (pass) or crashed (a traceback, a rank's error), and after a
        # collective's timeout: the warning follows every exit that skips the call, the other failure is the cause
        "passed": make_record(status="pass", phase="teardown", launcher_tail=NO_DESTROY_WARNING),
        "crashed": failed("RuntimeError: CUDA error: an illegal memory access was encountered\n" + NO_DESTROY_WARNING,
                          phase="step", error_class="cuda"),
        "traceback in a hang": make_record(status="hang", phase="step", launcher_tail=(
            "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n" + NO_DESTROY_WARNING)),
        "watchdog first": make_record(status="hang", phase="step", launcher_tail=WATCHDOG + "\n" + NO_DESTROY_WARNING),
        # a neighbouring hang without the exit warning: barrier's device guess
        "barrier guess": make_record(status="hang", phase="init", launcher_tail=(
            "[W ProcessGroupNCCL.cpp:1569] Rank 0 using best-guess GPU 0 to perform barrier as devices used by this "
            "process are currently unknown.")),
    }),
    # the fifteenth split, group h15d-
    ("kv-transfer-no-rdma-device", failed(
        "W20250516 topology.cpp:55] No RDMA devices found, check your device installation\nI20250516 "
        "transfer_engine.cpp:127] Topology discovery complete. Found 0 HCAs.", phase="startup", error_class="other"), {
        # the engine's other RDMA failures: no GID on a NIC, no NIC left after one was disabled
        "no GID": failed("W0302 rdma_context.cpp:581] No suitable GID found on mlx5_bond_1/", phase="startup",
                         error_class="other"),
        "NIC disabled": failed("E0302 rdma_transport.cpp:662] RdmaTransport: No available RNIC", phase="startup",
                               error_class="other"),
    }),
    ("ucx-cuda-transports-missing", failed(
        "ucp_context.c:1321 UCX  WARN  transports 'cuda_ipc','cuda_copy' are not available, please use one or more "
        "of: mm, posix, self, shm, sm, sysv, tcp", phase="startup", error_class="other"), {
        # a network transport missing (no RDMA NIC in UCX_TLS's list) is not CUDA's
        "rc missing": failed("ucp_context.c:1321 UCX  WARN  transport 'rc_x' is not available, please use one or "
                             "more of: mm, posix, self, shm, sm, sysv, tcp", phase="startup", error_class="other"),
        "cuda listed": failed("UCX  WARN  transport 'ud' is not available, please use one or more of: cuda_copy, "
                              "cuda_ipc, tcp", phase="startup", error_class="other"),
    }),
    ("nixl-backend-plugin-not-found", failed(
        "E0421 nixl_agent.cpp:259] getPluginParams: backend 'UCX' not found\nE0421 nixl_agent.cpp:322] "
        "createBackend: unsupported backend 'UCX'", phase="startup", error_class="import"), {
        # the backend found but failing to start, and UCX itself without CUDA
        "backend error": failed("nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND", phase="startup",
                                error_class="other"),
        "UCX without CUDA": failed("UCX  WARN  transports 'cuda_ipc','cuda_copy' are not available", phase="startup",
                                   error_class="other"),
    }),
    ("transfer-engine-gid-not-found", failed(
        "W0302 rdma_context.cpp:581] No suitable GID found on mlx5_bond_1/\nE0302 rdma_context.cpp:81] Failed to "
        "open device mlx5_bond_1 on port  with GID -1", phase="startup", error_class="other"), {
        # a GID chosen and the device opened; NCCL's GID index forced where the port lacks it
        "GID chosen": failed("I0302 rdma_context.cpp:81] RDMA device: mlx5_bond_1, LID: 0, GID: (GID_Index 3)",
                             phase="startup", error_class="other"),
        "no RNIC alone": failed("E0302 rdma_transport.cpp:662] RdmaTransport: No available RNIC", phase="startup",
                                error_class="other"),
    }),
    ("transfer-engine-cross-rail-nic", failed(
        "Worker: Process failed for slice (opcode: 1, source_addr: 0x14c97801f040, length: 65536, local_nic: mlx5_7, "
        "peer_nic: 172.16.37.132:14127@mlx5_4, dest_rkey: 2359727, retry_cnt: 0): transport retry counter exceeded.",
        phase="step", error_class="nccl"), {
        # the same rail's NICs (a port or a rate, ib-retry-exceeded's), and another completion error across rails
        "same rail": failed("Worker: Process failed for slice (opcode: 1, local_nic: mlx5_4, peer_nic: "
                            "10.0.0.2:14127@mlx5_4, retry_cnt: 0): transport retry counter exceeded.", phase="step"),
        "another status": failed("Worker: Process failed for slice (opcode: 1, local_nic: mlx5_7, peer_nic: "
                                 "10.0.0.2:14127@mlx5_4, retry_cnt: 0): remote access error", phase="step"),
    }),
    ("spawn-main-not-guarded", failed(
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n  File "/usr/lib/python3.10/'
        'multiprocessing/spawn.py", line 236, in prepare\n    _fixup_main_from_path(data[\'init_main_from_path\'])\n'
        '  File "/usr/lib/python3.10/multiprocessing/spawn.py", line 287, in _fixup_main_from_path\n    main_content '
        '= runpy.run_path(main_path,', phase="startup", error_class="other"), {
        # a spawned child failing in its own work (after the main module was imported), and CUDA in a forked child
        "child's own error": failed('  File "/usr/lib/python3.10/multiprocessing/spawn.py", line 129, in _main\n    '
                                    "return self._bootstrap(parent_sentinel)\nRuntimeError: boom", phase="startup",
                                    error_class="other"),
        "fork": failed("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                       "multiprocessing, you must use the 'spawn' start method", phase="startup", error_class="cuda"),
    }),
    # the sixteenth split, groups h16a- and h16c-
    ("deepspeed-config-int-from-float", failed(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for DeepSpeedZeroConfig\n[rank3]: "
        "stage3_prefetch_bucket_size\n[rank3]:   Input should be a valid integer, got a number with a fractional part "
        "[type=int_from_float, input_value=15099494.4, input_type=float]", phase="startup", error_class="other"), {
        # another field refused (a wrong type, not a computed float), and accelerate's own config refusal
        "another error": failed("pydantic_core._pydantic_core.ValidationError: 1 validation error for "
                                "DeepSpeedZeroConfig\noffload_param\n  Input should be a valid dictionary "
                                "[type=dict_type, input_value='cpu', input_type=str]", phase="startup",
                                error_class="other"),
        "accelerate config": failed("ValueError: The config file at /root/.cache/huggingface/accelerate/"
                                    "default_config.yaml had unknown keys (['enable_cpu_affinity'])", phase="startup",
                                    error_class="launcher"),
    }),
    ("accelerate-config-unknown-keys", failed(
        "ValueError: The config file at C:\\Users\\u/.cache\\huggingface\\accelerate\\default_config.yaml had unknown "
        "keys (['enable_cpu_affinity']), please try upgrading your `accelerate` version or fix (and potentially remove) "
        "these keys from your config file.", phase="startup", error_class="launcher"), {
        # the config file missing, and DeepSpeed's config refusing a value
        "file missing": failed("ValueError: The passed configuration file `cfg.yaml` does not exist.",
                               phase="startup", error_class="launcher"),
        "deepspeed config": failed("1 validation error for DeepSpeedZeroConfig\nstage3_prefetch_bucket_size\n  Input "
                                   "should be a valid integer, got a number with a fractional part", phase="startup",
                                   error_class="other"),
    }),
    ("jaxlib-without-cuda", failed(
        "RuntimeError: Backend 'gpu' failed to initialize: NOT_FOUND: Could not find registered platform with name: "
        "\"cuda\". Available platform names are: Host Interpreter", phase="startup", error_class="import"), {
        # a CUDA jaxlib whose driver call failed, and JAX initialised before jax.distributed
        "CUDA jaxlib": failed("CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:90: operation "
                              "gpuDeviceGetAttribute(...) failed: CUDA_ERROR_NOT_INITIALIZED", phase="startup",
                              error_class="cuda"),
        "rocm platform": failed("Could not find registered platform with name: \"rocm\". Available platform names "
                                "are: Host Interpreter CUDA", phase="startup", error_class="import"),
    }),
    # the sixteenth split, group h16b-
    ("driver-capabilities-display-headless", refused(
        "nvidia-container-cli: mount error: stat failed: /dev/nvidia-modeset: no such file or directory\n"
        "[ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1"), {
        # the hook's other mount failures (a driver file, the device cgroup) are the toolkit's
        "a driver file": refused("nvidia-container-cli: mount error: stat failed: /usr/lib64/libnvidia-ml.so.1: "
                                 "no such file or directory"),
        "another device": refused("nvidia-container-cli: mount error: stat failed: /dev/nvidia-uvm: no such file "
                                  "or directory"),
    }),
    ("driver-libcuda-missing", refused("nvidia-container-cli: initialization error: load library failed: "
                                       "libcuda.so.1: cannot open shared object file: no such file or directory"), {
        # the hook unable to load NVML (the toolkit's or the driver root's), and WSL's libcuda path
        "NVML": refused("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
                        "cannot open shared object file: no such file or directory"),
        "WSL": failed("WSL2: libcuda reported version is: Not found: was unable to find libcuda.so DSO loaded into "
                      "this program", phase="startup", error_class="driver"),
    }),
    ("checkpoint-mp-world-size", failed("AssertionError: Loading a checkpoint for MP=1 but world size is 8",
                                        phase="prepare", error_class="other"), {
        # the same numbers (the assertion's other failure), and NCCL's bootstrap of different rank counts
        "same size": failed("AssertionError: Loading a checkpoint for MP=8 but world size is 8", phase="prepare",
                            error_class="other"),
        "bootstrap": failed("bootstrap.cc:123 NCCL WARN Bootstrap Root : mismatch in rank count from procs 8 : 4"),
    }),
    ("slurm-gres-flag-refused", refused(
        "submitit.core.utils.FailedJobError: sbatch: error: Parameter --gres=gpu:1 no longer acceptable, please "
        "switch to --gpus=1"), {
        # Slurm refusing the request itself (no GRES, wrong type), and a partition wanting a GPU count
        "invalid gres": refused("sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
                                "specification"),
        "no count": refused("sbatch: error: No gpu count given, specify --gres=gpu"),
    }),
    ("slurm-gpu-count-required", refused(
        "sbatch: error: No gpu count given, specify --gres=gpu\n             See https://www.psc.edu/bridges/user-guide"
        "\nsbatch: error: Batch job submission failed: Invalid generic resource (gres) specification"), {
        # the refusal without the site's reason, and a node configuration no node meets
        "bare refusal": refused("sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
                                "specification"),
        "node configuration": refused("sbatch: error: Batch job submission failed: Requested node configuration is "
                                      "not available"),
    }),
    ("docker-default-runtime-not-nvidia", refused(
        'fatal: [pai-worker1]: FAILED! => {"changed": false, "msg": "The following requirements are not met: The '
        'default runtime is not set correctly"}'), {
        # the runtime not registered at all, or registered and not re-read by dockerd
        "unknown runtime": refused("docker: Error response from daemon: Unknown runtime specified nvidia."),
        "another requirement": refused('FAILED! => {"msg": "The following requirements are not met: The docker '
                                       'version is too old"}'),
    }),
    # classes of cause (hints.d/95-classes-of-cause.yaml): decided by the loader's or the parser's own words,
    # whatever the library, symbol, option or program; shown only where no specific hint matched
    ("shared-library-not-found", failed("ImportError: libcudnn_ops.so.9: cannot open shared object file: No such "
                                        "file or directory", phase="startup", error_class="launcher"), {
        # NCCL's INFO line: no network plugin, the built-in transports are used
        "NCCL's plugin line": failed("x", launcher_tail="node1:12:40 [0] NCCL INFO NET/Plugin: Plugin load returned 2 "
                                     ": libnccl-net.so: cannot open shared object file: No such file or directory"),
        # a specific hint of the same line's cause is shown instead
        "libnccl, its own hint": failed("ImportError: libnccl.so.2: cannot open shared object file: No such file or "
                                        "directory", phase="startup", error_class="launcher"),
        "a file, not a library": failed("FileNotFoundError: [Errno 2] No such file or directory: 'model.bin'"),
    }),
    ("undefined-symbol-build-skew", failed("ImportError: /opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda."
                                           "cpython-311-x86_64-linux-gnu.so: undefined symbol: cudaGetDriverEntryPointByVersion",
                                           phase="startup", error_class="launcher"), {
        "a Python name": failed("NameError: name 'undefined_symbol' is not defined"),
        # torch's own ABI symbol in an extension: extension-built-for-other-torch names it
        "a torch extension, its own hint": failed(
            "ImportError: /usr/lib/python3/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
            phase="startup", error_class="launcher"),
    }),
    ("option-refused-version-skew", failed("TypeError: LlamaAttention.forward() got an unexpected keyword argument "
                                           "'position_embeddings'", phase="prepare", error_class="other"), {
        "a missing argument": failed("TypeError: forward() missing 1 required positional argument: 'x'",
                                     phase="prepare", error_class="other"),
        # the launcher's --local-rank: local-rank-argument names it
        "local rank, its own hint": failed("train.py: error: unrecognized arguments: --local-rank=0", phase="startup",
                                           error_class="launcher"),
    }),
    ("program-not-on-path", refused("/bin/sh: 1: nvcc: command not found"), {
        "a file not found": refused("cat: /etc/nccl.conf: No such file or directory"),
        "a command that ran": refused("+ nvcc --version\nCuda compilation tools, release 12.4"),
    }),
    ("import-name-version-skew", failed("ImportError: cannot import name 'is_torch_greater_or_equal' from "
                                        "'transformers.utils' (/opt/venv/lib/python3.11/site-packages/transformers/"
                                        "utils/__init__.py)", phase="startup", error_class="import"), {
        "a module not installed": failed("ModuleNotFoundError: No module named 'flash_attn'", phase="startup",
                                         error_class="import"),
        "an object's attribute": failed("AttributeError: 'NoneType' object has no attribute 'shape'"),
        # torch built without distributed: torch-without-distributed names it
        "torch without distributed, its own hint": failed("AttributeError: module 'torch.distributed' has no attribute "
                                                          "'init_process_group'", phase="init"),
    }),
    ("filesystem-full", failed("OSError: [Errno 28] No space left on device: '/tmp/torch_extensions/py311_cu124/"
                               "fused_adam/build.ninja'", phase="startup", error_class="other"), {
        "no space word": failed("OSError: [Errno 13] Permission denied: '/tmp/torch_extensions'"),
        # NCCL's own segment in /dev/shm: shm-too-small names it
        "NCCL's shm segment, its own hint": warned("include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No "
                                                   "space left on device", shm=64 * 2**20),
    }),
    # the seventeenth split, group h17b-
    ("slurm-gpus-option-unsupported", refused(
        "sbatch: error: Batch job submission failed: Requested GRES option unsupported by configured SelectType "
        "plugin"), {
        # the site refusing --gres for --gpus (the other way round), a GRES the cluster lacks, another option
        "gres refused": refused("sbatch: error: Parameter --gres=gpu:1 no longer acceptable, please switch to "
                                "--gpus=1"),
        "invalid gres": refused("sbatch: error: Batch job submission failed: Invalid generic resource (gres) "
                                "specification"),
        "another option": refused("sbatch: unrecognized option '--gpu-count=4'"),
    }),
    ("slurm-gres-core-spec-invalid", refused(
        "[2024-01-05T10:00:00.000] error: _node_config_validate: gres/gpu: invalid GRES core specification (0-7,"
        "64-71) on node gpu01"), {
        # fewer GPUs than configured, and gres.conf's duplicate records
        "count lower": refused("error: _node_config_validate: gres/gpu: Count changed on node gpu01 (0 != 8)"),
        "duplicate records": refused("slurmd: fatal: gres.conf duplicate records for gpu"),
    }),
    ("slurm-gres-device-file-missing", refused(
        "slurmd: error: Waiting for gres.conf file /dev/nvidia1\nslurmd: fatal: can't stat gres.conf file "
        "/dev/nvidia1: No such file or directory"), {
        # only waiting (the device may appear), and fewer GPUs registered than configured
        "waiting only": refused("slurmd: error: Waiting for gres.conf file /dev/nvidia0"),
        "count lower": refused("error: _node_config_validate: gres/gpu: Count changed on node gpu01 (4 != 8)"),
    }),
    ("pmix-gds-shmem-failure", refused("[node1:01234] PMIX ERROR: OUT-OF-RESOURCE in file dstore_base.c at line 2424"), {
        # PMIx's other components: munge security, a server not reachable
        "psec munge": refused("A requested component was not found, or was unable to be opened.\n  Framework: psec\n"
                              "  Component: munge"),
        "another PMIx file": refused("[node1:01234] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line 2795"),
    }),
    ("sshd-bad-modes", refused("sshd[812]: Authentication refused: bad ownership or modes for file "
                               "/home/user/.ssh/authorized_keys"), {
        # no key set up, an unreachable host, and sshd's chroot check
        "no key": refused("user@node2: Permission denied (publickey)."),
        "unreachable": refused("ssh: connect to host node2 port 22: Connection timed out"),
        "chroot": refused("fatal: bad ownership or modes for chroot directory \"/srv/jail\""),
    }),
    ("singularity-nv-driver-not-found", refused("WARNING: Could not find any nv libraries on this host!"), {
        # --nv not given at all (no warning), and the NVIDIA hook failing to load NVML in Docker
        "no --nv": failed("RuntimeError: Found no NVIDIA driver on your system.", phase="startup", error_class="driver"),
        "docker hook": refused("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
                               "cannot open shared object file: no such file or directory"),
    }),
    ("enroot-registry-host-without-hash", refused(
        "[ERROR] URL https://registry-1.docker.io/v2/nvcr.io/nvidia/pytorch/manifests/24.01-py3 returned error code: "
        "401 Unauthorized"), {
        # a Docker Hub image refused (a private repository, no login), and the '#' form answered by the registry
        "hub repository": refused("[ERROR] URL https://registry-1.docker.io/v2/myorg/private/manifests/latest returned "
                                  "error code: 401 Unauthorized"),
        "with hash": refused("[ERROR] URL https://nvcr.io/v2/nvidia/pytorch/manifests/24.01-py3 returned error code: "
                             "401 Unauthorized"),
    }),
    # the seventeenth split, group h17c-: a tensor-parallel slice of a quantized weight the kernel cannot take
    ("tp-size-not-dividing-quantized-weights", failed(
        "Assertion failed: Number of bytes for rows and cols must be a multiple of 32. However, num_rows_bytes = 8192 "
        "and num_col_bytes = 1000. (cpp/tensorrt_llm/kernels/cutlass_kernels/cutlass_preprocessors.cpp:255)",
        phase="prepare", error_class="other"), {
        # the heads not divisible: tp-size-not-dividing-heads
        "heads": failed("ValueError: Total number of attention heads (40) must be divisible by tensor parallel size "
                        "(6).", phase="prepare", error_class="other"),
        # the KV cache too small for the context: max-model-len's own hint
        "kv cache": failed("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
                           "that can be stored in KV cache (7344).", phase="prepare", error_class="oom"),
        "another alignment": failed("ValueError: hidden_size must be a multiple of 64", phase="prepare",
                                    error_class="other"),
    }),
]

# The widened and narrowed hints of the eleventh split and after, as CASES (whose order is the hints file's, one
# entry a hint): (hint id, record that shows the new signature, near misses that must not trigger it)
WIDENED = [
    ("nccl-two-libraries", refused(
        "/var/nccl-repo-2.8.3-ga-cuda10.1/libnccl-2.8.3-1+cuda10.1.x86_64.rpm\n/usr/lib64/libnccl.so.2.9.9",
        phase="init"), {
        # the package and the library of one version
        "one version": refused(
            "/var/nccl-repo-2.8.3-ga-cuda10.1/libnccl-2.8.3-1+cuda10.1.x86_64.rpm\n"
            "/var/nccl-repo-2.8.3-ga-cuda10.1/libnccl-devel-2.8.3-1+cuda10.1.x86_64.rpm\n/usr/lib64/libnccl.so.2.8.3\n"
            "/usr/lib64/libnccl.so.2", phase="init"),
    }),
    ("mpi-tcp-nonrouted-interface", refused(
        "[node2][[22157,1],4][btl_tcp_endpoint.c:626:mca_btl_tcp_endpoint_recv_connect_ack] received unexpected "
        "process identifier [[22157,1],7]", phase="startup"), {
        # PMIx's local (unix socket) client to its server: not the network
        "pmix usock": refused(
            "usock_peer_recv_connect_ack: [[22157,1],4] received unexpected process identifier ([[22157,0],0]) "
            "from server: expected ([[22157,0],1])", phase="startup"),
    }),
    ("torch-device-id-hang", make_record(
        status="hang", phase="step", torch="2.6.0", error=(
            '  File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2421, in '
            "broadcast\n    work = group.broadcast([tensor], opts)")), {
        # torch's debug wrapper found the ranks in different collectives: collective-mismatch's
        "mismatch named": make_record(status="hang", phase="step", torch="2.6.0", error=(
            '  File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2421, in '
            "broadcast\n    work = group.broadcast([tensor], opts)\nRuntimeError: Detected mismatch between "
            "collectives on ranks. Rank 3 is running collective: CollectiveFingerPrint(SequenceNumber=15, "
            "OpType=BROADCAST), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE).")),
    }),
    # the twelfth split's, group h12e-
    ("fp16-trainable-params", failed("ValueError : Attemting to unscale fp16 Gradients", phase="step",
                                     error_class="other"), {
        # a loss-scale overflow names no fp16 gradient of a trainable parameter
        "overflow": failed("Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0",
                           phase="step", error_class="other"),
    }),
    ("fsdp-mixed-requires-grad", failed("ValueError: `FlatParameter` requires uniform dtype but got torch.bfloat16 "
                                        "and torch.float32", phase="prepare", error_class="other"), {
        # torch 1.13's other FlatParameter checks
        "nesting": failed("ValueError: `FlatParameter` does not support nesting", phase="prepare",
                          error_class="other"),
        "not floating point": failed("ValueError: Cannot flatten integer dtype tensors", phase="prepare",
                                     error_class="other"),
    }),
    ("bf16-unsupported-gpu", failed("ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7",
                                    phase="startup", error_class="other", capability="7.0"), {
        # on an Ampere GPU the message means a torch before 1.7 or CUDA before 11, not the GPU
        "an Ampere GPU": failed("ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7",
                                phase="startup", error_class="other", capability="8.0"),
        "tf32 turned off": failed("UserWarning: TF32 is disabled (torch.backends.cuda.matmul.allow_tf32 = False)",
                                  phase="step", error_class="other", capability="7.0"),
    }),
    # the twelfth split's, groups h12b- and h12c-
    ("mpi-host-slots-syntax", refused(
        "here are not enough slots available in the system to satisfy the N\nslots that were requested by the "
        "application:\n\n  ./all_reduce_perf"), {
        # Open MPI refusing to bind more processes than cpus, or to find the executable: other causes
        "binding": refused("A request was made to bind to that would result in binding more\nprocesses than cpus on a "
                           "resource:"),
        "executable": refused("mpirun was unable to launch the specified application as it could not access\n"
                              "or execute an executable:"),
    }),
    ("launcher-ssh-unreachable", refused("Checking ssh on all remote hosts.\nssh not successful for host server1-0:\n"
                                         "Permission denied, please try again."), {
        "the check passed": refused("Checking ssh on all remote hosts.\nSSH was successful into all the remote hosts."),
    }),
    # the twelfth split's, group h12a-
    ("nvml-driver-mismatch", refused(
        "NVRM: this kernel module has the version 375.39.  Please\nNVRM: make sure that this kernel module and all "
        "NVIDIA driver\nNVRM: components have the same version.", phase="fingerprint", nvml=NVML_MISMATCH), {
        # the module's load banner alone, with NVML answering
        "load banner": refused("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  375.39  Tue Jan 31 20:47:00 PST 2017",
                               phase="fingerprint", nvml=NVML_DEFAULT, libcuda=HOST_LIBCUDA),
    }),
    ("nvidia-dkms-build-failed", refused(
        "MODPOST /opt/NVIDIA-Linux-x86_64-470.199.02/kernel/Module.symvers\nERROR: modpost: GPL-incompatible module "
        "nvidia.ko uses GPL-only symbol 'rcu_read_unlock_strict'", phase="fingerprint"), {
        # another out-of-tree module (GPUDirect Storage's nvidia-fs, ZFS)
        "nvidia-fs": refused("ERROR: modpost: GPL-incompatible module nvidia-fs.ko uses GPL-only symbol 'x'",
                             phase="fingerprint"),
        "zfs": refused("FATAL: modpost: GPL-incompatible module zfs.ko uses GPL-only symbol '__rcu_read_lock'",
                       phase="fingerprint"),
    }),
    ("driver-container-kernel-headers", refused(
        "Installing Linux kernel headers...\n+ dnf -q -y --releasever=8.4 install kernel-headers-4.18.0-305.el8.x86_64 "
        "kernel-devel-4.18.0-305.el8.x86_64\nError: Unable to find a match: kernel-headers-4.18.0-305.el8.x86_64"), {
        # the headers installed, the module's own build failing next; a user's dnf outside the driver container
        "build error after": refused(
            "Installing Linux kernel headers...\nInstalling Linux kernel module files...\nCompiling NVIDIA driver "
            "kernel modules...\n/usr/src/nvidia-525.60.13/nvidia/nv-mmap.c:341:9: error: too many arguments to "
            "function 'vm_insert_page'"),
        "no driver container": refused("$ sudo dnf install kernel-devel-5.14.0-1.el9.x86_64\nError: Unable to find a "
                                       "match: kernel-devel-5.14.0-1.el9.x86_64"),
    }),
    ("gpu-exclusive-process", failed(
        "Fatal CUDA Error at cuda-hybrid-api.cu:450.\n Return value 46 from 'cudaStreamCreate(&kernel_stream)'.  "
        "Exiting.", error_class="cuda", nvml={"compute_modes": ["exclusive_process"], "version_mismatch": False}), {
        # another return value (2: out of memory) in the same format
        "out of memory": failed("Fatal CUDA Error at cuda-hybrid-api.cu:450.\n Return value 2 from "
                                "'cudaMalloc(&buf, size)'.  Exiting.", error_class="oom",
                                nvml={"compute_modes": ["exclusive_process"], "version_mismatch": False}),
    }),
    ("wsl-driver-library", failed("RuntimeError: Failed to dlopen libcuda.so", error_class="driver"), {
        # no driver at all (the rank saw no GPU and no driver): no-gpu-in-container's, not a loader path
        "no driver": failed("RuntimeError: Failed to dlopen libcuda.so", error_class="driver", driver=None, gpus=()),
        # another library that cudarc could not load
        "nvrtc": failed('Unable to dynamically load the "nvrtc" shared library - searched for library names: '
                        '["nvrtc"].', error_class="import"),
    }),
    # the thirteenth split (h13a-): its fix now names an MPI hostfile without slots and jsrun's resource set; cupy's
    # wording fires it, the container hook's does not (a device the runtime could not give)
    ("rank-gpu-index-out-of-range", failed(
        "cupy.cuda.runtime.CUDARuntimeError: cudaErrorInvalidDevice: invalid device ordinal", error_class="cuda"), {
        "container hook": refused("nvidia-container-cli: device error: 3: invalid device ordinal: unknown"),
        "the run passed": make_record(status="pass", launcher_tail="CUDA error: invalid device ordinal"),
    }),
    # the thirteenth split's, group h13b-: setpci's read of the ACS Control word with ReqRedir set
    ("p2p-claimed-not-verified", make_record(status="hang", phase="step", launcher_tail=(
        "$ for b in $(lspci | grep -i plx | awk '{print $1}'); do sudo setpci -s ${b} f2a.w; done\n0000\n001d\n001d")), {
        # ACS off on every port, a write (no value read back), another register
        "ACS off": make_record(status="hang", phase="step", launcher_tail=(
            "$ sudo setpci -s 0000:40:01.1 ECAP_ACS+0x6.w\n0000")),
        "a write": make_record(status="hang", phase="step", launcher_tail=(
            "$ sudo setpci -s 0000:40:01.1 ECAP_ACS+0x6.w=0000\n$ nvidia-smi\n001d")),
        "another register": make_record(status="hang", phase="step", launcher_tail=(
            "$ sudo setpci -s 0000:40:01.1 COMMAND.w\n0007")),
    }),
    # the thirteenth split, group h13d-
    ("nccl-not-built-in", failed(
        "No OpKernel was registered to support Op 'NcclAllReduce' used by {{node NcclAllReduce}} with these attrs: "
        "[reduction=\"sum\", shared_name=\"c1\", T=DT_FLOAT, num_devices=2]\nRegistered devices: [CPU, GPU]\n"
        "Registered kernels:\n  <no registered kernels>", phase="step", error_class="import"), {
        # another op without a kernel on this device: not NCCL's
        "another op": failed("No OpKernel was registered to support Op 'CollectiveReduceV2' used by {{node x}} with "
                             "these attrs: [T=DT_FLOAT]\nRegistered devices: [CPU]", phase="step", error_class="other"),
    }),
    # the fourteenth split, groups h14a- and h14b-: DeepSpeed's MPI discovery without mpi4py (not under mpirun); vLLM's
    # own search for libnccl; transformers' list of the batch figures that disagree
    ("rank-env-unset", failed(
        '  File "/env/lib/python3.9/site-packages/deepspeed/comm/comm.py", line 677, in mpi_discovery\n'
        "    from mpi4py import MPI\nModuleNotFoundError: No module named 'mpi4py'", phase="init", error_class="import"), {
        # under mpirun the discovery is meant; the script's own mpi4py import; the discovery that worked
        "under mpirun": failed(
            "$ mpirun -np 2 python train.py\n  File \"/env/lib/python3.9/site-packages/deepspeed/comm/comm.py\", line "
            "677, in mpi_discovery\n    from mpi4py import MPI\nModuleNotFoundError: No module named 'mpi4py'",
            phase="init", error_class="import"),
        "the script's own import": failed('  File "train.py", line 3, in <module>\n    from mpi4py import MPI\n'
                                          "ModuleNotFoundError: No module named 'mpi4py'", phase="startup",
                                          error_class="import"),
        "discovered": make_record(status="fail", phase="step", launcher_tail=(
            "[INFO] [comm.py:652:init_distributed] Not using the DeepSpeed or dist launchers, attempting to detect MPI "
            "environment...\n[INFO] [comm.py:702:mpi_discovery] Discovered MPI settings of world_rank=0, local_rank=0, "
            "world_size=1, master_addr=10.0.0.1, master_port=29500")),
    }),
    ("libnccl-missing", failed("ValueError: Cannot find libnccl.so.2 in the system.", phase="startup",
                               error_class="import"), {
        # the same search for libcuda (no driver library): another cause
        "libcuda": failed("ValueError: Cannot find libcuda.so.1 in the system.", phase="startup", error_class="import"),
    }),
    ("deepspeed-batch-size-mismatch", failed(
        "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\n"
        "- ds train_batch_size=32 vs hf train_batch_size (calculated)=4\nThe easiest method is to set these DeepSpeed "
        "config values to 'auto'.", phase="startup", error_class="other"), {
        # the precision in the same list; another figure of the list
        "precision": failed("ValueError: Please correct the following DeepSpeed config values that mismatch "
                            "TrainingArguments values:\n- ds bf16.enabled=True vs hf bf16|bf16_full_eval=False",
                            phase="startup", error_class="other"),
        "gradient clipping": failed("ValueError: Please correct the following DeepSpeed config values that mismatch "
                                    "TrainingArguments values:\n- ds gradient_clipping=1.0 vs hf max_grad_norm=0.3",
                                    phase="startup", error_class="other"),
    }),
    # the fourteenth split, group h14c-: modprobe's Secure Boot refusals (the fix names Secure Boot, mokutil --sb-state)
    ("driver-module-not-loaded", refused(
        "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service", phase="startup",
        error_class="driver"), {
        # another module's refusal, and the module that loads but another driver owns the GPU
        "another module": refused("modprobe: ERROR: could not insert 'vboxdrv': Key was rejected by service",
                                  phase="startup", error_class="driver"),
        "nouveau owns it": refused("NVRM: The NVIDIA probe routine was not called for 1 device(s).", phase="startup",
                                   error_class="driver"),
    }),
    # a CDI spec's driver library that a driver upgrade replaced: crun's words, and the versioned file "not found" under podman
    ("cdi-spec-stale", refused(
        "Error: crun: cannot stat `/lib64/libEGL_nvidia.so.550.54.14`: No such file or directory: OCI runtime "
        "attempted to invoke a command that was not found"), {
        # another file of the spec (a user's volume), the legacy hook's stat, a library without its full version
        "a user's file": refused("Error: crun: cannot stat `/data/models`: No such file or directory"),
        "the legacy hook": refused("nvidia-container-cli: mount error: stat failed: /usr/lib/x86_64-linux-gnu/"
                                   "libnvidia-ml.so.450.80.02: no such file or directory"),
        "no podman": refused("libnvidia-egl-wayland.so.1.1.13 not found"),
        "soname only": refused("libnvidia-ml.so.1 not found, podman 5.2.2"),
    }),
    ("cdi-spec-stale", refused("libnvidia-egl-wayland.so.1.1.13 not found, podman 5.2.2 update"), {}),
    # the open module's GSP refusal as the kernel wraps it, each line behind "NVRM: " and a dmesg time
    ("open-module-unsupported-gpu", refused(
        "kernel: NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)\n             NVRM: installed in this system "
        "is not supported by open\n             NVRM: nvidia.ko because it does not include the required GPU\n     "
        "        NVRM: System Processor (GSP).", phase="fingerprint"), {
        "vGPU": refused("[ 4.1] NVRM: The NVIDIA vGPU 10de:2236 is not supported by open\n[ 4.1] NVRM: nvidia.ko.",
                        phase="fingerprint"),
        "probe failed alone": refused("kernel: nvidia 0000:09:00.0: probe with driver nvidia failed with error -1\n"
                                      "kernel: NVRM: None of the NVIDIA devices were initialized.", phase="fingerprint"),
    }),
    # 802 by its number at CUDA's initialisation
    ("fabric-manager-not-running", failed("CUDA initialization fails with 802 system error", phase="startup"), {
        "another number": failed("CUDA initialization fails with 804 system error", phase="startup"),
        "a version": failed("CUDA initialization failed: driver 535.802 too old", phase="startup"),
        "a source line": failed("CUDA init failed at enqueue.cc:802", phase="startup"),
        "a line number": failed("CUDA initialization failed at line 802 of init.py", phase="startup"),
    }),
    # the hook's query of the device filters cut right after the call (a title); another errno is the kernel's
    ("toolkit-cgroups-not-writable", refused(
        "nvidia-container-cli: mount error: failed to add device rules.... bpf_prog_query(BPF_CGROUP_DEVICE)"), {
        "another errno": refused("nvidia-container-cli: mount error: failed to add device rules: unable to find any "
                                 "existing device filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) "
                                 "failed: invalid argument: unknown."),
    }),
    # and the mount-error hint is silent where that query was refused, cut or whole
    ("container-cli-mount-error", refused(
        "nvidia-container-cli: mount error: failed to add device rules: unable to replace original device filters "
        "program with new one: failed to call BPF_PROG_ATTACH (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI): can't attach "
        "program: invalid argument: unknown"), {
        "the query cut": refused(
            "nvidia-container-cli: mount error: failed to add device rules.... bpf_prog_query(BPF_CGROUP_DEVICE)"),
    }),
    # the fifteenth split, groups h15a- and h15c-: torch.distributed.run's launch configs ("rdzv_endpoint : host"
    # under "min_nodes : 2"), as the args list
    ("rdzv-endpoint-without-port", refused(
        "  min_nodes        : 2\n  max_nodes        : 4\n  nproc_per_node   : 8\n  rdzv_backend     : c10d\n"
        "  rdzv_endpoint    : node-0.cluster\n  rdzv_configs     : {'timeout': 900}\n"), {}),
    # the fifteenth split, groups h15a- and h15c-: a rank that fell back to /dev/shm attaching to a peer's cuMem
    # handle as a segment with no name and size 0 (and shm-too-small silent there, however small /dev/shm is);
    # Open MPI's "not built with SLURM's PMI support" as quoted without its "was"
    ("nccl-cumem-host-numa", failed(
        "misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: "
        "No such file or directory (2)\nNCCL INFO transport/shm.cc:634 -> 2", error_class="shm"), {
        # a named segment that a full /dev/shm could not grow (shm-too-small's)
        "a named segment": failed("misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment "
                                  "/dev/shm/nccl-A1b2C3 (size 9637888), error: No space left on device (28)",
                                  error_class="shm"),
    }),
    ("shm-too-small", make_record(status="fail", phase="init", error_class="shm", shm=64 * MiB, error=(
        "misc/shmutils.cc:60 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-A1b2C3 (size 9637888), "
        "error: No space left on device (28)")), {
        "a peer's cuMem handle": make_record(status="fail", phase="init", error_class="shm", shm=64 * MiB, error=(
            "misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), "
            "error: No such file or directory (2)")),
    }),
    ("ompi-without-slurm-pmi", refused(
        "$ srun -N 4 -n 4 ./hello\n# fails with: OMPI not build with SLURM's PMI support and therefore cannot execute"), {
        # the PMIx server missing under a foreign mpiexec, and a PMIx/munge mismatch: other causes
        "no PMIx server": refused("OPAL ERROR: Unreachable in file pmix3x_client.c at line 112\n*** An error occurred "
                                  "in MPI_Init_thread"),
    }),
    # the fifteenth split, group h15e-: the persistenced socket's mount point under enroot's hook (libnvidia-container
    # before 1.12.0), and the host-/run hint silent there
    ("persistenced-socket-mountpoint-missing", refused(
        "nvidia-container-cli: mount error: file creation failed: /raid/enroot-data/user-1000/pyxis_1.0/run/nvidia-"
        "persistenced/socket: no such device or address\n[ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return "
        "code 1"), {
        "docker's hook": refused("stderr: nvidia-container-cli: mount error: file creation failed: /var/lib/docker/"
                                 "overlay2/abc/merged/run/nvidia-persistenced/socket: no such device or address: "
                                 "unknown"),
        "another enroot mount": refused("nvidia-container-cli: mount error: file creation failed: /tmp/enroot-data/"
                                        "user-1000/c/dev/nvidia-uvm-tools: operation not permitted\n[ERROR] /etc/enroot/"
                                        "hooks.d/98-nvidia.sh exited with return code 1"),
    }),
    ("persistenced-socket-under-host-run", refused(
        "stderr: nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/abc/merged/run/"
        "nvidia-persistenced/socket: no such device or address: unknown"), {
        "enroot's hook": refused("nvidia-container-cli: mount error: file creation failed: /raid/enroot-data/user-1000/"
                                 "pyxis_1.0/run/nvidia-persistenced/socket: no such device or address\n[ERROR] /etc/"
                                 "enroot/hooks.d/98-nvidia.sh exited with return code 1"),
    }),
    # the driver API's bare CUDA_ERROR_UNKNOWN (a title) is not a GPU fault; a call past cuInit returning it may be
    ("gpu-lost-hardware-fault", failed(
        "E cuda_driver.cc:1064] failed to synchronize the stop event: CUDA_ERROR_UNKNOWN: unknown error\n"
        "cuCtxSynchronize returned CUDA_ERROR_UNKNOWN", phase="step", error_class="cuda"), {
        "the name alone": failed("'CUDA_ERROR_UNKNOWN' error using DeepVariant GPU version.", phase="startup",
                                 error_class="cuda"),
        "at cuInit": failed("failed call to cuInit: CUDA_ERROR_UNKNOWN: unknown error", phase="startup",
                            error_class="cuda"),
    }),
    # the runtime hook without nvidia-container-cli (libnvidia-container-tools missing), both wordings
    ("container-gpu-runtime-missing", refused(
        "nvidia-container-runtime-hook: couldn't find binary nvidia-container-cli in /usr/local/sbin:/usr/local/bin:"
        "/usr/sbin:/usr/bin:/sbin:/bin : exec: \"nvidia-container-cli\": executable file not found in $PATH"), {
        "another binary": refused("couldn't find binary ldconfig.real"),
        "the cli's own failure": refused("nvidia-container-cli: initialization error: driver rpc error: timed out"),
    }),
    ("container-gpu-runtime-missing", refused("couldn't find binary nvidia-container-cli: exec: \"nvidia-container-cli\":"
                                              " executable file not found in $PATH"), {}),
    # the new hint's other signature: the library the old toolkit does not mount, named
    ("wsl-container-toolkit-too-old", failed(
        "docker run --gpus all: libnvdxgdmal.so.1: cannot open shared object file: No such file or directory",
        phase="startup", error_class="import"), {}),
    # the NGC images' banner of a container started without its GPUs
    ("no-gpu-in-container", failed(
        "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n   Use the NVIDIA "
        "Container Toolkit to start this container with GPU support; see\n   https://docs.nvidia.com/datacenter/"
        "cloud-native/ .", phase="startup", error_class="driver"), {
        # the banner of a driver found but too old for the image (the NGC check), and the hook's own failure
        "driver too old": failed("ERROR: This container was built for NVIDIA Driver Release 525.85 or later, but\n"
                                 "       version 470.82 was detected and compatibility mode is UNAVAILABLE.",
                                 phase="startup", error_class="driver"),
        "the hook failed": refused("nvidia-container-cli: initialization error: nvml error: driver not loaded\n"
                                   "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be "
                                   "available."),
    }),
    # the fifteenth split, group h15b-: the new no-destroy-process-group hint on torch 2.4's wording of the warning
    ("no-destroy-process-group", make_record(status="hang", phase="teardown", launcher_tail=(
        "[rank0]:[W1007 09:55:53.400347903 ProcessGroupNCCL.cpp:1253] Warning: WARNING: process group has NOT been "
        "destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call "
        "destroy_process_group to ensure that any pending NCCL operations have finished in this process.")), {
        # the same wording after a rank's error
        "crashed": make_record(status="hang", phase="step", launcher_tail=(
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n"
            "[rank0]:[W1007 09:55:53.400347903 ProcessGroupNCCL.cpp:1253] Warning: WARNING: process group has NOT "
            "been destroyed before we destruct ProcessGroupNCCL.")),
    }),
    # the fifteenth split, group h15d-: spawn-main-not-guarded's other wording, Python's own refusal in the child
    ("spawn-main-not-guarded", failed(
        "RuntimeError:\n        An attempt has been made to start a new process before the\n        current process "
        "has finished its bootstrapping phase.", phase="startup", error_class="other"), {}),
    # the fifteenth split, group h15d-: narrowed. The retry counter between NICs of different indices is the
    # transfer engine's cross-rail pair (transfer-engine-cross-rail-nic), not a port or a rate
    ("ib-retry-exceeded", failed("FATAL: send completion with error: transport retry counter exceeded",
                                 phase="step"), {
        "across rails": failed("Worker: Process failed for slice (opcode: 1, local_nic: mlx5_7, peer_nic: "
                               "10.0.0.2:14127@mlx5_4, retry_cnt: 0): transport retry counter exceeded.", phase="step"),
    }),
    # NVSHMEM's UID bootstrap in NCCL's words is not NCCL's bug
    ("nccl-version-bug", failed("NCCL version 2.19.3+cuda12.3\nbootstrap.cc:77 NCCL WARN Message truncated : "
                                "received 256 bytes instead of 4", phase="init", nccl_loaded="2.19.3"), {
        "NVSHMEM's bootstrap": failed("NCCL version 2.19.3+cuda12.3\n/nvshmem_src/src/modules/bootstrap/uid/"
                                      "bootstrap_uid.cpp:bootstrap_net_recv:99: Message truncated : received 36 bytes "
                                      "instead of 1", phase="init", nccl_loaded="2.19.3"),
    }),
    # the OOM hints that say this process held the memory need the allocator's figures; a bare title is silent
    ("gpu-memory-too-small", failed(
        "RuntimeError: CUDA out of memory. Tried to allocate 450.00 MiB (GPU 0; 10.73 GiB total capacity; 9.23 GiB "
        "already allocated; 7.75 MiB free; 542.02 MiB cached)", phase="step", error_class="oom"), {
        "a bare title": failed("CUDA out of memory", phase="step", error_class="oom"),
    }),
    ("ddp-prepare-oom", failed(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 28.77 GiB. GPU 2 has a total capacity of "
        "39.39 GiB of which 7.31 GiB is free. Of the allocated memory 29.76 GiB is allocated by PyTorch, and 1.64 GiB "
        "is reserved by PyTorch but unallocated.", phase="prepare", error_class="oom"), {
        "a bare title": failed("CUDA out of memory", phase="prepare", error_class="oom"),
    }),
    # the sixteenth split: FSDP's dtype message quoted without backticks; vLLM's sleep-mode allocator out of memory
    # with no stage shown (a title), not while loading the weights
    ("fsdp-mixed-requires-grad", failed("ValueError: FlatParameter requires uniform dtype but got torch.float16 and "
                                        "torch.float32", phase="prepare", error_class="other"), {
        "FSDP's device check": failed("ValueError: Inconsistent compute device and `device_id` on rank 1: cuda:0 vs "
                                      "cuda:1", phase="prepare", error_class="other"),
    }),
    ("vllm-wake-up-oom", failed("cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp:62", phase="step",
                                error_class="oom"), {
        "loading the weights": failed('  File "vllm/worker/model_runner.py", line 1112, in load_model\n    self.model '
                                      '= get_model(vllm_config=self.vllm_config)\nCUDA Error: out of memory at '
                                      '/workspace/csrc/cumem_allocator.cpp:62', phase="startup", error_class="oom"),
        "torch's allocator": failed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                                    phase="step", error_class="oom"),
    }),
    # the sixteenth split, group h16b-: the container's runtime unable to exec nvidia-smi (no driver injected)
    ("no-gpu-in-container", refused(
        'docker: Error response from daemon: oci runtime error: container_linux.go:262: starting container process '
        'caused "exec: \\"nvidia-smi\\": executable file not found in $PATH".'), {
        # another program missing from the image is the image's
        "another program": refused('docker: Error response from daemon: OCI runtime create failed: '
                                   'container_linux.go:345: starting container process caused "exec: \\"python\\": '
                                   'executable file not found in $PATH": unknown.'),
    }),
    # narrowed: the hook unable to load the host's libcuda is the driver's install (driver-libcuda-missing)
    ("container-gpu-runtime-missing", refused(
        "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
        "object file: no such file or directory"), {
        "libcuda": refused("nvidia-container-cli: initialization error: load library failed: libcuda.so.1"),
    }),
    # narrowed: /dev/nvidia-modeset absent is the display capability on a headless node
    ("container-cli-mount-error", refused("nvidia-container-cli: mount error: stat failed: /GeForce: no such file "
                                          "or directory"), {
        "modeset": refused("nvidia-container-cli: mount error: stat failed: /dev/nvidia-modeset: no such file or "
                           "directory"),
    }),
    # narrowed: the site's filter saying no GPU count was given is slurm-gpu-count-required
    ("slurm-invalid-gres", refused("sbatch: error: Batch job submission failed: Invalid Trackable RESource (TRES) "
                                   "specification"), {
        "no count": refused("sbatch: error: No gpu count given, specify --gres=gpu\nsbatch: error: Batch job "
                            "submission failed: Invalid generic resource (gres) specification"),
    }),
    # the seventeenth split, group h17b-: nvidia-container-cli unable to load its own library
    ("container-gpu-runtime-missing", refused(
        "/usr/bin/nvidia-container-cli: error while loading shared libraries: libnvidia-container.so.1: cannot open "
        "shared object file: No such file or directory"), {
        # another program's library missing is not the toolkit's
        "another program": refused("/usr/bin/mpirun: error while loading shared libraries: libopen-rte.so.40: cannot "
                                   "open shared object file: No such file or directory"),
    }),
    # slurm-gpus-option-unsupported's second wording: a Slurm older than 19.05 (its getopt) not knowing --gpus*
    ("slurm-gpus-option-unsupported", refused("sbatch: unrecognized option '--gpus-per-node=4'"), {
        "a script's own option": refused("train.py: error: unrecognized arguments: --gpus=4"),
    }),
    # libibverbs present, its provider for the HCA missing
    ("ibverbs-missing", refused(
        "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs1\n"
        "node1: Test NCCL failure common.cu:775 'internal error'"), {
        # libibverbs' other warnings (fork support, memlock) are not a missing provider
        "memlock": refused("libibverbs: Warning: RLIMIT_MEMLOCK is 65536 bytes.\n    This will severely limit memory "
                           "registrations."),
    }),
    # the seventeenth split, group h17a-: DeepSpeed's runner checking the first host with ssh, the traceback
    # through its check_call, or its RuntimeError
    ("launcher-ssh-unreachable", refused(
        '  File "/usr/local/lib/python3.10/dist-packages/deepspeed/launcher/runner.py", line 470, in main\n'
        "    subprocess.check_call(safe_ssh_cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
        '  File "/usr/lib/python3.10/subprocess.py", line 369, in check_call\n'
        "    raise CalledProcessError(retcode, cmd)"), {
        # another command the runner runs failing is not the ssh check
        "another check_call": refused(
            '  File "/usr/local/lib/python3.10/dist-packages/deepspeed/launcher/runner.py", line 600, in main\n'
            "    subprocess.check_call(cmd)\n"
            "subprocess.CalledProcessError: Command '['pdsh', '-w', 'node1']' returned non-zero exit status 1."),
        "reachable": refused("[INFO] [runner.py:555:main] cmd = pdsh -S -f 1024 -w node1,node2 export NCCL_DEBUG=INFO"),
    }),
    ("launcher-ssh-unreachable", refused(
        "RuntimeError: Using hostfile at /job/hostfile but host=worker-1 was not reachable via ssh. If you are running "
        "with a single node please remove /job/hostfile or setup passwordless ssh."), {
        "reachable by ping": refused("PING worker-1 (10.0.1.13) 56(84) bytes of data."),
    }),
    # the seventeenth split, group h17a-: the fix names a framework indexing by the physical CUDA_VISIBLE_DEVICES id
    ("rank-gpu-index-out-of-range", failed("cuda runtime error (101) : invalid device ordinal", phase="init",
                                           error_class="cuda"), {
        "another CUDA error": failed("cuda runtime error (98) : invalid device function", phase="step",
                                     error_class="cuda"),
    }),
    # the seventeenth split, group h17c-: vLLM's (SGLang's) wording of the same quantized slice
    ("tp-size-not-dividing-quantized-weights", failed(
        "ValueError: The input size is not aligned with the quantized weight shape. This can be caused by too large "
        "tensor parallel size.", phase="prepare", error_class="other"), {
        "heads": failed("ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 40 and "
                        "`num_shards`: 6", phase="prepare", error_class="other"),
    }),
]


def test_nccl_coll_lines_of_one_call_that_differ_between_ranks_are_a_mismatch():
    """NCCL_DEBUG_SUBSYS=COLL: rank 0 posts opCount 0 with another count and datatype than rank 1 (NVIDIA/nccl#147)."""
    assert "collective-mismatch" in ids(coll_hang((100, 0, 25503912, 6), (101, 0, 53, 4)))


@pytest.mark.parametrize("hint_id,record", [(c[0], c[1]) for c in CASES + WIDENED],
                         ids=[c[0] for c in CASES + WIDENED])
def test_each_hint_fires_on_its_signature(hint_id, record):
    assert hint_id in ids(record)


@pytest.mark.parametrize("hint_id,why,record",
                         [(c[0], why, rec) for c in CASES + WIDENED for why, rec in c[2].items()],
                         ids=[f"{c[0]}-{why}" for c in CASES + WIDENED for why in c[2]])
def test_near_miss_does_not_fire(hint_id, why, record):
    assert hint_id not in ids(record), why


def test_rays_measure_of_dev_shm_beside_an_nccl_failure_names_the_shm_size():
    """Ray's start-up warning says how much /dev/shm there is (vllm#1710: vLLM's NCCL then failed to open its
    segment): beside NCCL's bare system error it names /dev/shm, certain where the size was measured small."""
    record = shm_fail(error_class="nccl", error="ncclSystemError: System call (e.g. socket, malloc) or external "
                                                "library call failed or device error.", launcher_tail=RAY_SHM)
    assert "shm-too-small" in ids(record)
    assert "shm-too-small" not in ids(shm_fail(error_class="nccl", error="ncclSystemError: System call (e.g. socket, "
                                               "malloc) or external library call failed or device error."))


def test_an_oversized_nccl_buffsize_is_a_registration_failure_whatever_the_memlock_limit():
    """Registering NCCL's buffers with the NIC fails for lack of memory where memlock is unlimited but
    NCCL_BUFFSIZE is far above its default (it is per channel and per peer); with neither, nothing."""
    big = memlock_fail(memlock="unlimited", variant_env={"NCCL_BUFFSIZE": str(1 << 30)})
    assert [m.certain for m in match(big) if m.hint.id == "memlock-too-low"] == [True]
    assert "memlock-too-low" not in ids(memlock_fail(memlock="unlimited", variant_env={"NCCL_DEBUG": "INFO"}))


def test_a_rank_the_kernel_killed_is_named_by_its_signal_not_by_any_message():
    """outcome.classify's own words for a rank that died by a signal without an error: SIGKILL (what the
    OOM killer sends) gets the host-memory hint; another signal does not."""
    def died(sig: str) -> dict:
        return make_record(status="fail", phase="step", error_class="killed",
                           reason=f"rank 1 died in step ({sig}) without an error")
    assert "host-oom-killed" in ids(died("SIGKILL"))
    assert "host-oom-killed" not in ids(died("SIGSEGV"))


def test_every_hint_in_the_data_file_is_tested():
    cases = [c[0] for c in CASES]
    assert sorted(r.hint.id for r in load()) == sorted(cases) and len(set(cases)) == len(cases)


def test_hints_come_in_file_order_and_serialise():
    # a broken 4090 pair hanging in prepare on an old driver under accelerate: three hints at once
    record = rtx_hang(launcher="accelerate", peer_access=PEERS_BROKEN,
                      changed={"NCCL_IB_DISABLE": {"expected": None, "actual": "1"}})
    assert ids(record) == ["rtx40-p2p-hang", "p2p-claimed-not-verified", "accelerate-launcher-changed-env"]
    first = match(record)[0].hint
    assert isinstance(first, Hint)
    assert first.to_json() == {"id": first.id, "title": first.title, "explanation": first.explanation,
                               "link": first.link, "fix": first.fix, "evidence": list(first.evidence)}
    json.dumps([m.to_json() for m in match(record)])


def test_launcher_setting_p2p_disable_hides_the_p2p_hang_hint():
    """Accelerate disabled P2P, so a hang is not the P2P hang: only the launcher hint applies."""
    record = accel_changed(status="hang", phase="prepare", driver="545.29.06", launcher="accelerate",
                           rank_env={"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"})
    assert ids(record) == ["accelerate-launcher-changed-env"]


def test_versions_ignore_the_local_part():
    f = facts(make_record(torch="2.7.0+cu126", nccl_loaded="2.26.4+cuda12.8"))
    assert str(f.versions["torch"]) == "2.7.0"
    assert str(f.versions["nccl_loaded"]) == "2.26.4"


def test_loaded_nccl_falls_back_to_the_nccl_log_then_the_cell():
    record = numa_fail()
    del record["attempts"][0]["raw"]["phases"]["fingerprint"]["fingerprint"]["nccl_loaded"]
    assert str(facts(record).versions["nccl_loaded"]) == "2.25.1"  # from the NCCL log
    record["attempts"][0]["raw"]["nccl"] = {}
    record["cell"]["nccl"] = "2.24.3"
    assert str(facts(record).versions["nccl_loaded"]) == "2.24.3"  # what the cell asked for
    record["cell"]["nccl"] = "bundled"
    assert facts(record).versions["nccl_loaded"] is None
    assert "nccl-cumem-host-numa" not in ids(record)


def test_text_is_searched_in_launcher_tail_and_forensics():
    tail = make_record(status="fail", phase="startup", launcher_tail="RuntimeError: CUDA error: invalid device ordinal")
    assert "rank-gpu-index-out-of-range" in ids(tail)
    hung = make_record(status="hang", phase="init")
    hung["attempts"][0]["raw"]["forensics"] = {"nccl_tail": {"1": "init.cc:497 NCCL WARN Duplicate GPU detected"}}
    assert "two-ranks-one-gpu" in ids(hung)


def test_the_real_h200_record_matches_nothing():
    record = json.loads((DATA / "h200-preload-record.json").read_text())
    assert match(record) == []


def _build_error(reason: str = "pip failed: exit status 1") -> dict:
    return {"schema": 1, "cell": {"cuda": "12.4.1", "torch": "2.6.0", "accelerate": "1.2.1", "nccl": "2.25.1",
                                  "launcher": "accelerate", "id": "x"},
            "env": {}, "outcome": {"status": "build-error", "reason": reason}}


@pytest.mark.parametrize("record", [
    {}, None, [], "record", {"attempts": []}, {"attempts": None}, {"attempts": [None]}, {"attempts": [{"raw": None}]},
    _build_error(),
    {"outcome": "hang", "cell": [], "env": "NCCL_P2P_DISABLE=1", "attempts": [{"raw": {"phases": {"fingerprint": []}}}]},
    {"attempts": [{"raw": {"ranks": {"0": None, "1": {"error": "boom"}}, "nccl": {"0": {"warnings": "x", "env": []}},
                           "forensics": {"nccl_tail": []}, "launcher_tail": None,
                           "phases": {"fingerprint": {"fingerprint": {
                               "gpus": {"error": "NVMLError"}, "driver": "550", "shm": {"error": "x"},
                               "memlock": {"soft": "lots"}, "peer_access": {"error": "x"}, "device_count": "2",
                               "nccl_env_changed": {"NCCL_P2P_DISABLE": "1"}, "torch": None, "nccl_loaded": 22803}}}}}]},
], ids=["empty", "none", "list", "str", "no-attempts", "attempts-none", "attempt-none", "raw-none",
        "build-error", "wrong-types", "garbage-fingerprint"])
def test_partial_records_match_nothing_and_never_raise(record):
    assert match(record) == []


def test_a_build_error_of_a_full_disk_gets_the_full_filesystem_hint():
    """A build-error cell has no attempt, only its reason: that is enough for a class of cause."""
    assert ids(_build_error("pip failed: No space left on device")) == ["filesystem-full"]


def test_a_partial_record_still_gets_what_it_shows():
    """No fingerprint (hung before it was written), but the error text and outcome are there."""
    record = make_record(status="fail", phase="init", error="Duplicate GPU detected : rank 1 and rank 0")
    del record["attempts"][0]["raw"]["phases"]
    assert ids(record) == ["two-ranks-one-gpu"]


# ---------------------------------------------------------------- the data file itself
def test_packaged_file_links_are_public_https_pages():
    allowed = ("https://github.com/NVIDIA/nccl/", "https://github.com/huggingface/accelerate/",
               "https://github.com/pytorch/pytorch/", "https://docs.nvidia.com/deeplearning/nccl/")
    threads = {e["id"]: e["url"] for e in yaml.safe_load((DATA / "real_failures.yaml").read_text())}
    rules = load()
    assert len(rules) >= 8
    for rule in rules:
        # upstream, or the public thread of one of the failure logs it is built from (the fix confirmed there)
        cited = {threads.get(e) for e in rule.hint.evidence}
        assert rule.hint.link.startswith(allowed) or rule.hint.link in cited, rule.hint.link
        assert rule.hint.explanation.count(". ") <= 2, rule.hint.id  # one or two sentences (plus a clause)


GOOD = {"id": "demo", "title": "Demo", "explanation": "What happened. The fix.",
        "link": "https://github.com/NVIDIA/nccl/issues/418", "when": {"status": ["hang"]}}


def write(tmp_path: Path, *entries: dict, raw: str | None = None) -> Path:
    import yaml

    path = tmp_path / "hints.yaml"
    path.write_text(raw if raw is not None else yaml.safe_dump({"hints": list(entries)}))
    return path


def with_(**changes: Any) -> dict:
    entry = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is None:
            entry.pop(key)
        else:
            entry[key] = value
    return entry


def test_a_good_file_loads_and_matches(tmp_path):
    rules = load(write(tmp_path, GOOD))
    assert [m.hint.id for m in match(make_record(status="hang", phase="init"), rules)] == ["demo"]
    assert match(make_record(status="pass"), rules) == []


@pytest.mark.parametrize("entry,words", [
    (with_(when={"status": ["hang"], "gpu_names": "RTX"}), ["demo", "gpu_names"]),
    (with_(when={"any": [{"stauts": ["hang"]}]}), ["demo", "stauts"]),
    (with_(explanation=None), ["demo", "explanation"]),
    (with_(explanation="  "), ["demo", "explanation"]),
    (with_(title=None), ["demo", "title"]),
    (with_(link="http://example.com"), ["demo", "link"]),
    (with_(when=None), ["demo", "when"]),
    (with_(when={}), ["demo", "when"]),
    (with_(severity="high"), ["demo", "severity"]),
    (with_(when={"status": ["hung"]}), ["demo", "status", "hung"]),
    (with_(when={"status": "hang"}), ["demo", "status"]),
    (with_(when={"error_class": ["network"]}), ["demo", "error_class"]),
    (with_(when={"phase": ["prepair"]}), ["demo", "phase"]),
    (with_(when={"torch": {"min": 2.10}}), ["demo", "torch", "quoted"]),
    (with_(when={"torch": {"from": "2.6"}}), ["demo", "torch"]),
    (with_(when={"torch": {"min": "2.7", "max": "2.6"}}), ["demo", "torch"]),
    (with_(when={"nccl_loaded": {"max": "two"}}), ["demo", "nccl_loaded"]),
    (with_(when={"driver_below": 550}), ["demo", "driver_below", "quoted"]),
    (with_(when={"shm_below": "512M"}), ["demo", "shm_below"]),
    (with_(when={"gpu_count_min": True}), ["demo", "gpu_count_min"]),
    (with_(when={"text": "("}), ["demo", "text"]),
    (with_(when={"peer_unverified": "yes"}), ["demo", "peer_unverified"]),
    (with_(when={"any": []}), ["demo", "any"]),
    (with_(id="Demo Hint"), ["id"]),
])
def test_malformed_data_file_names_hint_and_key(tmp_path, entry, words):
    with pytest.raises(HintsError) as info:
        load(write(tmp_path, entry))
    for word in words:
        assert word in str(info.value)


def test_duplicate_ids_and_bad_shapes_are_refused(tmp_path):
    with pytest.raises(HintsError, match=r"demo.*twice"):
        load(write(tmp_path, GOOD, GOOD))
    with pytest.raises(HintsError, match="hints"):
        load(write(tmp_path, raw="- id: demo\n"))
    with pytest.raises(HintsError, match="YAML"):
        load(write(tmp_path, raw="hints: [\n"))
    with pytest.raises(HintsError, match="#1"):
        load(write(tmp_path, raw="hints: [just-a-string]\n"))


def test_default_rules_are_the_packaged_folder_file_after_file():
    files = hintsfile.files(hints.PACKAGED)
    assert len(files) >= 10
    assert [r.hint for r in load()] == [r.hint for r in hints._default_rules()]
    assert [r.hint.id for r in load()] == [r.hint.id for f in files for r in load(f)]


def test_each_packaged_hints_file_keeps_room_under_the_parsers_bound():
    """The knowledge base grows by files (one per subsystem), each bounded by yamlfile on its own: a file
    past half the bound is the signal to split it, before a fold fills it."""
    from harness import yamlfile

    sizes = {f.name: f.stat().st_size for f in hintsfile.files(hints.PACKAGED)}
    assert sizes and {name: size for name, size in sizes.items() if size > yamlfile.MAX_BYTES // 2} == {}


def test_the_schema_has_every_condition():
    assert set(hints.Conditions.model_fields) == {*hints.CONDITIONS, "any"}


# ---------------------------------------------------------------- a site's own file, checked at start
SITE = """hints:
  - id: demo
    title: Demo hint of this site
    explanation: What happened. The fix.
    link: https://github.com/NVIDIA/nccl/issues/418
    when:
      status: [pass]
"""

# name: (replace `status: [pass]` (line 7) with this, or the whole file; the key; its line; words)
BAD = {
    "unknown key": ("stauts: [pass]", "hints[demo].when.stauts", 7,
                    ["unknown key `stauts`", "did you mean `status`?"]),
    "float version": ("torch: {min: 2.10}", "hints[demo].when.torch.min", 7,
                      ["is the number 2.10", "2.1", 'quote it: "2.10"']),
    "bad regex": ('text: "NCCL WARN (unclosed"', "hints[demo].when.text", 7, ["not a valid regular expression"]),
    "unknown status": ("status: [hung]", "hints[demo].when.status[0]", 7,
                       ["unknown status `hung`", "did you mean `hang`?", "infra-error"]),
    "duplicate id": (SITE + SITE.removeprefix("hints:\n"), "hints[demo].id", 8,
                     ["id `demo` is used twice (first at line 2)"]),
}


def test_a_site_folder_is_read_file_after_file_in_name_order(tmp_path):
    (tmp_path / "20-second.yaml").write_text(SITE.replace("id: demo", "id: second"))
    (tmp_path / "10-first.yaml").write_text(SITE.replace("id: demo", "id: first"))
    (tmp_path / "notes.md").write_text("not a hints file: only *.yaml is read\n")
    assert [r.hint.id for r in load(tmp_path)] == ["first", "second"]


def test_an_id_given_in_two_files_of_a_folder_names_both(tmp_path):
    (tmp_path / "a.yaml").write_text(SITE)
    (tmp_path / "b.yaml").write_text(SITE.replace("id: demo", "id: other") + SITE.removeprefix("hints:\n"))
    with pytest.raises(HintsError) as info:
        hints.check(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'b.yaml'}:8 at `hints[demo].id`: "), message
    assert "id `demo` is used twice (first at a.yaml line 2)" in message and "Fix: " in message


def test_a_folder_without_hints_files_is_refused_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("empty\n")
    monkeypatch.setenv("HARNESS_HINTS", str(tmp_path))
    with pytest.raises(HarnessError) as info:
        hints.check()
    message = str(info.value)
    assert f"{tmp_path}: a hints folder with no *.yaml file (named by HARNESS_HINTS)" in message
    assert "Fix: " in message and "\n" not in message


def bad_file(tmp_path: Path, name: str) -> Path:
    change = BAD[name][0]
    path = tmp_path / "site-hints.yaml"
    path.write_text(change if change.startswith("hints:") else SITE.replace("status: [pass]", change))
    return path


@pytest.mark.parametrize("name", BAD)
def test_check_names_file_line_key_and_fix(tmp_path, name):
    _, key, line, words = BAD[name]
    path = bad_file(tmp_path, name)
    with pytest.raises(HintsError) as info:
        hints.check(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line} at `{key}`: "), message
    assert (info.value.key, info.value.line, info.value.code) == (key, line, 2)
    assert "Fix: " in message and "\n" not in message
    for word in words:
        assert word in message, message


@pytest.fixture
def one_run(tmp_path) -> Path:
    """A results folder holding one run with one real (passing) H200 cell record."""
    results = tmp_path / "results"
    (results / "R" / "cells" / "c1").mkdir(parents=True)
    shutil.copy(DATA / "h200-preload-record.json", results / "R" / "cells" / "c1" / "record.json")
    return results


def _report(results: Path, hints_file: Path, out: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"HARNESS_HINTS": str(hints_file)}
    argv = [sys.executable, "-m", "invoke", "report", "--results", str(results), "--out", str(out)]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in root.rglob("*"))


@pytest.mark.parametrize("name", BAD)
def test_a_bad_site_file_stops_report_before_it_writes(tmp_path, one_run, name):
    _, key, line, words = BAD[name]
    path, out = bad_file(tmp_path, name), tmp_path / "report.md"
    before = _tree(one_run)
    proc = _report(one_run, path, out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}:{line} at `{key}`: " in proc.stderr and "Fix: " in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not out.exists() and proc.stdout == ""
    assert _tree(one_run) == before


def test_a_good_site_file_replaces_the_packaged_one(tmp_path, one_run, monkeypatch):
    site = tmp_path / "site-hints.yaml"
    site.write_text(SITE)
    proc = _report(one_run, site, tmp_path / "report.md")
    assert proc.returncode == 0, proc.stderr
    assert "Demo hint of this site" in (tmp_path / "report.md").read_text()
    monkeypatch.setenv("HARNESS_HINTS", str(site))
    assert hints.hints_path() == site
    assert [r.hint.id for r in load()] == ["demo"]
    record = json.loads((DATA / "h200-preload-record.json").read_text())
    assert [m.hint.id for m in match(record)] == ["demo"]
    monkeypatch.delenv("HARNESS_HINTS")
    assert match(record) == []  # the packaged file again


def test_a_missing_site_file_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HINTS", str(tmp_path / "nope.yaml"))
    with pytest.raises(HarnessError) as info:
        hints.check()
    assert "nope.yaml: no such hints file (named by HARNESS_HINTS). Fix:" in str(info.value)
    assert info.value.code == 2


def test_a_wrapper_hint_gives_way_to_the_specific_cause():
    """Seen on 2x H200 (NCCL_SOCKET_IFNAME=nosuchif0): NCCL's "invalid usage" wrapped "Bootstrap : no
    socket interface found"; only the socket hint names the fix. Alone, the wrapper hint still shows."""
    from harness.record import CellRecord

    def record(message: str) -> CellRecord:
        return CellRecord.from_json({"cell": {"cuda": "13.0", "variant": "bad-ifname"}, "outcome": {
            "status": "fail", "phase": "init", "error_class": "nccl", "reason": message.splitlines()[0]},
            "attempts": [{"attempt": 1, "raw": {"ranks": {"0": {"phase": "init", "error": {
                "phase": "init", "type": "DistBackendError", "message": message}}}}}]})

    wrapped = ("NCCL error in: ProcessGroupNCCL.cpp:3690, invalid usage (run with NCCL_DEBUG=WARN for details), "
               "NCCL version 2.28.9\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
               "Last error:\nBootstrap : no socket interface found")
    assert [m.hint.id for m in hints.match(record(wrapped))] == ["nccl-no-socket-interface"]
    alone = wrapped.rsplit("\n", 1)[0] + "\nsome reason no hint knows"
    assert [m.hint.id for m in hints.match(record(alone))] == ["nccl-invalid-usage"]


# ---------------------------------------------------------------- a hang's advice from who was behind (issue 23)
def advice(record: dict) -> dict[str, hints.Match]:
    return {m.hint.id: m for m in match(record)}


@pytest.mark.parametrize("record", [stalled(BEHIND), failed(WATCHDOG, status="hang", phase="prepare", detail=BEHIND)],
                         ids=["supervisor's hang", "torch's watchdog"])
def test_a_rank_behind_gets_the_find_that_rank_advice(record):
    got = advice(record)
    assert set(got) == {"watchdog-timeout"} and got["watchdog-timeout"].certain
    assert hints.facts(record).ranks_behind == (1,)
    fix = got["watchdog-timeout"].hint.fix
    assert "Find the rank that is behind" in fix and "forensics" in fix and "only when it is slow on purpose" in fix


@pytest.mark.parametrize("record", [stalled(ALL_WAITING), failed(WATCHDOG, status="hang", phase="prepare", detail=ALL_WAITING)],
                         ids=["supervisor's hang", "torch's watchdog"])
def test_every_rank_waiting_gets_the_transport_advice_never_a_longer_timeout(record):
    got = advice(record)
    assert set(got) == {"transport-hang"} and got["transport-hang"].certain
    assert hints.facts(record).ranks_behind == ()
    hint = got["transport-hang"].hint
    for words in ("invoke rescue", "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_IB_DISABLE=1", "NCCL_NET=Socket",
                  "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        assert words in hint.fix, words
    assert "raise the timeout" not in (hint.fix + hint.explanation).lower()


def test_a_log_alone_does_not_say_who_was_behind_so_only_possibly():
    record = failed(WATCHDOG)  # a pasted log: the watchdog's line, no hang detail
    assert hints.facts(record).ranks_behind is None
    got = advice(record)
    assert set(got) == {"watchdog-timeout"}
    assert not got["watchdog-timeout"].certain and got["watchdog-timeout"].unknown == ("ranks_behind",)
    assert got["watchdog-timeout"].caveat == "the log matches; which ranks were behind was not measured"
    # so its fix names both readings with their check: a collective only rank 0 entered, and none behind (P2P)
    fix = got["watchdog-timeout"].hint.fix
    assert "rank-0-only" in fix and "call it on every rank" in fix and "NCCL_P2P_DISABLE=1" in fix
    # a hang with no detail and nothing in its logs: no advice either way, not even possibly
    assert advice(stalled({})) == {}


def test_torchs_desync_report_names_the_lagging_ranks():
    report = (WATCHDOG + "\n\t - To our best knowledge, ranks [1, 3] are the lagging ranks that caused this timeout. "
              "They never joined any collectives")
    record = failed(report)  # a log alone, but torch said who was behind
    assert hints.facts(record).ranks_behind == (1, 3)
    got = advice(record)
    assert set(got) == {"watchdog-timeout"} and got["watchdog-timeout"].certain


@pytest.mark.parametrize("bad", [None, "1", [1, "2"], [True], {"1": "x"}])
def test_a_malformed_ranks_behind_is_not_known(bad):
    assert hints.facts(stalled({"ranks_behind": bad})).ranks_behind is None
