"""Tests for harness.nccl_log, on real NCCL log lines.

Every fixture says where its lines come from: an issue URL (lines pasted by users), this project's
H200 machine, or, where no real line could be found, the NCCL source format string it was built
from (NVIDIA/nccl at the tag named). Lines are kept verbatim; only excerpts are used.
"""

from __future__ import annotations

import json
import random

import pytest

from harness.nccl_log import (
    COLLNET_PEER,
    KIND_ORDER,
    Communicator,
    Connection,
    NcclLog,
    kind_of,
    parse,
    parse_file,
    tail,
    tail_file,
)

# --- NCCL 2.18.3: nccl-tests all_reduce_perf, one process driving 8 H800s (8 communicators in one
# file), NVLS in use. A public log file on GitHub (host nf5688m7-1) found through the code index;
# the same shape is pasted in https://github.com/NVIDIA/nccl/issues/892 . Version line is bare
# (2.18 printf()s it to stdout). Excerpt: two of the eight communicators.
LOG_2_18_NVLS = """\
nf5688m7-1:422771:422771 [0] NCCL INFO Bootstrap : Using enx785ee8a015a1:10.59.6.30<0>
nf5688m7-1:422771:422771 [7] NCCL INFO cudaDriverVersion 12020
NCCL version 2.18.3+cuda12.2
nf5688m7-1:422771:422791 [5] NCCL INFO Using network Socket
nf5688m7-1:422771:422788 [2] NCCL INFO comm 0x5598478aaae0 rank 2 nranks 8 cudaDev 2 nvmlDev 2 busId 48000 commId 0xefdd95e4ad4062d9 - Init START
nf5688m7-1:422771:422787 [1] NCCL INFO comm 0x5598478a4d90 rank 1 nranks 8 cudaDev 1 nvmlDev 1 busId 34000 commId 0xefdd95e4ad4062d9 - Init START
nf5688m7-1:422771:422787 [1] NCCL INFO NVLS multicast support is available on dev 1
nf5688m7-1:422771:422788 [2] NCCL INFO NVLS multicast support is available on dev 2
nf5688m7-1:422771:422786 [0] NCCL INFO Channel 00/16 :    0   3   1   2   4   7   5   6
nf5688m7-1:422771:422787 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/direct pointer
nf5688m7-1:422771:422787 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[2] via P2P/direct pointer
nf5688m7-1:422771:422788 [2] NCCL INFO Channel 00/0 : 2[2] -> 4[4] via P2P/direct pointer
nf5688m7-1:422771:422788 [2] NCCL INFO Connected all trees
nf5688m7-1:422771:422788 [2] NCCL INFO NVLS comm 0x5598478aaae0 headRank 3 nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736
nf5688m7-1:422771:422787 [1] NCCL INFO NVLS comm 0x5598478a4d90 headRank 2 nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736
nf5688m7-1:422771:422788 [2] NCCL INFO Connected NVLS tree
nf5688m7-1:422771:422788 [2] NCCL INFO 16 coll channels, 16 nvls channels, 16 p2p channels, 16 p2p channels per peer
nf5688m7-1:422771:422787 [1] NCCL INFO 16 coll channels, 16 nvls channels, 16 p2p channels, 16 p2p channels per peer
nf5688m7-1:422771:422788 [2] NCCL INFO comm 0x5598478aaae0 rank 2 nranks 8 cudaDev 2 nvmlDev 2 busId 48000 commId 0xefdd95e4ad4062d9 - Init COMPLETE
nf5688m7-1:422771:422787 [1] NCCL INFO comm 0x5598478a4d90 rank 1 nranks 8 cudaDev 1 nvmlDev 1 busId 34000 commId 0xefdd95e4ad4062d9 - Init COMPLETE
           4             1     float    none       0    27.06    0.00    0.00    N/A    27.03    0.00    0.00    N/A
nf5688m7-1:422771:422771 [0] NCCL INFO comm 0x5598478a4d90 rank 1 nranks 8 cudaDev 1 busId 34000 - Destroy COMPLETE
"""


def test_2_18_version_nvls_and_several_communicators_in_one_file():
    log = parse(LOG_2_18_NVLS)
    assert log.version == "2.18.3"
    assert log.cuda == "12.2"
    assert log.transports == (
        Connection(0, 1, 1, 2, 2, "P2P/direct", "P2P/direct pointer", None, 0),
        Connection(1, 1, 1, 2, 2, "P2P/direct", "P2P/direct pointer", None, 0),
        Connection(0, 2, 2, 4, 4, "P2P/direct", "P2P/direct pointer", None, 0),
    )
    assert log.nvls_setups == 2
    assert log.transport_summary == {"P2P/direct": 3, "NVLS": 2}
    assert log.transport_kinds == ("P2P/direct", "NVLS")
    assert log.communicators == (
        Communicator("0x5598478aaae0", 2, 8, None, 2, 2, "48000", "0xefdd95e4ad4062d9", True, True),
        Communicator("0x5598478a4d90", 1, 8, None, 1, 1, "34000", "0xefdd95e4ad4062d9", True, True),
    )
    assert log.init_complete is True
    assert log.pending_inits == ()
    assert log.nranks == 8
    assert log.hosts == ("nf5688m7-1",)
    assert log.warnings == () and log.errors == () and log.error_trace == ()
    assert log.p2p_disabled == ()
    assert log.aborted is False


# --- NCCL 2.29.2, NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 on one node, so NET/Socket; internal
# error. https://github.com/NVIDIA/nccl/issues/2057 (rank 0's log, excerpt). Note the timestamp in
# front of the WARN line (NCCL_DEBUG_TIMESTAMP_FORMAT default) and the "[Rank 0]" Init START form.
LOG_2_29_SOCKET = """\
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO NCCL_COMM_ID set by environment to 172.17.16.64:23456
Initializing NCCL across 2 nodes...
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO cudaDriverVersion 12080
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO NCCL version 2.29.2+cuda12.8
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO NCCL git version master be4d833-dirty
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Failed to initialize NET plugin IB
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Using network Socket
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO [Rank 0] ncclCommInitRank comm 0x55eb22a04a50 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 80 commId 0x2ef13c5ed0553a05 - Init START
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO comm 0x55eb22a04a50 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Channel 00/02 : 0 1
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Channel 01/02 : 0 1
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 1 p2p channels per peer
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO ncclCommInitRank comm 0x55eb22a04a50 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 80 commId 0x2ef13c5ed0553a05 - Init COMPLETE
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Init timings - ncclCommInitRank: rank 0 nranks 2 total 2.13 (kernels 0.17, alloc 0.02, bootstrap 1.93, allgathers 0.00, topo 0.01, graphs 0.00, connections 0.00, rest 0.00)
Starting send/recv...
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO Channel 01/1 : 0[0] -> 1[1] [send] via NET/Socket/0/Shared

[2026-03-18 11:13:09] VM-16-64-ubuntu:28471:28499 [0] misc/socket.cc:537 NCCL WARN ncclSocketInit: connecting to address  with family 1 is neither AF_INET(2) nor AF_INET6(10)
VM-16-64-ubuntu:28471:28499 [0] NCCL INFO transport/net_socket.cc:399 -> 3
VM-16-64-ubuntu:28471:28499 [0] NCCL INFO transport/net.cc:860 -> 3
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO group.cc:78 -> 3 [Async thread]
NCCL error a.cu:46: internal error - please report this issue to the NCCL developers
VM-16-64-ubuntu:28471:28471 [0] NCCL INFO ENV/Plugin: Closing env plugin ncclEnvDefault
"""


def test_2_29_socket_send_env_warn_with_timestamp_and_error_trace():
    log = parse(LOG_2_29_SOCKET)
    assert log.version == "2.29.2"
    assert log.cuda == "12.8"
    assert log.env_settings == {
        "NCCL_COMM_ID": "172.17.16.64:23456",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
    }
    assert log.p2p_disabled == ("NCCL_P2P_DISABLE set by environment to 1",)
    assert log.p2p_disabled_by_env is True
    # Ring lines ("Channel 00/02 : 0 1") are not connections; the one connection is the send.
    assert log.transports == (Connection(1, 0, 0, 1, 1, "NET/Socket", "NET/Socket/0/Shared", "send", 1),)
    assert log.transport_kinds == ("NET/Socket",)
    assert log.nvls_setups == 0
    assert log.warnings == (
        "ncclSocketInit: connecting to address  with family 1 is neither AF_INET(2) nor AF_INET6(10)",
    )
    assert log.error_trace == (
        "transport/net_socket.cc:399 -> 3",
        "transport/net.cc:860 -> 3",
        "group.cc:78 -> 3 [Async thread]",
    )
    assert log.errors == ("NCCL error a.cu:46: internal error - please report this issue to the NCCL developers",)
    assert log.error_results == ("ncclInternalError",)
    assert log.communicators == (
        Communicator("0x55eb22a04a50", 0, 2, "ncclCommInitRank", 0, 0, "80", "0x2ef13c5ed0553a05", True, True),
    )
    assert log.init_complete is True
    assert log.nranks == 2
    assert log.hosts == ("VM-16-64-ubuntu",)


# --- NCCL 2.28.9 (bundled with torch 2.11.0+cu130) on this project's H200 machine: two ranks on
# one GPU, so NCCL refuses with ncclInvalidUsage during init. Captured with
# NCCL_DEBUG_FILE=dup.%h.%p.log; the 2.28 WARN line carries a timestamp. Excerpt of rank 0.
LOG_2_28_DUPLICATE_GPU = """\
vm:484:484 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so
vm:484:484 [0] NCCL INFO cudaDriverVersion 13000
vm:484:484 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
vm:484:484 [0] NCCL INFO Comm config Blocking set to 1
vm:484:484 [0] NCCL INFO dlvsym failed on mlx5dv_reg_dmabuf_mr - /lib/x86_64-linux-gnu/libmlx5.so: undefined symbol: mlx5dv_reg_dmabuf_mr, version MLX5_1.25 version MLX5_1.25
vm:484:484 [0] NCCL INFO NET/IB : No device found.
vm:484:484 [0] NCCL INFO Failed to initialize NET plugin IB
vm:484:484 [0] NCCL INFO Using network Socket
vm:484:484 [0] NCCL INFO ncclCommInitRankConfig comm 0x244dbc00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 commId 0x8d402d689ab0a938 - Init START
vm:484:484 [0] NCCL INFO RAS client listening socket at 127.0.0.1<28028>

[2026-11-29 15:18:34] vm:484:484 [0] init.cc:904 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60
vm:484:484 [0] NCCL INFO init.cc:1582 -> 5
vm:484:484 [0] NCCL INFO group.cc:76 -> 5 [Async thread]
vm:484:484 [0] NCCL INFO group.cc:537 -> 5
vm:484:484 [0] NCCL INFO group.cc:743 -> 5
vm:484:484 [0] NCCL INFO init.cc:2162 -> 5
vm:484:484 [0] NCCL INFO ENV/Plugin: Closing env plugin ncclEnvDefault
"""

# The same run's Python exception, as torch printed it on stderr (same machine).
STDERR_2_28_DUPLICATE_GPU = """\
torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60
"""


def test_2_28_init_failure_is_pending_and_traced():
    log = parse(LOG_2_28_DUPLICATE_GPU)
    assert log.version == "2.28.9"
    assert log.cuda == "13.0"
    assert log.warnings == ("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60",)
    assert log.errors == ()  # the WARN names no error; the trace says which one
    assert log.error_trace == (
        "init.cc:1582 -> 5",
        "group.cc:76 -> 5 [Async thread]",
        "group.cc:537 -> 5",
        "group.cc:743 -> 5",
        "init.cc:2162 -> 5",
    )
    assert log.error_results == ("ncclInvalidUsage",)
    assert log.init_complete is False
    assert log.pending_inits == (
        Communicator("0x244dbc00", 0, 2, "ncclCommInitRankConfig", 0, 0, "60", "0x8d402d689ab0a938", True, False),
    )
    assert log.nranks == 2
    assert log.hosts == ("vm",)
    assert log.transports == ()


def test_torch_stderr_errors_and_bare_version_do_not_override_nccls_own_line():
    log = parse(STDERR_2_28_DUPLICATE_GPU)
    assert log.version == "2.28.9" and log.cuda is None
    assert log.errors == (
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93,"
        " invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9",
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    )
    assert log.error_results == ("ncclInvalidUsage",)
    assert log.nccl_lines == 0

    both = parse(STDERR_2_28_DUPLICATE_GPU + LOG_2_28_DUPLICATE_GPU)
    assert (both.version, both.cuda) == ("2.28.9", "13.0")


# --- NCCL 2.18.3 as seen through torch: https://github.com/NVIDIA/nccl/issues/1029 (lines prefixed
# by the launcher with the host name).
STDERR_2_18_CUDA_ERROR = """\
rdma-test-gpu-worker-1: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1197, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3
rdma-test-gpu-worker-1: ncclUnhandledCudaError: Call to CUDA function failed.
rdma-test-gpu-worker-1: Last error:
rdma-test-gpu-worker-1: Cuda failure 'initialization error'
rdma-test-gpu-worker-1: Traceback (most recent call last):
"""


def test_unhandled_cuda_error_from_torch_output():
    log = parse(STDERR_2_18_CUDA_ERROR)
    assert log.version == "2.18.3" and log.cuda is None
    assert log.errors == (
        "rdma-test-gpu-worker-1: torch.distributed.DistBackendError: NCCL error in: "
        "/opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1197, unhandled cuda error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3",
        "rdma-test-gpu-worker-1: ncclUnhandledCudaError: Call to CUDA function failed.",
        "rdma-test-gpu-worker-1: Cuda failure 'initialization error'",
    )
    assert log.error_results == ("ncclUnhandledCudaError",)


# --- P2P/IPC/read and NET/Socket [send], no version line in the excerpt:
# https://github.com/NVIDIA/nccl/issues/952 (host name redacted by the reporter).
LOG_IPC_SOCKET = """\
<cluster_name>:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read
<cluster_name>:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3
"""

# --- NET/IB/x/GDRDMA both directions, P2P/CUMEM, Init COMPLETE of four ranks on two hosts pasted
# together: https://github.com/NVIDIA/nccl/issues/1189 (H20 nodes).
LOG_IB_CUMEM = """\
H20-GPU-06:4015539:4015652 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
H20-GPU-06:4015540:4015653 [1] NCCL INFO Channel 01/0 : 3[1] -> 1[1] [send] via NET/IB/2/GDRDMA
H20-GPU-06:4015540:4015653 [1] NCCL INFO Channel 00/0 : 3[1] -> 2[0] via P2P/CUMEM
H20-GPU-06:4015540:4015653 [1] NCCL INFO 8 coll channels, 0 collnet channels, 0 nvls channels, 8 p2p channels, 2 p2p channels per peer
H20-GPU-05:1789225:1789736 [1] NCCL INFO comm 0x5a0ca40 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 38000 commId 0xf021d9037f9243d8 - Init COMPLETE
H20-GPU-05:1789224:1789735 [0] NCCL INFO comm 0x5b41750 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0xf021d9037f9243d8 - Init COMPLETE
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
H20-GPU-06:4015539:4015652 [0] NCCL INFO comm 0x5a39240 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0xf021d9037f9243d8 - Init COMPLETE
H20-GPU-06:4015540:4015653 [1] NCCL INFO comm 0x5b0bc60 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 38000 commId 0xf021d9037f9243d8 - Init COMPLETE
"""

# --- P2P/CUMEM/read: https://github.com/aws/aws-ofi-nccl/issues/715 (CloudWatch puts a timestamp
# line before every log line).
LOG_CUMEM_READ = """\
2024-12-04T05:27:45.082Z
algo-1:18063:18133 [6] NCCL INFO Channel 01/0 : 6[6] -> 7[7] via P2P/CUMEM/read
2024-12-04T05:27:45.082Z
algo-1:18060:18135 [3] NCCL INFO Channel 03/0 : 3[3] -> 4[4] via P2P/CUMEM/read
"""

# --- SHM/direct/direct (2.2x, no connIndex in SHM lines; the bracket is the physical GPU):
# https://github.com/NVIDIA/nccl/issues/1609
LOG_SHM = """\
tj5-sc-ai-h800r-dev01:533:1765 [2] NCCL INFO Channel 07 : 2[6] -> 3[7] via SHM/direct/direct
tj5-sc-ai-h800r-dev01:532:1764 [1] NCCL INFO Connected all rings
tj5-sc-ai-h800r-dev01:534:1763 [3] NCCL INFO Channel 00 : 3[7] -> 2[6] via SHM/direct/direct
"""

# --- P2P/direct pointer: https://github.com/NVIDIA/nccl-tests/issues/213
LOG_DIRECT = """\
hw14:798:813 [3] NCCL INFO Channel 02/0 : 3[3] -> 4[4] via P2P/direct pointer
"""


def test_transport_lines_of_each_kind():
    assert parse(LOG_IPC_SOCKET).transports == (
        Connection(1, 8, 0, 15, 7, "P2P/IPC", "P2P/IPC/read", None, 0),
        Connection(3, 15, 7, 6, 6, "NET/Socket", "NET/Socket/3", "send", 0),
    )
    log = parse(LOG_IB_CUMEM)
    assert log.transports == (
        Connection(7, 0, 0, 2, 0, "NET/IB", "NET/IB/3/GDRDMA", "receive", 0),
        Connection(1, 3, 1, 1, 1, "NET/IB", "NET/IB/2/GDRDMA", "send", 0),
        Connection(0, 3, 1, 2, 0, "P2P/CUMEM", "P2P/CUMEM", None, 0),
    )
    assert log.transport_summary == {"P2P/CUMEM": 1, "NET/IB": 2}
    assert log.transport_kinds == ("P2P/CUMEM", "NET/IB")
    assert parse(LOG_CUMEM_READ).transports == (
        Connection(1, 6, 6, 7, 7, "P2P/CUMEM", "P2P/CUMEM/read", None, 0),
        Connection(3, 3, 3, 4, 4, "P2P/CUMEM", "P2P/CUMEM/read", None, 0),
    )
    assert parse(LOG_SHM).transports == (
        Connection(7, 2, 6, 3, 7, "SHM", "SHM/direct/direct", None, None),
        Connection(0, 3, 7, 2, 6, "SHM", "SHM/direct/direct", None, None),
    )
    assert parse(LOG_DIRECT).transports == (Connection(2, 3, 3, 4, 4, "P2P/direct", "P2P/direct pointer", None, 0),)


def test_several_communicators_and_hosts_pasted_together():
    log = parse(LOG_IB_CUMEM)
    assert [(c.comm, c.rank, c.nranks, c.started, c.complete) for c in log.communicators] == [
        ("0x5a0ca40", 1, 4, False, True),
        ("0x5b41750", 0, 4, False, True),
        ("0x5a39240", 2, 4, False, True),
        ("0x5b0bc60", 3, 4, False, True),
    ]
    assert log.init_complete is True
    assert log.nranks == 4
    assert log.hosts == ("H20-GPU-05", "H20-GPU-06")
    assert log.version is None and log.nvls_setups == 0


def test_transport_kinds_follow_kind_order_not_log_order():
    log = parse(LOG_SHM + LOG_IB_CUMEM + LOG_IPC_SOCKET + LOG_DIRECT)
    assert log.transport_kinds == ("P2P/CUMEM", "P2P/IPC", "P2P/direct", "SHM", "NET/Socket", "NET/IB")
    assert log.transport_summary == {
        "P2P/CUMEM": 1,
        "P2P/IPC": 1,
        "P2P/direct": 1,
        "SHM": 2,
        "NET/Socket": 1,
        "NET/IB": 2,
    }


# --- Before 2.18.3 the bracket after a rank is the PCI bus id in hex, not a device index.
# https://github.com/NVIDIA/nccl/issues/380 (NCCL 2.7.8; "3000" looks decimal but is a bus id).
LOG_2_7_IB_BUSID = """\
spark01:2683:2780 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE ; OOB ens192f1:10.150.178.134<0>
NCCL version 2.7.8+cuda11.0
spark01:2683:2826 [0] NCCL INFO Channel 00 : 1[3000] -> 0[3000] [receive] via NET/IB/0
spark01:2683:2826 [0] NCCL INFO Channel 00 : 0[3000] -> 1[3000] [send] via NET/IB/0

spark01:2683:2826 [0] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed
"""

# https://github.com/NVIDIA/nccl/issues/707 (no version line; hex bus ids, GDRDMA).
LOG_IB_GDRDMA_BUSID = """\
10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA
10-90-43-152:120890:121563 [3] NCCL INFO Channel 02 : 2[c7000] -> 3[ca000] [receive] via NET/IB/0/GDRDMA
"""


def test_old_bus_id_brackets_are_not_devices():
    log = parse(LOG_2_7_IB_BUSID)
    assert log.version == "2.7.8" and log.cuda == "11.0"
    assert log.transports == (
        Connection(0, 1, None, 0, None, "NET/IB", "NET/IB/0", "receive", None),
        Connection(0, 0, None, 1, None, "NET/IB", "NET/IB/0", "send", None),
    )
    assert log.warnings == ("Call to ibv_create_cq failed",)
    assert log.errors == ("Call to ibv_create_cq failed",)
    assert parse(LOG_IB_GDRDMA_BUSID).transports == (
        Connection(1, 2, None, 0, None, "NET/IB", "NET/IB/5/GDRDMA", "receive", None),
        Connection(2, 2, None, 3, None, "NET/IB", "NET/IB/0/GDRDMA", "receive", None),
    )


# --- P2P refused by CUDA and SHM failing on a small /dev/shm (NCCL 2.7.8, old "direct shared
# memory" SHM form). A public GitHub markdown note quoting a pytorch 1.8 log (code index); the
# same failure is pasted in https://github.com/NVIDIA/nccl-tests/issues/166 .
LOG_2_7_SHM_FAILURE = """\
4e9a7654171e:8639:8639 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
4e9a7654171e:8639:8639 [0] NCCL INFO Using network Socket
NCCL version 2.7.8+cuda11.1
4e9a7654171e:8639:8745 [0] NCCL INFO Channel 00/02 :    0   1   2   3
4e9a7654171e:8640:8763 [1] NCCL INFO Could not enable P2P between dev 1(=3d000) and dev 0(=1a000)
4e9a7654171e:8641:8784 [2] NCCL INFO Channel 00 : 2[89000] -> 3[b2000] via direct shared memory
4e9a7654171e:8639:8745 [0] NCCL INFO Could not enable P2P between dev 0(=1a000) and dev 1(=3d000)
4e9a7654171e:8640:8763 [1] NCCL INFO Could not enable P2P between dev 1(=3d000) and dev 0(=1a000)

4e9a7654171e:8639:8745 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device
4e9a7654171e:8639:8745 [0] NCCL INFO include/shm.h:41 -> 2

4e9a7654171e:8639:8745 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-170206743cd9fd1d-0-1-0 (size 9637888)

4e9a7654171e:8639:8745 [0] NCCL INFO transport/shm.cc:101 -> 2
4e9a7654171e:8639:8745 [0] NCCL INFO group.cc:73 -> 2 [Async thread]
"""


def test_p2p_refused_by_cuda_and_shm_system_error():
    log = parse(LOG_2_7_SHM_FAILURE)
    assert log.p2p_disabled == (
        "Could not enable P2P between dev 1(=3d000) and dev 0(=1a000)",
        "Could not enable P2P between dev 0(=1a000) and dev 1(=3d000)",
    )
    assert log.transports == (Connection(0, 2, None, 3, None, "SHM", "direct shared memory", None, None),)
    assert log.warnings == (
        "Failed to open libibverbs.so[.1]",
        "Call to posix_fallocate failed : No space left on device",
        "Error while creating shared memory segment nccl-shm-recv-170206743cd9fd1d-0-1-0 (size 9637888)",
    )
    assert log.errors == log.warnings  # each mentions a failure
    assert log.error_trace == ("include/shm.h:41 -> 2", "transport/shm.cc:101 -> 2", "group.cc:73 -> 2 [Async thread]")
    assert log.error_results == ("ncclSystemError",)


# --- NCCL decided by itself that P2P is off (NVML says no), RTX 4090 box:
# https://github.com/NVIDIA/TensorRT-LLM/issues/2225 ; 3-GPU box:
# https://github.com/pytorch/pytorch/issues/130113
LOG_P2P_DISABLED_BY_NCCL = """\
bcc-qianfan-gpu4090-offline-1:89404:89404 [2] NCCL INFO P2P is disabled between connected GPUs 6 and 7. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
bcc-qianfan-gpu4090-offline-1:89402:89402 [0] NCCL INFO P2P is disabled between connected GPUs 5 and 4. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
bcc-qianfan-gpu4090-offline-1:89404:89404 [2] NCCL INFO P2P is disabled between connected GPUs 6 and 7. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
node155:3052668:3052715 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
"""


def test_p2p_disabled_decisions_are_distinct_and_ordered():
    log = parse(LOG_P2P_DISABLED_BY_NCCL)
    assert log.p2p_disabled == (
        "P2P is disabled between connected GPUs 6 and 7. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
        "P2P is disabled between connected GPUs 5 and 4. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
        "P2P is disabled between connected GPUs 0 and 1. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
    )
    assert log.warnings == () and log.errors == ()
    assert log.p2p_disabled_by_env is False  # NCCL decided this itself
    assert log.hosts == ("bcc-qianfan-gpu4090-offline-1", "node155")


# --- NCCL 2.18 .. 2.22 log NCCL_P2P_DISABLE=1 as "NCCL_P2P_LEVEL set by environment to LOC"
# (src/graph/paths.cc). https://github.com/NVIDIA/nccl-tests/issues/373 : a plugin network
# (IBext_v8), a torchrun rank whose log stops before Init COMPLETE.
LOG_P2P_LEVEL_LOC = """\
bigo:1884:2298 [0] NCCL INFO Using network IBext_v8
bigo:1884:2298 [0] NCCL INFO ncclCommInitRank comm 0x564531f27c80 rank 2 nranks 3 cudaDev 0 nvmlDev 0 busId 31000 commId 0x9ca74fa6e40df7f4 - Init START
bigo:1884:2298 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
bigo:1884:2298 [0] NCCL INFO comm 0x564531f27c80 rank 2 nRanks 3 nNodes 3 localRanks 1 localRank 0 MNNVL 0
bigo:1884:2298 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [receive] via NET/IBext_v8/1
bigo:1884:2298 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/IBext_v8/1

bigo:1884:2346 [0] socket.c:446 NCCL WARN socketFinalizeAccept: wrong type 3 != 4
"""


def test_p2p_level_loc_plugin_network_and_unfinished_init():
    log = parse(LOG_P2P_LEVEL_LOC)
    assert log.env_settings == {"NCCL_P2P_LEVEL": "LOC"}
    assert log.p2p_disabled == ("NCCL_P2P_LEVEL set by environment to LOC",)
    assert log.p2p_disabled_by_env is True
    assert log.transports == (
        Connection(0, 1, 0, 2, 0, "NET/IB", "NET/IBext_v8/1", "receive", 0),
        Connection(0, 2, 0, 0, 0, "NET/IB", "NET/IBext_v8/1", "send", 0),
    )
    assert log.warnings == ("socketFinalizeAccept: wrong type 3 != 4",)
    assert log.errors == ()
    assert log.init_complete is False
    assert [c.comm for c in log.pending_inits] == ["0x564531f27c80"]
    assert log.nranks == 3


# --- CollNet over SHARP, NCCL 2.23.4: https://github.com/NVIDIA/nccl-tests/issues/311
LOG_COLLNET = """\
gpu34:23654:23654 [0] NCCL INFO NCCL version 2.23.4+cuda12.4
gpu34:23654:23684 [0] NCCL INFO ncclCommInitRank comm 0x5aae1d0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 7000 commId 0x45701cda3f259923 - Init START
gpu34:23654:23684 [0] NCCL INFO NCCL_COLLNET_ENABLE set by environment to 1.
gpu34:23654:23684 [0] NCCL INFO comm 0x5aae1d0 rank 0 nRanks 8 nNodes 4 localRanks 2 localRank 0 MNNVL 0
gpu34:23654:23684 [0] NCCL INFO CollNet 00/0 : 0 [receive] via COLLNET/SHARP/1/GDRDMA
[gpu34:0:23654 - context.c:665][2025-05-26 15:20:21] INFO job (ID: 10883559310443912581) resource request quota: ( osts:0 user_data_per_ost:0 max_groups:0 max_qps:1 max_group_channels:1, num_trees:1)

gpu34:23654:23702 [0] sharp_plugin.c:382 NCCL WARN SHARP int8,uint8,bfloat16 Datatypes not supported
gpu34:23654:23702 [0] NCCL INFO SHARP rank 0/4 initialized on mlx5_0:1
"""


def test_collnet_connection_env_and_benign_warning():
    log = parse(LOG_COLLNET)
    assert log.version == "2.23.4" and log.cuda == "12.4"
    assert log.transports == (
        Connection(0, COLLNET_PEER, None, 0, None, "CollNet", "COLLNET/SHARP/1/GDRDMA", "receive", 0),
    )
    assert log.transport_kinds == ("CollNet",)
    assert log.env_settings == {"NCCL_COLLNET_ENABLE": "1"}
    assert log.warnings == ("SHARP int8,uint8,bfloat16 Datatypes not supported",)
    assert log.errors == ()
    assert log.init_complete is False  # the excerpt stops before Init COMPLETE (the run hung)
    assert log.hosts == ("gpu34",)


# --- Failures on a multi-node torch job: remote peer gone, then CUDA out of memory.
# https://github.com/NVIDIA/nccl/issues/1235 (excerpt, in the order pasted).
LOG_REMOTE_AND_OOM = """\
ng30903:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer ng30903-ib.narval.calcul.quebec<51159>
ng30903:3063025:3066048 [0] NCCL INFO misc/socket.cc:749 -> 6

ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80
ng30903:3063025:3066048 [0] NCCL INFO transport/p2p.cc:438 -> 3
ng30903:3063025:3066048 [0] NCCL INFO group.cc:65 -> 3 [Async thread]

ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'

ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes
ng30903:3063028:3066152 [3] NCCL INFO transport/p2p.cc:204 -> 1
"""

# --- NET/IB completion error whose text has "err" but not "error", and an env value with a
# trailing period: https://github.com/NVIDIA/nccl/issues/1814 (title line and log excerpt).
LOG_IB_COMPLETION = """\
hostname-test:987:1347 [7] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.
hostname-test:984:1257 [4] NCCL INFO Channel 06/0 : 36[4] -> 20[4] [send] via NET/IBext_v8/3
hostname-test:984:1257 [4] NCCL WARN NET/IB : Got completion from peer xxx.xxx.xxx.xxx<55921> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:29.87.4.221 remoteGids::ffff:29.87.88.182
"""


def test_warn_errors_and_result_classes():
    log = parse(LOG_REMOTE_AND_OOM)
    assert log.errors == (
        "socketProgress: Connection closed by remote peer ng30903-ib.narval.calcul.quebec<51159>",
        "Socket recv failed while polling for opId=0x55a51966cc80",
        "Cuda failure 'out of memory'",
        "Failed to CUDA calloc 6291456 bytes",
    )
    assert log.errors == log.warnings
    assert log.error_results == ("ncclRemoteError", "ncclInternalError", "ncclUnhandledCudaError")
    assert log.error_trace == (
        "misc/socket.cc:749 -> 6",
        "transport/p2p.cc:438 -> 3",
        "group.cc:65 -> 3 [Async thread]",
        "transport/p2p.cc:204 -> 1",
    )
    assert log.hosts == ("ng30903",)

    ib = parse(LOG_IB_COMPLETION)
    assert ib.env_settings == {"NCCL_IB_GID_INDEX": "3"}
    assert ib.errors == ib.warnings and len(ib.errors) == 1
    assert ib.transports[0].kind == "NET/IB"


# --- 2.30 forms, built from format strings (no public 2.30 logs found): WARN with "(function)"
# after file:line (src/debug.cc at v2.30.7-1), the INFO_LOC trace "file:line (func) -> N"
# (src/include/checks.h, debug.h), SHM "via SHM/direct" (src/transport/shm.cc), the NVLS line
# with nvlsRanks (src/transport/nvls.cc), "[Rank %d]" Init START and Abort (src/init.cc).
LOG_2_30_FORMS = """\
h200-0:100:100 [0] NCCL INFO NCCL version 2.30.7+cuda13.0
h200-0:100:100 [0] NCCL INFO [Rank 1] ncclCommInitRankConfig comm 0x1234 rank 1 nranks 2 cudaDev 0 nvmlDev 3 busId 1b000 commId 0xabc - Init START
h200-0:100:100 [0] NCCL INFO Channel 00 : 1[3] -> 0[2] via SHM/direct
h200-0:100:100 [0] NCCL INFO NVLS comm 0x1234 headRank 1 nHeads 2 nvlsRanks 2 buffSize 1048576 nvlsPerRankSize 100663296 nvlsTotalSize 201326592

[2026-01-02 03:04:05] h200-0:100:101 [0] transport/net_socket.cc:120 (ncclNetSocketConnect) NCCL WARN Net : Connect to 10.0.0.1<1234> failed : Connection refused
h200-0:100:101 [0] NCCL INFO transport/net_socket.cc:125 (ncclNetSocketConnect) -> 2 (Connection refused)
h200-0:100:100 [0] NCCL INFO comm 0x1234 rank 1 nRanks 2 cudaDev 0 busId 1b000 - Abort START
"""


def test_2_30_forms():
    log = parse(LOG_2_30_FORMS)
    assert (log.version, log.cuda) == ("2.30.7", "13.0")
    assert log.transports == (Connection(0, 1, 3, 0, 2, "SHM", "SHM/direct", None, None),)
    assert log.transport_kinds == ("SHM", "NVLS")
    assert log.warnings == ("Net : Connect to 10.0.0.1<1234> failed : Connection refused",)
    assert log.errors == log.warnings
    assert log.error_trace == ("transport/net_socket.cc:125 (ncclNetSocketConnect) -> 2 (Connection refused)",)
    assert log.error_results == ("ncclSystemError",)
    assert log.aborted is True
    assert log.hosts == ("h200-0",)
    assert log.communicators == (
        Communicator("0x1234", 1, 2, "ncclCommInitRankConfig", 0, 3, "1b000", "0xabc", True, False),
    )


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        # the suffixes come from the format strings in src/transport/{p2p,shm,net,coll_net}.cc
        ("P2P/CUMEM/read", "P2P/CUMEM"),
        ("P2P/CUMEM/CE", "P2P/CUMEM"),
        ("P2P/IPC/read", "P2P/IPC"),
        ("P2P/IPC", "P2P/IPC"),
        ("P2P/direct pointer", "P2P/direct"),
        ("P2P/direct pointer/read", "P2P/direct"),
        ("P2P/indirect/2[2]/read", "P2P"),
        ("P2P/MNNVL/read", "P2P"),
        ("SHM/direct/direct", "SHM"),
        ("SHM/CE/direct", "SHM"),
        ("SHM/direct", "SHM"),
        ("direct shared memory", "SHM"),
        ("NET/Socket/0", "NET/Socket"),
        ("NET/Socket/0/Shared", "NET/Socket"),
        ("NET/IB/0/GDRDMA", "NET/IB"),
        ("NET/IB/0(1)/GDRDMA(PCI)/Shared", "NET/IB"),
        ("NET/IBext_v8/3", "NET/IB"),
        ("NET/AWS Libfabric/0/GDRDMA", "NET"),
        ("COLLNET/SHARP/1/GDRDMA", "CollNet"),
        ("NVLS", "NVLS"),
        ("something new", "other"),
    ],
)
def test_kind_of(raw, kind):
    assert kind_of(raw) == kind
    assert kind in KIND_ORDER


def test_nvls_channels_count_when_setup_line_is_missing():
    # The "N nvls channels" line alone (2.2x form, https://github.com/NVIDIA/nccl/issues/1189 shape)
    line = "h:1:2 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer\n"
    assert parse(line).transport_kinds == ("NVLS",)
    assert parse(line.replace("16 nvls", "0 nvls")).transport_kinds == ()


# --- garbage -------------------------------------------------------------------------------


def test_empty_and_garbage_input_never_raise():
    assert parse("") == NcclLog()
    assert parse("\n\n   \n") == NcclLog()
    junk = random.Random(0).randbytes(200_000).decode("utf-8", errors="replace")
    log = parse(junk)
    assert log.transports == () and log.version is None
    truncated = (
        "vm:484:484 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[\n"
        "vm:484:484 [0] NCCL INFO NCCL version 2.2\n"
        "vm:484:484 [0] NCCL INFO comm 0x1 rank 0 nranks\n"
        "vm:484:484 [0] NCCL INFO Channel " + "9" * 5000 + "/0 : 0[0] -> 1[1] via P2P/IPC\n"
        "vm:484:484 [0] NCCL INFO init.cc:12 -> " + "9" * 5000 + "\n"
        "\x00\x00NCCL WARN\x00\n"
        "vm:484:484 [0] NCCL INFO " + "x" * 100_000 + "\n"
        "NCCL WARN"
    )
    log = parse(truncated)
    assert log.transports == () and log.communicators == () and log.version is None
    assert log.hosts == ("vm",)
    assert log.nccl_lines == 8
    json.dumps(log.to_json())


def test_bytes_are_decoded():
    assert parse(LOG_DIRECT.encode()).transports == parse(LOG_DIRECT).transports


def test_parse_file(tmp_path):
    assert parse_file(tmp_path / "missing.log") == NcclLog()
    assert parse_file(tmp_path) == NcclLog()  # a directory
    path = tmp_path / "rank0.log"
    path.write_bytes(b"\xff\xfe\x00garbage\n" + LOG_2_29_SOCKET.encode() + b"\x80\x81 trailing")
    log = parse_file(path)
    assert log.version == "2.29.2"
    assert log.transports == parse(LOG_2_29_SOCKET).transports


def test_to_json_is_plain_json():
    log = parse(LOG_2_18_NVLS + LOG_COLLNET)
    data = json.loads(json.dumps(log.to_json()))
    assert data["version"] == "2.18.3"
    assert data["transport_summary"] == {"P2P/direct": 3, "NVLS": 2, "CollNet": 1}
    assert data["transport_kinds"] == ["P2P/direct", "NVLS", "CollNet"]
    assert data["transports"][0] == {
        "channel": 0,
        "src_rank": 1,
        "src_dev": 1,
        "dst_rank": 2,
        "dst_dev": 2,
        "kind": "P2P/direct",
        "raw_transport": "P2P/direct pointer",
        "direction": None,
        "conn_index": 0,
    }
    assert data["hosts"] == ["gpu34", "nf5688m7-1"]
    assert data["init_complete"] is False  # the CollNet communicator never completed
    assert data["nranks"] == 8
    assert data["p2p_disabled_by_env"] is False


def test_tail():
    text = "a\nb\nc\n"
    assert tail(text, 2) == "b\nc"
    assert tail(text, 10) == "a\nb\nc"
    assert tail(text, 0) == ""
    assert tail("", 5) == ""


def test_tail_file(tmp_path):
    path = tmp_path / "big.log"
    path.write_text("".join(f"line {i}\n" for i in range(10_000)))
    assert tail_file(path, 3) == "line 9997\nline 9998\nline 9999"
    assert tail_file(path, 3, max_bytes=30) == "line 9997\nline 9998\nline 9999"
    assert tail_file(path, 100, max_bytes=30) == "line 9997\nline 9998\nline 9999"  # cut first line dropped
    assert tail_file(tmp_path / "missing", 3) == ""


def test_unmatched_channel_or_coll_line_still_checked_for_errors():
    # Not a connection line (format unknown to the parser), but it names an NCCL result.
    log = parse("h:1:2 [0] NCCL INFO Channel 00 : setup returned ncclInternalError\n")
    assert log.transports == ()
    assert log.errors == ("Channel 00 : setup returned ncclInternalError",)
    assert log.error_results == ("ncclInternalError",)
