"""A next step that is true when no known issue matched (issue 23 item 2): from the subsystem that
reported the failure, the variables that control it and what to try, ending with the rescue search
for this cell.

Why by subsystem: a failure nobody here has seen still says where it happened. NCCL's WARN lines
carry the file that raised them (`transport/net_ib.cc:2360 NCCL WARN ...`, `misc/shmutils.cc`,
`bootstrap.cc`, `graph/xml.cc`) and most carry their subsystem's own tag (`NET/IB :`, `NET/Socket :`,
`NET/Plugin`, `Bootstrap :`); gloo's errors name gloo's TCP transport, torch's store and rendezvous
errors name themselves. Each subsystem is controlled by a few documented variables (NCCL's
environment variables page, its troubleshooting guide; torch's distributed docs for gloo and the
store), and switching it off or around it is the experiment that tells whether it is the cause,
which is also what the rescue search does, variable by variable, for NCCL cells.

Pure: `advise(record)` reads only the record (a CellRecord or its JSON), as hints.match does, and is
shown only where no specific hint matched: it never competes with a known issue's fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness import hints
from harness.record import CellRecord

__all__ = ["SUBSYSTEMS", "Advice", "Subsystem", "advise", "seen_in"]


@dataclass(frozen=True)
class Subsystem:
    """One part of the stack a failure can be reported by: how its lines are recognised, the variables
    that control it, and what to try (an experiment that tells whether it is the cause)."""

    name: str
    seen: re.Pattern[str]
    variables: tuple[str, ...]
    attempt: str


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# In the order they are looked for: the more specific first (an IB failure is also a "proxy" failure
# in NCCL's later lines; a socket failure inside the bootstrap is the bootstrap's). Every pattern is a
# fixed word or a file name followed by `:<line>`: no unbounded gap (textmatch.hazard's rules).
SUBSYSTEMS: tuple[Subsystem, ...] = (
    Subsystem("NET/Plugin (an external network plugin)",
              _rx(r"NET/Plugin\s?:.{0,120}(fail|error|could not|unable)|NET/OFI|\bnet_plugin\.cc:\d+|"
                  r"libnccl-net\S{0,40}\.so.{0,40}(fail|error)|ofi_?nccl|aws-ofi"),
              ("NCCL_NET_PLUGIN", "NCCL_NET", "FI_PROVIDER"),
              "run once with NCCL_NET=Socket (or NCCL_NET_PLUGIN=none) to leave the plugin out: if that passes, "
              "the plugin or its devices (EFA, RDMA inside the container) are the cause"),
    Subsystem("NET/IB (InfiniBand / RoCE verbs)",
              # a failing line that names the IB variables itself (Accelerate's RTX 4000 check: "Please set
              # `NCCL_P2P_DISABLE="1"` and `NCCL_IB_DISABLE="1"`")
              _rx(r"NET/IB\b|\bnet_ib\.cc:\d+|\bibvwrap\.cc:\d+|\bibv_\w{1,40}\b|\bmlx5_\d{1,3}\b.{0,40}(fail|error)|"
                  r"\bNCCL_IB_(DISABLE|HCA|GID_INDEX|TIMEOUT)\b"),
              ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_CROSS_NIC", "NCCL_IB_TIMEOUT", "NCCL_IB_DISABLE",
               "NCCL_BUFFSIZE", "NCCL_NET_DISABLE_INTRA"),
              "run once with NCCL_IB_DISABLE=1 (sockets instead of IB): if that passes, check the HCA list "
              "(NCCL_IB_HCA), the RoCE GID index (NCCL_IB_GID_INDEX), the rails (NCCL_CROSS_NIC=0 where only NICs "
              "of one index reach each other) and the links (ibstat); where the failing peer is on the same host, "
              "NCCL_NET_DISABLE_INTRA=1 keeps traffic inside the node off the NICs; where registering memory "
              "fails, the memlock limit and an NCCL_BUFFSIZE above its default"),
    Subsystem("GPUDirect RDMA",
              _rx(r"GPU Direct RDMA|GDRDMA|nv_peer_mem|nvidia[-_]peermem|\bgdrwrap\.cc:\d+|dmabuf"),
              ("NCCL_NET_GDR_LEVEL", "NCCL_DMABUF_ENABLE"),
              "run once with NCCL_NET_GDR_LEVEL=LOC (no GPUDirect RDMA): if that passes, check the nvidia-peermem "
              "module or dmabuf support (NCCL_DMABUF_ENABLE=0 to leave it out)"),
    Subsystem("NET/Socket (NCCL's TCP transport)",
              _rx(r"NET/Socket\s?:|\bnet_socket\.cc:\d+"),
              ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"),
              "name the interface the ranks share (NCCL_SOCKET_IFNAME=eth0, or =^docker,lo to leave those out), "
              "and check that nothing drops traffic between them (a firewall, MTU, a Kubernetes network policy)"),
    Subsystem("the network between ranks (NCCL's remote or network error)",
              _rx(r"remote process exited or there was a network error|ncclRemoteError|Connection reset by peer|"
                  r"Connection closed by remote peer"),
              ("NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"),
              "this rank lost its peer: find the first error on the other ranks or nodes; if none shows one, run "
              "once with NCCL_IB_DISABLE=1 and NCCL_SOCKET_IFNAME naming the interface the ranks share"),
    # NCCL's socket types (socket.h: 3 NetSocket, 4 NetIb): a connection of NET/IB's accepted where NET/Socket
    # listens (or the reverse), so one rank chose InfiniBand and its peer sockets (socket.cc's
    # "socketFinalizeAccept: wrong type %d != %d")
    Subsystem("the ranks' network transports (InfiniBand on one, sockets on another)",
              _rx(r"socketFinalizeAccept: wrong type (4 != 3|3 != 4)\b"),
              ("NCCL_IB_DISABLE", "NCCL_NET", "NCCL_IB_HCA"),
              "one rank connected over InfiniBand and its peer over sockets: check that IB works on every node "
              "(ibstat, ibv_devinfo: the ports Active) and that NCCL_IB_DISABLE / NCCL_NET / NCCL_IB_HCA are the "
              "same on all; run once with NCCL_IB_DISABLE=1 on every node to put them all on sockets"),
    Subsystem("bootstrap (NCCL's first connections between ranks)",
              _rx(r"Bootstrap\s?:|\bbootstrap\.cc:\d+|\bsocket\.cc:\d+|\bsocketProgress|\bncclSocket\w{0,20}\b|socket\.h:\d+|"
                  r"NCCL WARN (Call to connect|Connect to \S{1,80} failed)|"
                  # NCCL_COMM_ID's address: the bootstrap looks for a local interface in its subnet
                  r"same subnet as remote address"),
              ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_COMM_ID"),
              "the ranks could not reach each other on the interface NCCL chose: name the one they share "
              "(NCCL_SOCKET_IFNAME), force the address family (NCCL_SOCKET_FAMILY=AF_INET), and check the "
              "firewall between the nodes"),
    Subsystem("SHM (shared memory between ranks on one node)",
              _rx(r"\bshm\.cc:\d+|\bshmutils\.cc:\d+|\bshm\.h:\d+|shared memory segment|/dev/shm"),
              ("NCCL_SHM_DISABLE", "NCCL_SHM_USE_CUDA_MEMCPY", "NCCL_CUMEM_HOST_ENABLE"),
              "run once with NCCL_SHM_DISABLE=1: if that passes, check /dev/shm's size and permissions in the "
              "container (--ipc=host or --shm-size=1g); NCCL 2.24+ backs these buffers with cuMem host memory "
              "instead, which NCCL_CUMEM_HOST_ENABLE=0 turns back to /dev/shm files"),
    Subsystem("P2P (direct GPU-to-GPU copies)",
              _rx(r"\bp2p\.cc:\d+|via P2P/|P2P/IPC|P2P/CUMEM|cudaIpc\w{0,30}|peer access|\bNCCL_P2P_(DISABLE|LEVEL)\b"),
              ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"),
              "run once with NCCL_P2P_DISABLE=1 (the p2p-off variant): if that passes, check PCIe ACS and the "
              "IOMMU, or limit P2P to NVLink (NCCL_P2P_LEVEL=NVL)"),
    Subsystem("NVLS (NVLink SHARP multicast)",
              _rx(r"\bnvls\.cc:\d+|\bNVLS\b|multicast"),
              ("NCCL_NVLS_ENABLE",),
              "run once with NCCL_NVLS_ENABLE=0: if that passes, check the fabric manager and the NVSwitch "
              "driver on the host"),
    Subsystem("PXN (sending through another GPU's NIC over NVLink)",
              _rx(r"\bPXN\b|NCCL_P2P_PXN_LEVEL|NCCL_PXN_DISABLE|NCCL_NCHANNELS_PER_NET_PEER"),
              ("NCCL_PXN_DISABLE", "NCCL_P2P_PXN_LEVEL", "NCCL_NCHANNELS_PER_NET_PEER"),
              "run once with NCCL_PXN_DISABLE=1 (NCCL_P2P_PXN_LEVEL=0 on older NCCL): if that passes, PXN's path is "
              "the cause; unset NCCL_NCHANNELS_PER_NET_PEER where it was raised"),
    Subsystem("cuMem (NCCL's CUDA virtual memory)",
              _rx(r"\bcuMem\w{0,30}|CUMEM|\balloc\.h:\d+"),
              ("NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE"),
              "run once with NCCL_CUMEM_ENABLE=0 (and NCCL_CUMEM_HOST_ENABLE=0): if that passes, the driver or "
              "the container's permissions (NUMA, IPC handles) are the cause"),
    Subsystem("graph / topology (how NCCL sees the machine)",
              _rx(r"\bgraph/\w{1,30}\.cc:\d+|\btopo\.cc:\d+|\bxml\.cc:\d+|\bxml\.h:\d+|NCCL_TOPO_FILE|topology"),
              ("NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", "NCCL_IGNORE_CPU_AFFINITY"),
              "unset NCCL_TOPO_FILE if it is set (or fix the file it names), and write what NCCL detected with "
              "NCCL_TOPO_DUMP_FILE=/tmp/topo.xml to compare it with nvidia-smi topo -m"),
    Subsystem("proxy (NCCL's network progress thread)",
              _rx(r"\bproxy\.cc:\d+|\bProxy\w{0,20} (failed|error)|proxyState"),
              ("NCCL_IB_DISABLE", "NCCL_NET"),
              "the proxy fails when the network transport under it does: read the warnings before its own, and "
              "run once with NCCL_NET=Socket to tell the network from the rest"),
    Subsystem("gloo (torch's CPU collectives)",
              _rx(r"\bgloo\b|connectFullMesh|ProcessGroupGloo"),
              ("GLOO_SOCKET_IFNAME", "MASTER_ADDR"),
              "name the interface the ranks share (GLOO_SOCKET_IFNAME=eth0) and check that the hostname does not "
              "resolve to 127.0.1.1 on a multi-node run"),
    Subsystem("the store and rendezvous (torch's TCPStore, torchrun, accelerate launch)",
              _rx(r"TCPStore|rendezvous|DistNetworkError|MASTER_ADDR|MASTER_PORT|main_process_port|\[c10d\]|"
                  r"address already in use|EADDRINUSE|server socket has failed|"
                  # c10d's client socket (socket.cpp) is the store's: "The client socket has failed to connect to"
                  r"client socket has (failed|timed out)"),
              ("MASTER_ADDR", "MASTER_PORT"),
              "check that MASTER_ADDR resolves and is reachable from every node and that MASTER_PORT is free "
              "and open (a firewall, another job on the port)"),
    Subsystem("NCCL's buffers (its own GPU memory)",
              _rx(r"Cuda failure (2 )?.out of memory|Failed to CUDA calloc"),
              ("NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS"),
              "NCCL could not allocate its buffers: create the communicator before the model fills the GPU, check "
              "nvidia-smi for other processes on it, and lower NCCL_BUFFSIZE (or unset it where it was raised)"),
    # last: NCCL's bare result, with no WARN that names the call (a log at NCCL_DEBUG=WARN would); NCCL
    # 2.18 reports socket failures as "internal error - please report this issue" (h4d-socket-ifname-1,
    # h2c-nccl-version-bug-1: the cause was in an earlier WARN line)
    Subsystem("NCCL, without saying which call failed (its 'system error' or 'internal error')",
              _rx(r"unhandled system error|ncclSystemError|internal error - please report this issue|ncclInternalError"),
              ("NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE"),
              "run once with NCCL_DEBUG=WARN to see the call that failed; the usual ones are a socket on an "
              "interface the ranks do not share (NCCL_SOCKET_IFNAME), /dev/shm (NCCL_SHM_DISABLE=1 to check) and "
              "InfiniBand (NCCL_IB_DISABLE=1 to check)"),
)


# NCCL's return path at NCCL_DEBUG=INFO ("misc/socket.cc:567 -> 2": a call that returned result 2) is a
# failing line too, where no WARN line was kept
_FAILING = re.compile(r"\bWARN\b|\.cc:\d+ -> [1-9]|error|fail|refused|unreachable|timed? ?out|abort|denied|cannot|could not|"
                      r"\bhangs?\b|\bhung\b|deadlock|"
                      r"unable|mismatch|invalid|not found|no such|no (socket )?interface found", re.IGNORECASE)


@dataclass(frozen=True)
class Advice:
    """What to try for a cell no known issue matched: the subsystems its failure text names (most
    specific first, none when nothing does) and the cell's rescue command (None where the rescue
    search does not apply: a gloo cell, whose NCCL variables change nothing)."""

    cell_id: str
    subsystems: tuple[Subsystem, ...]
    rescue: str | None

    def text(self) -> str:
        """One paragraph, plain text (the report escapes it)."""
        if self.subsystems:
            first, *more = self.subsystems
            said = f"No known issue matched. The failure was reported by {first.name}: {first.attempt}."
            if more:
                said += " Also named: " + "; ".join(f"{s.name} ({', '.join(s.variables)})" for s in more) + "."
        else:
            said = "No known issue matched, and the failure names no subsystem."
        if self.rescue:
            said += f" Then `{self.rescue}` runs the rescue search: the smallest NCCL change that makes it pass."
        return said


def seen_in(texts: Iterable[str]) -> tuple[Subsystem, ...]:
    """The subsystems that these texts name, in SUBSYSTEMS' order."""
    texts = tuple(texts)
    return tuple(s for s in SUBSYSTEMS if any(s.seen.search(t) for t in texts))


def advise(record: CellRecord | Any, matched: Iterable[hints.Match] | None = None) -> Advice | None:
    """The advice for a cell that hung or failed with no specific known issue matched (`matched`: the
    hints already found for it, else found here); None for any other cell."""
    parsed = CellRecord.parse(record)
    if parsed is None or parsed.status not in ("fail", "hang"):
        return None
    found = list(hints.match(parsed) if matched is None else matched)
    if any(not m.generic for m in found):
        return None
    # the lines that say something went wrong: an INFO line names a subsystem that only started
    # ("NET/IB : Using [0]mlx5_0:1/IB"), not the one that failed
    failing = [line for text in hints.facts(parsed).texts for line in text.splitlines() if _FAILING.search(line)]
    gloo = parsed.cell.is_cpu
    rescue = None if gloo else f"invoke rescue {parsed.id}"
    return Advice(parsed.id or "?", seen_in(failing), rescue)
