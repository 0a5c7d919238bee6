"""Parse NCCL_DEBUG=INFO output (one NCCL_DEBUG_FILE per rank) into plain values.

Why a parser at all: the NCCL log is the only place that says which transport NCCL really chose
(P2P, SHM, NET), whether it turned P2P off by itself or because of the environment, which NCCL
version was really loaded, and how far communicator init got before a hang. The harness records
these next to each cell's outcome, so a report can say "hung in prepare, P2P/CUMEM between GPU 0
and 1" instead of "hung".

Formats were read from NVIDIA/nccl (tags v2.18.3-1 .. v2.30.7-1) and checked against logs pasted in
public issues; the tests cite each source. Facts the code relies on:

* Line prefix (src/debug.cc): ``host:pid:tid [cudaDev] NCCL INFO msg``; WARN lines are
  ``\\nhost:pid:tid [cudaDev] file.cc:line NCCL WARN msg`` and since 2.30 ``file.cc:line (func)``.
  Newer versions put ``[%F %T] `` (NCCL_DEBUG_TIMESTAMP_FORMAT) before WARN lines by default.
* Version (src/init.cc): ``NCCL version 2.21.5+cuda12.4``, logged as INFO and, at
  NCCL_DEBUG=VERSION/WARN or to stdout in older versions, as a bare line without prefix.
* Connections (src/transport/p2p.cc, shm.cc, net.cc, coll_net.cc):
  ``Channel %02d/%d : %d[%d] -> %d[%d] via P2P/CUMEM/read`` (only the sending side logs P2P/SHM),
  ``Channel %02d : %d[%d] -> %d[%d] via SHM/direct/direct`` (no connIndex; ``SHM/direct`` in 2.30),
  ``Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/IB/0(1)/GDRDMA(PCI)/Shared``,
  ``CollNet %02d/%d : %d [send|receive] via COLLNET/SHARP/1/GDRDMA``.
  From 2.18.3 the bracket after a rank is the NVML device index; up to 2.18.1 it was the PCI bus
  id in hex (``0[1b000]``). NVLS has no connection line: its use shows as ``NVLS comm %p headRank``.
* Environment (src/misc/param.cc, src/graph/paths.cc): ``NAME set by environment to VALUE.``
  (numeric params end with a period). NCCL_P2P_DISABLE=1 is logged as
  ``NCCL_P2P_LEVEL set by environment to LOC`` up to 2.22 and as
  ``NCCL_P2P_DISABLE set by environment to 1`` from 2.23.4.
* Errors (src/include/checks.h): a failing call logs ``WARN`` once, then one INFO line per stack
  frame ``file.cc:123 -> 3`` (``file.cc:123 (func) -> 3`` in 2.30), 3 being the ncclResult_t.

The parser never raises: garbage, binary junk and truncated lines give an emptier result.
Standard library only, so the workload side could use it too.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import rankfiles
from .evidence import NcclSummary
from .workload.redact import shown_env

__all__ = [
    "COLLNET_PEER",
    "KIND_ORDER",
    "Communicator",
    "Connection",
    "NcclLog",
    "kind_of",
    "parse",
    "parse_file",
    "tail",
    "tail_file",
]

#: Normalised transport kinds, in the order reports show them. "NET" is any network plugin other
#: than the built-in Socket and IB ones (e.g. "AWS Libfabric"); "P2P" is any other P2P form
#: (P2P/indirect, P2P/MNNVL); "other" is a transport this parser does not know.
KIND_ORDER: tuple[str, ...] = (
    "P2P/CUMEM",
    "P2P/IPC",
    "P2P/direct",
    "SHM",
    "NET/Socket",
    "NET/IB",
    "NET",
    "NVLS",
    "CollNet",
    "P2P",
    "other",
)

#: The kinds that go through the network: the only ones between ranks on different nodes (P2P, SHM and
#: NVLS stay within one node; NVLS over MNNVL is not told apart here).
NETWORK_KINDS: tuple[str, ...] = ("NET/Socket", "NET/IB", "NET", "CollNet")

#: CollNet connections have no peer rank: the other end is the network. It is written as -1.
COLLNET_PEER = -1

#: ncclResult_t values (src/nccl.h.in); 7 (ncclInProgress) is never logged as an error by NCCL.
_RESULT_NAMES: dict[int, str] = {
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    8: "ncclTimeout",
}

#: Texts that name an NCCL result: the enum names (printed by torch and applications) and
#: ncclGetErrorString's messages (src/init.cc, unchanged 2.18 .. 2.30).
_RESULT_TEXTS: tuple[tuple[str, str], ...] = (
    ("ncclUnhandledCudaError", "ncclUnhandledCudaError"),
    ("ncclSystemError", "ncclSystemError"),
    ("ncclInternalError", "ncclInternalError"),
    ("ncclInvalidArgument", "ncclInvalidArgument"),
    ("ncclInvalidUsage", "ncclInvalidUsage"),
    ("ncclRemoteError", "ncclRemoteError"),
    ("unhandled cuda error", "ncclUnhandledCudaError"),
    ("unhandled system error", "ncclSystemError"),
    ("internal error - please report", "ncclInternalError"),
    ("invalid usage (run with", "ncclInvalidUsage"),
    ("remote process exited or there was a network error", "ncclRemoteError"),
)

# NCCL formats lines into a 1024-byte buffer; anything far longer is not an NCCL line. Capping
# also keeps pathological input (one huge line of junk) cheap.
_MAX_LINE = 8192
# What one log can add to the parse, at most (issue 22: a rank writing 500 MB of NCCL lines took the harness to
# 2.3 GB). A real init of 8 ranks on 32 channels logs about 1,000 connection lines and a few dozen distinct
# warnings; a log beyond these is noise or hostile, and its first facts are the ones kept.
_MAX_ITEMS = 4096

_LEVEL_RE = re.compile(r"NCCL (INFO|WARN) ?")
_HOST_RE = re.compile(r"([^\s:\[\]]+):(\d{1,10}):(\d{1,10})(?=\s)")
_VERSION_RE = re.compile(r"NCCL version (\d{1,3})\.(\d{1,3})\.(\d{1,4})[^\s+]*(?:\+cuda(\d{1,3}\.\d{1,3}))?")
_CHANNEL_RE = re.compile(
    r"Channel (\d{1,6})(?:/(\d{1,6}))? : (\d{1,9})\[([0-9a-fA-F]{1,16})\] -> (\d{1,9})\[([0-9a-fA-F]{1,16})\]"
    r"(?: \[(send|receive)\])? via (\S.*?)\s*$"
)
_COLLNET_RE = re.compile(
    r"Coll(?:Net)? (\d{1,6})(?:/(\d{1,6}))? : (\d{1,9}) \[(send|receive)\] via (COLLNET/\S.*?)\s*$"
)
_INIT_RE = re.compile(r"comm (\S+) rank (\d{1,9}) nranks (\d{1,9})\b.*?Init (START|COMPLETE)")
_FUNC_RE = re.compile(r"(nccl\w+) comm \S+ rank ")
_CUDADEV_RE = re.compile(r"\bcudaDev (-?\d{1,6})")
_NVMLDEV_RE = re.compile(r"\bnvmlDev (-?\d{1,6})")
_BUSID_RE = re.compile(r"\bbusId ([0-9a-fA-F]{1,16})\b")
_COMMID_RE = re.compile(r"\bcommId (0x[0-9a-fA-F]{1,16})\b")
_TOPO_RE = re.compile(r"comm \S+ rank \d{1,9} nRanks (\d{1,9}) nNodes \d")
_ABORT_RE = re.compile(r"- Abort (?:START|COMPLETE)")
_ENV_RE = re.compile(r"^([A-Z][A-Z0-9_]{0,127}) set by environment to (.*?)\s*$")
_TRACE_RE = re.compile(r"^\S+:\d{1,7}(?: \([^)]*\))? -> (\d{1,3})\b")
_NVLS_SETUP_RE = re.compile(r"^NVLS comm \S+ headRank ")
_NVLS_CHANNELS_RE = re.compile(r"\b(\d{1,4}) nvls channels\b")
# A WARN is an error when it says so; "vendor err 129" (NET/IB completion status) and a peer that
# closed its socket are the usual wordings of network failures that lack the word "error".
_ERRORISH_RE = re.compile(r"error|fail|\berr\b|closed by remote|abort", re.IGNORECASE)
_CALL_FAILED_RE = re.compile(r"Call to \S.{0,80}? failed")
_P2P_DISABLED_PATTERNS = (
    "P2P is disabled between",  # src/graph/paths.cc: NVML says no P2P (INFO; WARN for NVLink pairs)
    "Could not enable P2P between",  # src/transport/p2p.cc: cudaDeviceCanAccessPeer said no
    "peer query failed between",  # src/transport/p2p.cc: cudaDeviceCanAccessPeer failed
    "Legacy IPC not supported",  # src/transport/p2p.cc: cudaIpcGetMemHandle failed (WSL)
    "P2P not supported between",  # src/allocator.cc (2.2x+), NCCL_ALLOC subsystem
)


@dataclass(frozen=True)
class Connection:
    """One transport connection NCCL set up, as logged by the rank that wrote the line.

    ``src_dev``/``dst_dev`` are the NVML (physical) GPU indexes NCCL prints after each rank from
    2.18.3 on; None where the bracket held a PCI bus id (older NCCL) or nothing usable.
    For ``[receive]`` lines the source is the remote peer. CollNet lines name one rank only:
    the network side is ``COLLNET_PEER`` (-1).
    """

    channel: int
    src_rank: int
    src_dev: int | None
    dst_rank: int
    dst_dev: int | None
    kind: str
    raw_transport: str
    direction: str | None = None
    conn_index: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Communicator:
    """One communicator's init, from its ``Init START``/``Init COMPLETE`` lines.

    Kept because torch creates several communicators per rank (default group, splits, subgroups)
    and a hang can sit in the init of the second one while the first completed.
    """

    comm: str
    rank: int
    nranks: int
    func: str | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    comm_id: str | None = None
    started: bool = False
    complete: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NcclLog:
    """What one rank's NCCL log says. Empty (all defaults) when there was nothing to read.

    ``init_complete`` is True when an ``Init COMPLETE`` was seen and no communicator that logged
    ``Init START`` is still without its COMPLETE (so a hang in a later communicator's init is not
    hidden by an earlier one that finished). ``warnings``, ``errors``, ``p2p_disabled`` and
    ``error_trace`` hold distinct messages in first-seen order. ``errors`` is evidence, not a
    verdict: a WARN mentioning a failure NCCL recovered from is listed too. ``error_trace`` holds
    the ``file:line -> N`` frames and ``error_results`` the ncclResult_t names seen anywhere.
    ``nvls_setups`` counts communicators that set up NVLS (it has no connection lines).
    ``aborted`` means a communicator was aborted (torch's watchdog does that on a timeout).
    ``nccl_lines`` counts lines with an NCCL prefix: 0 means NCCL_DEBUG never reached the rank.
    """

    version: str | None = None
    cuda: str | None = None
    transports: tuple[Connection, ...] = ()
    p2p_disabled: tuple[str, ...] = ()
    env_settings: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    error_trace: tuple[str, ...] = ()
    error_results: tuple[str, ...] = ()
    init_complete: bool = False
    nranks: int | None = None
    hosts: tuple[str, ...] = ()
    communicators: tuple[Communicator, ...] = ()
    nvls_setups: int = 0
    aborted: bool = False
    nccl_lines: int = 0

    @property
    def transport_summary(self) -> dict[str, int]:
        """Connections per normalised kind, in KIND_ORDER; NVLS counts communicators using it."""
        counts = Counter(c.kind for c in self.transports)
        if self.nvls_setups:
            counts["NVLS"] += self.nvls_setups
        return {kind: counts[kind] for kind in KIND_ORDER if counts.get(kind)}

    @property
    def transport_kinds(self) -> tuple[str, ...]:
        """The kinds in use, in KIND_ORDER: the short answer to "which path did NCCL take"."""
        return tuple(self.transport_summary)

    @property
    def p2p_disabled_by_env(self) -> bool:
        """NCCL read NCCL_P2P_DISABLE=1: proof the variable reached the rank.

        NCCL 2.18 .. 2.22 log it as "NCCL_P2P_LEVEL set by environment to LOC", so both count.
        """
        return self.env_settings.get("NCCL_P2P_DISABLE") == "1" or self.env_settings.get("NCCL_P2P_LEVEL") in (
            "LOC",
            "0",
        )

    @property
    def pending_inits(self) -> tuple[Communicator, ...]:
        """Communicators whose init started but never completed: where an init hang sits."""
        return tuple(c for c in self.communicators if c.started and not c.complete)

    def summary(self, most: int = 20) -> NcclSummary:
        """What the record keeps of this log (the first `most` warnings and errors)."""
        return NcclSummary(version=self.version, transports=self.transport_summary, p2p_disabled=self.p2p_disabled,
                           env=self.env_settings, warnings=self.warnings[:most], errors=self.errors[:most],
                           init_complete=self.init_complete)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "cuda": self.cuda,
            "transports": [c.to_json() for c in self.transports],
            "transport_summary": self.transport_summary,
            "transport_kinds": list(self.transport_kinds),
            "p2p_disabled": list(self.p2p_disabled),
            "p2p_disabled_by_env": self.p2p_disabled_by_env,
            "env_settings": dict(self.env_settings),
            "warnings": list(self.warnings),
            "errors": list(self.errors),
            "error_trace": list(self.error_trace),
            "error_results": list(self.error_results),
            "init_complete": self.init_complete,
            "nranks": self.nranks,
            "hosts": list(self.hosts),
            "communicators": [c.to_json() for c in self.communicators],
            "nvls_setups": self.nvls_setups,
            "aborted": self.aborted,
            "nccl_lines": self.nccl_lines,
        }


def kind_of(raw_transport: str) -> str:
    """Normalise what follows "via" to one of KIND_ORDER, so versions and options compare."""
    raw = raw_transport.strip()
    if raw.startswith("P2P/CUMEM"):
        return "P2P/CUMEM"
    if raw.startswith("P2P/IPC"):
        return "P2P/IPC"
    if raw.startswith("P2P/direct"):
        return "P2P/direct"
    if raw.startswith("P2P"):
        return "P2P"
    if raw.startswith("SHM") or raw.startswith("direct shared memory"):
        return "SHM"
    if raw.startswith("NET/"):
        match = re.match(r"NET/(.+?)/\d", raw)
        name = match.group(1) if match else raw[4:]
        if name == "Socket":
            return "NET/Socket"
        if name.startswith("IB"):  # IB, IBext, IBext_v8 (nccl-rdma-sharp-plugins)
            return "NET/IB"
        return "NET"
    if raw.upper().startswith("COLLNET"):
        return "CollNet"
    if raw.startswith("NVLS"):
        return "NVLS"
    return "other"


def parse(text: str) -> NcclLog:
    """Parse the text of one NCCL debug file (or any stream with NCCL lines mixed in)."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8", errors="replace")
        except Exception:
            return NcclLog()
    try:
        return _Parser(text.splitlines()).run()
    except Exception:  # the contract is "never raise"; a bug here must not kill the supervisor
        return NcclLog()


def parse_file(path: str | os.PathLike[str]) -> NcclLog:
    """Parse a rank's NCCL debug file, read as the system under test's output (harness/rankfiles.py: no
    link followed, a regular file only, its head and tail when it is long, in pieces); a missing or
    unreadable one is an empty NcclLog, not an error."""
    try:
        return _Parser(rankfiles.lines(Path(path))).run()
    except Exception:  # OSError (absent, a link, a device) and, as for parse, never raise
        return NcclLog()


def tail(text: str, n: int = 50) -> str:
    """The last n lines of text, for forensics next to a hang or failure."""
    if n <= 0 or not text:
        return ""
    return "\n".join(text.splitlines()[-n:])


def tail_file(path: str | os.PathLike[str], n: int = 50, max_bytes: int = 1 << 20) -> str:
    """The last n lines of a rank's file, reading at most max_bytes from its end, as rankfiles reads (no
    link followed, a regular file only); "" when there is none to read."""
    try:
        data, _ = rankfiles.tail(Path(path), max(1, max_bytes))
    except OSError:
        return ""
    return tail(data.decode("utf-8", errors="replace"), n)


def _version_key(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return None


class _Distinct:
    """An ordered set of strings: repeated lines (one per channel, rank or retry) are noise."""

    def __init__(self) -> None:
        self._seen: dict[str, None] = {}

    def add(self, item: str) -> None:
        if item and len(self._seen) < _MAX_ITEMS:
            self._seen.setdefault(item, None)

    def values(self) -> tuple[str, ...]:
        return tuple(self._seen)


class _Parser:
    """One pass over the lines; mutable state here, frozen values out."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = lines
        self.version: str | None = None
        self.cuda: str | None = None
        self.version_is_bare = True  # True until a "+cudaX.Y" line (NCCL's own) was seen
        self.raw_connections: list[tuple[int, int, str, int, str, str, str | None, int | None]] = []
        self.collnet: list[Connection] = []
        self.p2p_disabled = _Distinct()
        self.env: dict[str, str] = {}
        self.warnings = _Distinct()
        self.errors = _Distinct()
        self.trace = _Distinct()
        self.results = _Distinct()
        self.hosts: set[str] = set()
        self.comms: list[dict[str, Any]] = []
        self.open_comm: dict[str, int] = {}
        self.topo_nranks: int | None = None
        self.nvls_setups = 0
        self.nvls_channel_lines = 0
        self.aborted = False
        self.nccl_lines = 0

    def run(self) -> NcclLog:
        for raw in self.lines:
            line = raw[:_MAX_LINE].replace("\x00", "")
            try:
                self._line(line)
            except Exception:  # one bad line costs that line only
                continue
        return self._result()

    # -- per line ---------------------------------------------------------------------------

    def _line(self, line: str) -> None:
        if "NCCL version" in line:
            self._version(line)
        level = _LEVEL_RE.search(line)
        if level is None:
            self._other(line)
            return
        self.nccl_lines += 1
        host = None
        for host in _HOST_RE.finditer(line, 0, level.start()):  # noqa: B007 - the last match is kept
            pass  # the last host:pid:tid before "NCCL" is the prefix, not a timestamp
        if host is not None:
            self.hosts.add(host.group(1))
        message = line[level.end():].strip()
        if level.group(1) == "WARN":
            self._warn(message)
        else:
            self._info(message)

    def _version(self, line: str) -> None:
        match = _VERSION_RE.search(line)
        if match is None:
            return
        version = ".".join(match.group(1, 2, 3))
        cuda = match.group(4)
        # NCCL's own line carries "+cudaX.Y"; torch's error messages repeat the version without
        # it. The first NCCL line wins; a bare version only fills in when nothing better exists.
        if cuda is not None and self.version_is_bare:
            self.version, self.cuda, self.version_is_bare = version, cuda, False
        elif self.version is None:
            self.version = version

    def _warn(self, message: str) -> None:
        self.warnings.add(message)
        if any(p in message for p in _P2P_DISABLED_PATTERNS):
            self.p2p_disabled.add(message)
        if _ERRORISH_RE.search(message) or self._result_names(message):
            self.errors.add(message)
            for name in self._result_names(message):
                self.results.add(name)

    def _info(self, message: str) -> None:
        trace = _TRACE_RE.match(message)
        if trace is not None:
            code = int(trace.group(1))
            if code in _RESULT_NAMES:
                self.trace.add(message)
                self.results.add(_RESULT_NAMES[code])
            return
        if message.startswith("Channel ") and self._channel(message):
            return
        if message.startswith("Coll") and self._collnet(message):
            return
        if "set by environment to" in message:
            self._env(message)
            return
        if "Init START" in message or "Init COMPLETE" in message:
            self._init(message)
            return
        if any(p in message for p in _P2P_DISABLED_PATTERNS):
            self.p2p_disabled.add(message)
            return
        if _NVLS_SETUP_RE.match(message):
            self.nvls_setups += 1
            return
        channels = _NVLS_CHANNELS_RE.search(message)
        if channels is not None and " coll channels" in message:
            if int(channels.group(1)) > 0:
                self.nvls_channel_lines += 1
            return
        topo = _TOPO_RE.search(message)
        if topo is not None:
            nranks = int(topo.group(1))
            self.topo_nranks = max(self.topo_nranks or 0, nranks)
            return
        if _ABORT_RE.search(message):
            self.aborted = True
            return
        names = self._result_names(message)
        if names:  # INFO lines rarely name a result, but when they do it is an error
            self.errors.add(message)
            for name in names:
                self.results.add(name)

    def _other(self, line: str) -> None:
        """A line without an NCCL level: torch or application output in the same stream."""
        text = line.strip()
        if not text:
            return
        names = self._result_names(text)
        if names or "Cuda failure" in text or _CALL_FAILED_RE.search(text) or "NCCL error" in text:
            self.errors.add(text)
            for name in names:
                self.results.add(name)

    @staticmethod
    def _result_names(text: str) -> list[str]:
        found: list[str] = []
        for needle, name in _RESULT_TEXTS:
            if needle in text and name not in found:
                found.append(name)
        return found

    def _channel(self, message: str) -> bool:
        match = _CHANNEL_RE.match(message)
        if match is None:  # ring lines "Channel 00/02 :    0   1" and other forms
            return False
        channel, conn, src, src_dev, dst, dst_dev, direction, via = match.groups()
        if len(self.raw_connections) >= _MAX_ITEMS:
            return True
        self.raw_connections.append(
            (
                int(channel),
                int(src),
                src_dev,
                int(dst),
                dst_dev,
                via,
                direction,
                int(conn) if conn is not None else None,
            )
        )
        return True

    def _collnet(self, message: str) -> bool:
        match = _COLLNET_RE.match(message)
        if match is None:
            return False
        channel, conn, rank, direction, via = match.groups()
        if len(self.collnet) >= _MAX_ITEMS:
            return True
        me = int(rank)
        src, dst = (me, COLLNET_PEER) if direction == "send" else (COLLNET_PEER, me)
        self.collnet.append(
            Connection(
                channel=int(channel),
                src_rank=src,
                src_dev=None,
                dst_rank=dst,
                dst_dev=None,
                kind="CollNet",
                raw_transport=via,
                direction=direction,
                conn_index=int(conn) if conn is not None else None,
            )
        )
        return True

    def _env(self, message: str) -> None:
        match = _ENV_RE.match(message)
        if match is None:
            return
        name, value = match.groups()
        if value.endswith("."):  # numeric params are logged as "... to 1."
            value = value[:-1]
        if name not in self.env and len(self.env) >= _MAX_ITEMS:
            return
        self.env[name] = value
        if (name == "NCCL_P2P_DISABLE" and value.strip() == "1") or (
            name == "NCCL_P2P_LEVEL" and value.strip() in ("LOC", "0")
        ):
            self.p2p_disabled.add(f"{name} set by environment to {value}")

    def _init(self, message: str) -> None:
        match = _INIT_RE.search(message)
        if match is None:
            return
        comm, rank, nranks, stage = match.groups()

        def opt_int(regex: re.Pattern[str]) -> int | None:
            found = regex.search(message)
            return int(found.group(1)) if found else None

        def opt_str(regex: re.Pattern[str]) -> str | None:
            found = regex.search(message)
            return found.group(1) if found else None

        func = _FUNC_RE.search(message)
        facts = {
            "comm": comm,
            "rank": int(rank),
            "nranks": int(nranks),
            "func": func.group(1) if func else None,
            "cuda_dev": opt_int(_CUDADEV_RE),
            "nvml_dev": opt_int(_NVMLDEV_RE),
            "bus_id": opt_str(_BUSID_RE),
            "comm_id": opt_str(_COMMID_RE),
        }
        if len(self.comms) >= _MAX_ITEMS:
            return
        if stage == "START":
            self.comms.append({**facts, "started": True, "complete": False})
            self.open_comm[comm] = len(self.comms) - 1
            return
        index = self.open_comm.pop(comm, None)
        if index is not None and not self.comms[index]["complete"]:
            entry = self.comms[index]
            for key, value in facts.items():
                if entry.get(key) is None:
                    entry[key] = value
            entry["complete"] = True
        else:  # no START seen (older NCCL, or the log was cut at the front)
            self.comms.append({**facts, "started": False, "complete": True})

    # -- result -------------------------------------------------------------------------------

    def _device(self, bracket: str, nvml_brackets: bool | None) -> int | None:
        """The bracket after a rank: NVML index from 2.18.3, PCI bus id (hex) before."""
        if nvml_brackets is False or not bracket.isdigit():
            return None
        if nvml_brackets is None and len(bracket) > 3:  # unknown version: a long one is a bus id
            return None
        return int(bracket)

    def _result(self) -> NcclLog:
        key = _version_key(self.version)
        nvml_brackets = None if key is None else key >= (2, 18, 3)
        transports = [
            Connection(
                channel=channel,
                src_rank=src,
                src_dev=self._device(src_dev, nvml_brackets),
                dst_rank=dst,
                dst_dev=self._device(dst_dev, nvml_brackets),
                kind=kind_of(via),
                raw_transport=via,
                direction=direction,
                conn_index=conn,
            )
            for channel, src, src_dev, dst, dst_dev, via, direction, conn in self.raw_connections
        ]
        transports.extend(self.collnet)
        communicators = tuple(Communicator(**entry) for entry in self.comms)
        nranks_seen = [c.nranks for c in communicators]
        if self.topo_nranks is not None:
            nranks_seen.append(self.topo_nranks)
        any_complete = any(c.complete for c in communicators)
        pending = any(c.started and not c.complete for c in communicators)
        nvls = self.nvls_setups or self.nvls_channel_lines
        return NcclLog(
            version=self.version,
            cuda=self.cuda,
            transports=tuple(transports),
            p2p_disabled=self.p2p_disabled.values(),
            # NCCL logs every NCCL_ setting it reads, values included (masked unless safe; a value is never None)
            env_settings={k: v for k, v in shown_env(self.env).items() if v is not None},
            warnings=self.warnings.values(),
            errors=self.errors.values(),
            error_trace=self.trace.values(),
            error_results=self.results.values(),
            init_complete=any_complete and not pending,
            nranks=max(nranks_seen) if nranks_seen else None,
            hosts=tuple(sorted(self.hosts)),
            communicators=communicators,
            nvls_setups=nvls,
            aborted=self.aborted,
            nccl_lines=self.nccl_lines,
        )
