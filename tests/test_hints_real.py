"""The hints knowledge base against real public failure logs (tests/data/real_failures.yaml).

Every confirmed entry, put where its `where` says it appears in a cell record and with no
fingerprint (a record made from a log alone), must get the hint of its cause (certain or possible)
and no hint whose fix contradicts it. Every packaged hint gives a fix and the real entries it is
built from (each id exists, and the hint fires on each); measured-fact hints fire as certain with the
fact present and matching, as possible with it missing, and not at all when it contradicts."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import hints, nccl_log
from harness.hints import Match, Rule, load, match

DATA = Path(__file__).parent / "data"
GiB = 1 << 30
MiB = 1 << 20


@lru_cache(maxsize=1)
def entries() -> dict[str, dict]:
    return {e["id"]: e for e in yaml.safe_load((DATA / "real_failures.yaml").read_text())}


def confirmed(entry: dict) -> bool:
    return not entry["confirmed_by"].startswith("not confirmed")


# The outcome a cell shows for an entry: a hang for the hangs, else a failure; two entries are about
# something else, as their fix says: gdr-1 is "not a crash: ~10x slower", gdr-2 "allreduce produced NaN".
STATUS = {"gdr-1": "slow", "gdr-2": "wrong"}


def log_record(entry: dict) -> dict:
    """A minimal cell record holding the excerpt where `where` says it appears, without a fingerprint
    (no GPU model, driver, /dev/shm, memlock or versions): only what a log shows."""
    text = entry["excerpt"].rstrip("\n")
    status = STATUS.get(entry["id"], "hang" if entry["expected_class"] == "hang" else "fail")
    outcome: dict[str, Any] = {"status": status, "reason": "", "seconds": 1.0, "phase": None, "error_class": None,
                               "detail": {}}
    raw: dict[str, Any] = {"ranks": {"0": {"phase": None, "error": None, "result": None}}, "nccl": {},
                           "launcher_tail": "", "forensics": {}}
    where = entry["where"]
    if where in ("rank-error", "traceback"):
        raw["ranks"]["0"]["error"] = {"phase": None, "error_class": None, "type": None, "message": text}
        outcome["reason"] = text
    elif where == "nccl-log":
        raw["nccl"]["0"] = nccl_log.parse(text).to_json()  # what the supervisor records of an NCCL log
        raw["forensics"] = {"nccl_tail": {"0": text}}
    else:  # launcher, dmesg, tool-output: what the launcher's output holds
        raw["launcher_tail"] = text
    return {"schema": 1, "cell": {"id": entry["id"]}, "env": {}, "outcome": outcome,
            "attempts": [{"attempt": 1, "outcome": outcome, "command": [], "raw": raw}]}


def fired(record: dict) -> dict[str, Match]:
    return {m.hint.id: m for m in match(record)}


@lru_cache(maxsize=1)
def built_from() -> dict[str, list[str]]:
    """entry id -> the hints that cite it as evidence (the packaged file's, read once: callers do not
    change what they get)."""
    cited: dict[str, list[str]] = {}
    for rule in load():
        for entry_id in rule.hint.evidence:
            cited.setdefault(entry_id, []).append(rule.hint.id)
    return cited


@lru_cache(maxsize=1)
def cause_hints() -> dict[str, set[str]]:
    """cause -> the hints built from some entry of that cause (read once, as built_from)."""
    by_cause: dict[str, set[str]] = {}
    for entry_id, hint_ids in built_from().items():
        by_cause.setdefault(entries()[entry_id]["cause"], set()).update(hint_ids)
    return by_cause


# Hints that may fire on an entry of another cause because the excerpt really shows their signature
# too and their fix does not contradict the entry's, reviewed one by one (none is needed today).
ALSO: dict[str, set[str]] = {}


def decided(entry: dict) -> bool:
    """Its log holds a fact that decides its cause (`undecided:` says why not, e.g. a bare "unhandled
    cuda error"): there a hint of its cause is owed; elsewhere silence is right."""
    return confirmed(entry) and "undecided" not in entry


# ---------------------------------------------------------------- every confirmed entry
CONFIRMED = [e for e in entries().values() if decided(e)]
UNDECIDED = [e for e in entries().values() if confirmed(e) and not decided(e)]


@pytest.mark.parametrize("entry", CONFIRMED, ids=[e["id"] for e in CONFIRMED])
def test_a_confirmed_real_log_gets_the_hint_of_its_cause(entry):
    got = fired(log_record(entry))
    mine = cause_hints().get(entry["cause"], set())
    assert mine, f"no hint is built from an entry of cause {entry['cause']}"
    assert mine & set(got), f"{entry['id']}: none of {sorted(mine)} fired; got {sorted(got)}"
    # no hint of another cause, whose fix would send the reader elsewhere
    foreign = set(got) - mine - ALSO.get(entry["id"], set())
    assert not foreign, f"{entry['id']} ({entry['cause']}) also got {sorted(foreign)}"


@lru_cache(maxsize=1)
def rules_by_id() -> dict[str, Rule]:
    """The packaged rules by hint id, read once (as built_from)."""
    return {rule.hint.id: rule for rule in load()}


def cited_fires(rule: Rule, entry: dict) -> bool:
    """The hint fires on an entry it cites: a generic one (shown only where no specific hint matched) on
    its own, since the entry's specific hint may stand in front of it."""
    if rule.generic:
        return bool(match(log_record(entry), [rule]))
    return rule.hint.id in fired(log_record(entry))


@pytest.mark.parametrize("entry_id", sorted(built_from()), ids=sorted(built_from()))
def test_each_hint_fires_on_every_entry_it_cites(entry_id):
    for hint_id in built_from()[entry_id]:
        assert cited_fires(rules_by_id()[hint_id], entries()[entry_id]), f"{hint_id} cites {entry_id} but does not fire on it"


@pytest.mark.parametrize("entry", UNDECIDED, ids=[e["id"] for e in UNDECIDED])
def test_where_the_log_cannot_decide_the_cause_no_certain_hint_names_another(entry):
    got = fired(log_record(entry))
    mine = cause_hints().get(entry["cause"], set()) | set(entry.get("also_named_by", ()))
    assert not {h for h, m in got.items() if m.certain and not m.generic} - mine, sorted(got)
    assert entry["undecided"].strip(), entry["id"]


def test_an_undecided_entry_is_cited_by_no_hint():
    assert not {e["id"] for e in UNDECIDED} & set(built_from())


def test_every_confirmed_entry_is_cited_by_a_hint():
    uncited = [e["id"] for e in CONFIRMED if e["id"] not in built_from()]
    assert not uncited


def test_every_cause_has_a_hint():
    assert {e["cause"] for e in CONFIRMED} <= set(cause_hints())


def test_a_victim_line_is_never_alone_on_a_root_cause():
    """The 'look at the other rank' hint may come with a root-cause hint, never instead of one."""
    for entry in CONFIRMED:
        got = set(fired(log_record(entry)))
        if got == {"remote-peer-lost"}:
            assert entry["cause"] in ("remote-error-victim", "socket-ifname"), entry["id"]
            assert any(w in entry["excerpt"] for w in ("remote process exited", "Connection reset", "Horovod has been shut down"))


# ---------------------------------------------------------------- the data file
def test_every_packaged_hint_has_a_fix_and_real_evidence():
    for rule in load():
        hint = rule.hint
        assert hint.fix, hint.id
        assert hint.evidence, hint.id
        missing = [e for e in hint.evidence if e not in entries()]
        assert not missing, f"{hint.id} cites unknown entries {missing}"


def test_every_hint_is_covered_by_a_real_entry():
    """Each hint fires on at least one real public log it cites."""
    for rule in rules_by_id().values():
        assert any(cited_fires(rule, entries()[e]) for e in rule.hint.evidence), rule.hint.id


def test_there_are_enough_hints_for_the_causes():
    assert len(load()) >= 25
    assert len(cause_hints()) == len({e["cause"] for e in entries().values() if "undecided" not in e})


# ---------------------------------------------------------------- measured facts: certain / possible / not
def with_fingerprint(record: dict, **facts: Any) -> dict:
    """The record with a fingerprint holding only the given facts (gpus, driver, shm, memlock, nccl, torch, env)."""
    record = copy.deepcopy(record)
    fp: dict[str, Any] = {"env": facts.pop("env", {})}
    if "gpus" in facts:
        fp["gpus"] = [{"index": i, "name": n} for i, n in enumerate(facts.pop("gpus"))]
        fp["device_count"] = len(fp["gpus"])
    if "driver" in facts:
        fp["driver"] = {"version": facts.pop("driver")}
    if "shm" in facts or "shm_writable" in facts:
        fp["shm"] = {"bytes": facts.pop("shm", 64 * GiB)} | ({"writable": facts.pop("shm_writable")}
                                                            if "shm_writable" in facts else {})
    if "compat" in facts:
        fp["libcuda"] = {"path": "/usr/local/cuda/compat/libcuda.so.1" if facts["compat"] else "/usr/lib/libcuda.so.1",
                         "compat": facts.pop("compat")}
    if "modes" in facts:
        fp["nvml"] = {"compute_modes": list(facts.pop("modes")), "version_mismatch": False}
    if "nvml_mismatch" in facts:
        fp["nvml"] = {"error_code": 18, "version_mismatch": True} if facts.pop("nvml_mismatch") else \
            {"compute_modes": ["default"], "version_mismatch": False}
    if "capability" in facts:
        fp["gpus"] = [{"index": 0, "name": "NVIDIA GPU", "capability": facts.pop("capability")}]
    if "memlock" in facts:
        fp["memlock"] = {"soft": facts.pop("memlock")}
    if "nccl" in facts:
        fp["nccl_loaded"] = {"version": facts.pop("nccl")}
    if "torch" in facts:
        fp["torch"] = facts.pop("torch")
    assert not facts, facts
    record["attempts"][0]["raw"]["phases"] = {"fingerprint": {"fingerprint": fp}}
    return record


def with_phase(record: dict, phase: str) -> dict:
    record = copy.deepcopy(record)
    record["outcome"]["phase"] = record["attempts"][0]["outcome"]["phase"] = phase
    return record


RTX = ("NVIDIA GeForce RTX 4090",) * 2

# (hint id, the real entry whose log shows the signature, facts that confirm it, facts that contradict it)
TABLE = [
    ("rtx40-p2p-hang", "p2p-hang-consumer-1", dict(gpus=RTX, driver="545.23.08"), dict(gpus=RTX, driver="550.54.15")),
    ("rtx40-p2p-hang", "p2p-hang-consumer-2", dict(gpus=RTX, driver="520.56.06"), dict(gpus=("NVIDIA H100",) * 2, driver="520.56.06")),
    ("shm-too-small", "shm-size-1", dict(shm=64 * MiB), dict(shm=16 * GiB)),
    ("shm-sigbus", "sigbus-shm-1", dict(shm=64 * MiB), dict(shm=64 * GiB)),
    ("memlock-too-low", "memlock-1", dict(memlock=8192 * 1024), dict(memlock="unlimited")),
    ("nccl-cumem-host-numa", "cumem-host-1", dict(driver="570.86.16"), dict(driver="580.65.06")),
    ("torch-device-id-hang", "device-id-hang-1", dict(torch="2.7.0+cu126"), dict(torch="2.7.1+cu126")),
    ("nccl-version-bug", "nccl-version-bug-1", dict(nccl="2.19.3"), dict(nccl="2.21.5")),
    ("nccl-version-bug", "nccl-version-bug-5", dict(nccl="2.19.3"), dict(nccl="2.20.3")),
    ("ddp-prepare-oom", "oom-ddp-init-2", dict(phase="prepare"), dict(phase="step")),
    # issue 23: the fact that makes each true, measured in the fingerprint, not the words around it
    ("shm-permission-denied", "shm-permission-1", dict(shm_writable=False), dict(shm_writable=True)),
    ("cuda-compat-unsupported-gpu", "cuda-compat-forward-1", dict(compat=True), dict(compat=False)),
    ("gpu-exclusive-process", "exclusive-process-mode-1", dict(modes=["exclusive_process"]), dict(modes=["default"])),
    ("bf16-unsupported-gpu", "bf16-unsupported-1", dict(capability="7.0"), dict(capability="8.6")),
    ("nvml-driver-mismatch", "nvml-mismatch-1", dict(nvml_mismatch=True), dict(nvml_mismatch=False, compat=False)),
    # the 803 of a compat libcuda: mapped (certain), or NVML fine and the host's own libcuda (no hint)
    ("nvml-driver-mismatch", "cuda-compat-forward-3", dict(compat=True), dict(nvml_mismatch=False, compat=False)),
    # NCCL 2.1.4+cuda9.1 (in its log) on a CUDA 8 driver (375) / on a driver that runs CUDA 9 (396)
    ("nccl-built-for-newer-cuda", "nccl-cuda-mismatch-1", dict(driver="375.26"), dict(driver="396.26")),
    ("efa-libfabric-too-old", "net-plugin-missing-2", dict(nccl="2.21.5"), dict(nccl="2.18.6")),
    ("efa-libfabric-too-old", "net-plugin-missing-1", dict(nccl="2.27.7"),
     dict(nccl="2.27.7", env={"FI_EFA_SET_CUDA_SYNC_MEMOPS": "0"})),
    # "insufficient" with a driver that answered (an old one), and from a rank that saw no GPU and no
    # driver at all (a container started without GPUs: h2-no-gpu-in-container-1's cause)
    ("driver-too-old", "driver-too-old-1", dict(driver="418.67"), dict(gpus=())),
    ("ib-mtu-mismatch", "h2b-ib-mtu-mismatch-1", dict(nccl="2.20.3"), dict(nccl="2.19.3")),
]


@pytest.mark.parametrize("hint_id,entry_id,present,contradicting", TABLE,
                         ids=[f"{t[0]}-{t[1]}" for t in TABLE])
def test_measured_facts_make_a_hint_certain_possible_or_nothing(hint_id, entry_id, present, contradicting):
    base = log_record(entries()[entry_id])

    def apply(facts: dict) -> dict:
        facts = dict(facts)
        phase = facts.pop("phase", None)
        record = with_phase(base, phase) if phase else base
        return with_fingerprint(record, **facts) if facts else record

    missing = fired(base).get(hint_id)
    assert missing is not None and not missing.certain, "fact missing: possible"
    assert missing.unknown and "not measured" in missing.caveat
    present_match = fired(apply(present)).get(hint_id)
    assert present_match is not None and present_match.certain, "fact present and matching: certain"
    assert present_match.caveat == ""
    assert hint_id not in fired(apply(contradicting)), "fact present and contradicting: no hint"


def test_a_rank_waiting_for_the_nccl_id_names_the_rank_that_never_sent_it():
    """torch's "retrieving ncclUniqueId from [0] ... Timeout waiting for key": rank 0 is behind, so the
    hint is the rank-behind one, certain from the log alone, and never the transport hang."""
    got = fired(log_record(entries()["h2-watchdog-timeout-2"]))
    assert got["watchdog-timeout"].certain and "transport-hang" not in got


def test_the_caveat_names_the_missing_facts():
    got = fired(log_record(entries()["p2p-hang-consumer-1"]))["rtx40-p2p-hang"]
    assert got.caveat.startswith("the log matches; ")
    for words in ("the GPU model", "the driver version"):
        assert words in got.caveat
    assert got.caveat.endswith("were not measured")


def test_text_alone_is_certain_when_the_hint_needs_no_measured_fact():
    got = fired(log_record(entries()["duplicate-gpu-1"]))["two-ranks-one-gpu"]
    assert got.certain


def test_facts_without_evidence_never_make_a_possible_hint():
    """A hang with nothing in the logs and nothing measured: no hint at all, not even possibly."""
    record = log_record(entries()["p2p-hang-consumer-2"])
    record["attempts"][0]["raw"]["launcher_tail"] = ""
    assert match(record) == []


def test_the_nccl_version_printed_in_a_message_is_a_fact():
    f = hints.facts(log_record(entries()["nccl-version-bug-3"]))  # "NCCL\nversion 2.14.3" in torch's error
    assert str(f.versions["nccl_loaded"]) == "2.14.3"
    assert fired(log_record(entries()["nccl-version-bug-3"]))["nccl-version-bug"].certain


# ---------------------------------------------------------------- logs beyond the tests: the message formats
# Lines in the formats of other NCCL / torch / CUDA versions than the ones in real_failures.yaml (the
# format strings of NCCL 2.18-2.26's WARNs, torch's messages), each with the hint that must fire.
FORMATS = [
    ("nccl-log", "node1:1:2 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes, error: No space left on device (28)", "shm-too-small"),
    ("nccl-log", "node1:1:2 [0] misc/shmutils.cc:128 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-Ab12Cd (size 9637888), error: No such file or directory (2)", "shm-too-small"),
    ("nccl-log", "node1:1:1 [0] bootstrap.cc:112 NCCL WARN Bootstrap : no socket interface found", "nccl-no-socket-interface"),
    ("nccl-log", "node1:1:1 [0] bootstrap.cc:513 NCCL WARN no device found matching eth9, verify NCCL_OOB_NET_IFNAME", "nccl-no-socket-interface"),
    ("nccl-log", "node1:1:1 [0] misc/socket.cc:556 NCCL WARN socketStartConnect: Connect to 172.17.0.1<43215> failed : No route to host", "nccl-socket-ifname"),
    ("nccl-log", "node1:1:1 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>", "nccl-socket-ifname"),
    ("nccl-log", "node1:1:9 [3] transport/net_ib.cc:2358 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<40000> with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_0", "ib-retry-exceeded"),
    ("nccl-log", "node1:1:9 [3] transport/net_ib.cc:2358 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<40000> with status=4 opcode=0 len=0 vendor err 81 (Send) hca mlx5_2", "gdr-broken"),
    ("nccl-log", "node1:1:9 [3] misc/ibvwrap.cc:376 NCCL WARN Call to ibv_modify_qp failed with 19 No such device, on dev mlx5_3:1", "ib-hca-unusable"),
    ("rank-error", "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'invalid argument' transport/nvls.cc:163 NCCL WARN Cuda failure 1 'invalid argument'", "nvls-multicast-failed"),
    ("rank-error", "[rank1]:[E526 10:00:00.000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", "watchdog-timeout"),
    ("rank-error", "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version", "driver-too-old"),
    ("rank-error", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized", "fabric-manager-not-running"),
    ("launcher", "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).", "rendezvous-port-in-use"),
    ("dmesg", "NVRM: API mismatch: the client has the version 550.90.07, but NVRM: this kernel module has the version 550.54.15.", "nvml-driver-mismatch"),
    ("traceback", "ImportError: /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommWindowRegister", "nccl-two-libraries"),
    ("traceback", "OSError: libnccl.so.2: cannot open shared object file: No such file or directory", "libnccl-missing"),
    ("rank-error", "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2003, remote process exited or there was a network error, NCCL version 2.27.3\nncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\nLast error:\nsocketProgress: Connection closed by remote peer node2<51159>", "remote-peer-lost"),
    ("nccl-log", "node1:1:9 [1] enqueue.cc:1665 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'", "illegal-memory-access"),
    # issue 23, GPU / driver / container / ranks: the same causes in other versions' and tools' words
    ("rank-error", "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)", "cuda-compat-unsupported-gpu"),
    ("nccl-log", "node1:1:2 [0] init.cc:1582 NCCL WARN Cuda failure 35 'CUDA driver version is insufficient for CUDA runtime version'", "nccl-built-for-newer-cuda"),
    ("rank-error", "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 35 'CUDA driver version is insufficient for CUDA runtime version'", "nccl-built-for-newer-cuda"),
    ("rank-error", "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable", "gpu-exclusive-process"),
    ("rank-error", "[rank1]: RuntimeError: CUDA error: invalid device ordinal", "rank-gpu-index-out-of-range"),
    ("rank-error", "ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.", "bf16-unsupported-gpu"),
    ("nccl-log", "node1:1:2 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ab12Cd (size 9637888), error: Permission denied (13)", "shm-permission-denied"),
    ("rank-error", "RuntimeError: CUDA error: no CUDA-capable device is detected", "no-gpu-in-container"),
    ("launcher", "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all", "cdi-device-unresolvable"),
    ("rank-error", "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device", "cuda-arch-not-in-build"),
    ("dmesg", "[ 1843.308145] NVRM: Xid (PCI:0000:44:00): 79, pid=2338, GPU has fallen off the bus.", "gpu-lost-hardware-fault"),
    ("nccl-log", "node1:1:9 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices", "peer-access-unsupported"),
    # network / launchers (issue 23): the same causes in other versions' and other launchers' words
    ("rank-error", "(RayWorkerWrapper pid=1890, ip=10.41.0.8) [rank8]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error", "gloo-socket-ifname"),
    ("rank-error", "[rank9]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())", "gloo-socket-ifname"),
    ("launcher", "ConnectionError: Tried to launch distributed communication on port `29501`, but another process is utilizing it. Please specify a different port", "rendezvous-port-in-use"),
    ("launcher", "[W1225 10:00:00.123456789 socket.cpp:752] [c10d] The IPv6 network addresses of (node-3.cluster.local, 29500) cannot be retrieved (gai error: -2 - Name or service not known).", "hostname-unresolvable"),
    ("launcher", "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (10.0.0.1, 29500).", "rendezvous-unreachable"),
    ("nccl-log", "[1,0]<stdout>:node:22:22 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available", "efa-devices-not-in-container"),
    ("rank-error", "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, internal error - please report this issue to the NCCL developers, NCCL version 2.26.2\nncclInternalError: Internal check failed.\nLast error:\nAttribute arch of node cpu not found", "nccl-topology-file"),
    # NCCL 2.28.9 on an H200 given a cut NCCL_TOPO_FILE (bench/real_errors.py, docs/real-errors-h200.json)
    ("rank-error", "DistBackendError: XML Parse : expected >, got '", "nccl-topology-file"),
    ("rank-error", "UCX  ERROR ib_mlx5_log.c:179  Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)", "ib-retry-exceeded"),
    # the ninth split, group h9b-: the container hook's and CUDA's messages in other releases' words
    ("launcher", "nvidia-container-cli: mount error: failed to add device rules: open /sys/fs/cgroup/devices/user.slice/devices.allow: permission denied: unknown.", "toolkit-cgroups-not-writable"),
    ("launcher", "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not permitted: unknown.", "toolkit-cgroups-not-writable"),
    ("rank-error", "numba.cuda.cudadrv.driver.LinkerError: [222] Call to cuLinkAddData results in CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "ptx-newer-than-driver"),
    ("launcher", "nvidia-container-cli.real: initialization error: driver rpc error: timed out: unknown.", "container-cli-driver-init"),
    # issue 23, driver / container / launchers: the same causes in other releases' and other tools' words
    ("launcher", "ERROR: This container was built for NVIDIA Driver Release 530.30 or later, but\n       version 470.82.01 was detected and compatibility mode is UNAVAILABLE.\n\n       [[CUDA Driver UNAVAILABLE (cuInit(0) returned 804)]]", "driver-too-old"),
    ("launcher", "ERROR: This container was built for NVIDIA Driver Release 440.33 or later, but\n       version 418.67 was detected and compatibility mode is UNAVAILABLE.\n\n       [[CUDA Driver UNAVAILABLE (cuInit(0) returned 804)]]", "cuda-compat-unsupported-gpu"),
    ("traceback", "  File \"/usr/lib/python3/dist-packages/pynvml.py\", line 2248, in nvmlInit\n    _nvmlCheckReturn(ret)\npynvml.NVMLError_DriverNotLoaded: Driver Not Loaded", "driver-module-not-loaded"),
    ("traceback", "pynvml.NVMLError_NoPermission: Insufficient Permissions", "gpu-device-permission-denied"),
    ("traceback", "  File \"/opt/conda/lib/python3.10/site-packages/pynvml.py\", line 979, in _nvmlCheckReturn\n    raise NVMLError(ret)\npynvml.NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.", "nvml-driver-mismatch"),
    ("launcher", "I0315 10:22:01.123456       1 main.go:256] Retrieving plugins.\nE0315 10:22:01.123789       1 factory.go:87] Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.\nE0315 10:22:01.123801       1 factory.go:88] If this is a GPU node, did you set the docker default runtime to `nvidia`?", "nvml-library-not-loaded"),
    ("traceback", "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found", "nvml-library-not-loaded"),
    ("launcher", "Usage: train.py [OPTIONS]\nTry 'train.py --help' for help.\n\nError: No such option: --local-rank", "local-rank-argument"),
    ("traceback", "absl.flags._exceptions.UnrecognizedFlagError: Unknown command line flag 'local_rank'", "local-rank-argument"),
    ("traceback", "ValueError: Some specified arguments are not used by the HfArgumentParser: ['--local_rank=1']", "local-rank-argument"),
    ("launcher", "torchrun: The term 'torchrun' is not recognized as a name of a cmdlet, function, script file, or executable program.\nCheck the spelling of the name, or if a path was included, verify that the path is correct and try again.", "launcher-not-on-path"),
    ("launcher", "fish: Unknown command: accelerate", "launcher-not-on-path"),
    ("launcher", "fish: Unknown command 'deepspeed'", "launcher-not-on-path"),
    ("launcher", "No PMIx server was reachable, but a PMI1/2 was detected.\nIf srun is being used to launch application,  4 singletons will be started.", "ompi-without-slurm-pmi"),
    ("launcher", "docker: Error response from daemon: could not select device driver \"cdi\" with capabilities: [].", "engine-without-cdi"),
    ("launcher", "Warning  FailedCreatePodSandBox  8s (x21 over 9m2s)  kubelet  Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"nvidia\" is configured", "container-gpu-runtime-missing"),
    # issue 23, NCCL's own and torch.distributed's (gloo's) messages in other releases' words
    # NCCL 2.18.3-2.22: the errno only in SYSCHECKGOTO's INFO trace (include/checks.h)
    ("nccl-log", "node1:1:2 [0] NCCL INFO misc/shmutils.cc:68 -> 2 (Permission denied)\nnode1:1:2 [0] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ab12Cd (size 9637888)", "shm-permission-denied"),
    # NCCL 2.26 and 2.27+ after retrying a refused / unreachable connect (misc/socket.cc)
    ("nccl-log", "node1:1:1 [0] misc/socket.cc:544 NCCL WARN socketPollConnect: connect returned Connection refused, exceeded error retry count (35)", "nccl-socket-ifname"),
    ("nccl-log", "node1:1:1 [0] misc/socket.cc:578 NCCL WARN socketStartConnect: connect to 10.0.0.2<43215> returned No route to host, exceeded error retry count after 35 attempts", "nccl-socket-ifname"),
    # NCCL 2.23+ bootstrap root (bootstrap.cc)
    ("nccl-log", "node1:1:1 [0] bootstrap.cc:310 NCCL WARN Bootstrap Root : mismatch in info from procs, nranks 8 vs 16, nroots 1 vs 1, iroot 0 vs 0", "world-size-mismatch"),
    # graph/xml.cc's other parse error and graph file, NCCL 2.30.7's graph/topo.cc
    ("nccl-log", "node1:1:1 [0] graph/xml.cc:102 NCCL WARN XML Parse error : unterminated comment", "nccl-topology-file"),
    ("nccl-log", "node1:1:1 [0] graph/xml.cc:854 NCCL WARN Could not open XML graph file /opt/microsoft/ndv4-graph.xml : No such file or directory", "nccl-topology-file"),
    ("rank-error", "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, internal error - please report this issue to the NCCL developers, NCCL version 2.30.7\nncclInternalError: Internal check failed.\nLast error:\nncclTopoGetSystemFromXml: system node not found in XML", "nccl-topology-file"),
    # NCCL 2.27-2.30.4 and 2.30.7 (misc/socket.cc)
    ("nccl-log", "node1:1:1 [0] misc/socket.cc:534 NCCL WARN socketFinalizeAccept from 10.0.0.2<51234>: wrong type 4 != 3", "nccl-peers-disagree-on-network"),
    ("nccl-log", "node1:1:1 [0] NCCL INFO socketFinalizeAccept from 10.0.0.2<51234>: wrong socket type (peer 4 != expected 3 -- peer connected to wrong NCCL socket), discarding peer connection", "nccl-peers-disagree-on-network"),
    # NCCL 2.28+ plugin/net.cc on the node that has the plugin
    ("launcher", "h11:1:2 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\nh04:3:4 [0] NCCL INFO Successfully loaded external network plugin /opt/amazon/ofi-nccl/lib/libnccl-net.so", "net-plugin-on-some-nodes"),
    # NCCL 2.30 misc/ibvsymbols.cc
    ("launcher", "node1:1:1 [0] NCCL INFO Count not open libibverbs.so\nnode1:1:1 [0] NCCL INFO Count not open libibverbs.so.1\nnode1:1:1 [0] NCCL INFO NET/Socket : Using [0]ib0:10.1.0.2<0>", "ibverbs-missing"),
    # gloo: torch 2.1-2.6 (one listening socket per device), torch 2.7+ (connect retries), device.cc's bind
    ("rank-error", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] write: Connection refused", "gloo-socket-ifname"),
    ("rank-error", "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, remote=[node-1]:43275", "gloo-socket-ifname"),
    ("rank-error", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] bind_rv == 0. Unable to find address for node-1; bind(2) for 10.0.0.7 failed with: Cannot assign requested address", "gloo-socket-ifname"),
    # gloo's collective timeout (tcp/unbound_buffer.cc)
    ("rank-error", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete", "watchdog-timeout"),
    # issue 23, g3: torch's, the frameworks' and the kernel's words for the same causes in other versions
    ("rank-error", "[rank3]:[E606 09:09:08.172519935 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: 1, last completed NCCL work: -1.", "watchdog-timeout"),
    ("rank-error", "[rank1]:[E ProcessGroupNCCL.cpp:1182] [PG 0 Rank 1] Received a global timeout from another rank and will start to dump the debug info. Last enqueued NCCL work: 57, last completed NCCL work: 56.", "watchdog-timeout"),
    ("rank-error", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:8594", "remote-peer-lost"),
    ("launcher", "slurmstepd: error: Detected 1 oom-kill event(s) in step 14037828.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.", "host-oom-killed"),
    ("launcher", "slurmstepd: error: Detected 2 oom-kill event(s) in StepId=10238881.0. Some of your processes may have been killed by the cgroup out-of-memory handler.\nsrun: error: gpu-n12: task 3: Out Of Memory", "host-oom-killed"),
    ("dmesg", "[Tue Mar  5 10:12:01 2024] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-1a2b.scope,mems_allowed=0-1,oom_memcg=/system.slice/docker-1a2b.scope,task=python,pid=48211,uid=0", "host-oom-killed"),
    ("rank-error", "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal SIGKILL", "host-oom-killed"),
    ("launcher", "trainer-1 exited with code 137", "host-oom-killed"),
    ("launcher", "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4\nInitializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4", "slurm-tasks-not-started"),
    ("rank-error", "[rank3]: Parameter indices which did not receive grad for rank 3: 149 150 151 152", "ddp-unused-parameters"),
    ("rank-error", "RuntimeError: [1]: params[0] in this process with sizes [96, 32] appears not to match sizes of the same param in process 0.", "ddp-model-mismatch"),
    ("rank-error", "RuntimeError: replicas[0][4] in this process with sizes [256, 128] appears not to match sizes of the same param in process 0.", "ddp-model-mismatch"),
    ("rank-error", "ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`", "fsdp-mixed-requires-grad"),
    ("rank-error", "ValueError: libnccl.so.*[0-9] not found in the system path ['/workspace', '/usr/lib/python310.zip', '/usr/lib/python3.10']", "libnccl-missing"),
    ("rank-error", "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58", "gpu-memory-too-small"),
    ("rank-error", "  File \"train.py\", line 88, in main\n    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])\nRuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCGeneral.cpp:663", "ddp-prepare-oom"),
    # the eleventh split's (h11c-) messages in other releases' and tools' words
    ("rank-error", "AssertionError: DistributedDataParallel device_ids and output_device arguments only work with single-device GPU modules, but got device_ids [2], output_device None, and module parameters {device(type='cpu')}.", "ddp-module-on-cpu"),
    ("rank-error", "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size32 != 8 * 1 * 8", "deepspeed-batch-size-mismatch"),
    ("rank-error", "Exception: Could not find the transformer layer class to wrap in the model.", "fsdp-wrap-class-not-found"),
    ("rank-error", "ValueError: Could not find the transformer layer class Qwen2DecoderLayer in the model.", "fsdp-wrap-class-not-found"),
    ("rank-error", "AssertionError: no sync context manager is incompatible with gradientpartitioning logic of ZeRo stage 3", "deepspeed-no-sync-zero"),
    ("launcher", "nvcc fatal   : Unsupported gpu architecture 'compute_120a'", "nvcc-arch-unsupported"),
    ("launcher", "nvcc fatal   : Value 'sm_89' is not defined for option 'gpu-architecture'", "nvcc-arch-unsupported"),
    ("rank-error", "ValueError: Attempting to unscale FP16 gradients.", "fp16-trainable-params"),
    ("rank-error", "FileNotFoundError: [Errno 2] No such file or directory: '/opt/conda/envs/train/bin/nvcc'", "cuda-home-missing"),
    ("launcher", "/bin/sh: 1: /usr/local/cuda/bin/nvcc: not found\nninja: build stopped: subcommand failed.", "cuda-home-missing"),
    ("rank-error", "ValueError: You can't train a model that has been loaded in 8-bit precision on multiple devices in any distributed mode.", "quantized-model-device-map"),
    # the eleventh split's signatures in other versions' and tools' words: NCCL's IB async events (<= 2.18, 2.19-2.22,
    # 2.23+), ORTE/PRRTE's oob and the old PTL of "received unexpected process identifier", CPython's debug-build GIL
    # check under torchrun, a find listing of two libnccl versions, Horovod's TF and MXNet extensions, NCCL's own old
    # CUDA launch symbol, KHO's debugfs files
    ("nccl-log", "node1:1:2 [0] NCCL WARN NET/IB : Got async event : port error", "ib-port-error-event"),
    ("nccl-log", "node1:1:2 [0] transport/net_ib.cc:95 NCCL WARN NET/IB : mlx5_3:1 Got async event : port error", "ib-port-error-event"),
    ("nccl-log", "node1:1:2 [0] transport/net_ib/init.cc:154 NCCL WARN NET/IB : mlx5_3:1 Got async error event: port error", "ib-port-error-event"),
    ("launcher", "[node1:01234] [[12345,0],1] tcp_peer_recv_connect_ack: received unexpected process identifier [[12345,0],2] from [[12345,0],0]", "mpi-tcp-nonrouted-interface"),
    ("launcher", "mca_ptl_tcp_peer_connect: received unexpected process identifier", "mpi-tcp-nonrouted-interface"),
    ("launcher", "Fatal Python error: _PyMem_DebugMalloc: Python memory allocator called without holding the GIL\nPython runtime state: initialized\n\nCurrent thread 0x00007f41936513c0 (most recent call first):\n  File \"/opt/conda/lib/python3.12/site-packages/torch/distributed/elastic/utils/store.py\", line 31 in get_all", "torchrun-store-gil-segfault"),
    ("launcher", "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f4ebf9d3740 (most recent call first):\n  File \"/home/u/.local/lib/python3.10/site-packages/torch/distributed/elastic/utils/store.py\", line 67 in barrier", "torchrun-store-gil-segfault"),
    ("tool-output", "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3\n/usr/local/nccl/lib/libnccl.so.2.21.5", "nccl-two-libraries"),
    ("traceback", "ImportError: /usr/local/lib/python3.8/dist-packages/horovod/tensorflow/mpi_lib.cpython-38-x86_64-linux-gnu.so: undefined symbol: _ZNK10tensorflow8OpKernel11TraceStringEPNS_15OpKernelContextEb", "horovod-built-against-other-framework"),
    ("traceback", "OSError: /usr/lib/python3.7/site-packages/horovod/mxnet/mpi_lib.cpython-37m-x86_64-linux-gnu.so: undefined symbol: MPI_Comm_dup", "horovod-built-against-other-framework"),
    ("traceback", "OSError: /usr/local/nccl-2.4/lib/libnccl.so.2.4.8: undefined symbol: cudaConfigureCall", "nccl-built-for-old-cuda-launch-api"),
    ("tool-output", "# cat /sys/kernel/debug/kho/out/scratch_len\n0xc000000", "kho-scratch-unpinnable"),
    # issue 23, eleventh split h11d-: vLLM's sleep mode, Ray, torch extensions in other releases' words
    ("rank-error", "(WorkerDict pid=812) File \"/opt/vllm/vllm/device_allocator/cumem.py\", line 230, in wake_up\n(WorkerDict pid=812)     create_and_map(handle)\n(WorkerDict pid=812) RuntimeError: CUDA Error: out of memory at /tmp/build/csrc/cumem_allocator.cpp:119", "vllm-wake-up-oom"),
    ("rank-error", "RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 0.8.7\n    Python: 3.7.7\n    Pyarrow: 0.14.1\nThis process on node 192.168.1.38 was started with:\n    Ray: 0.8.6\n    Python: 3.7.7\n    Pyarrow: 0.14.1", "ray-version-mismatch"),
    ("rank-error", "ERROR - failed to connect: Version mismatch: The cluster was started with:\n    Ray: 3.0.0.dev0\n    Python: 3.9.23\nThis process on Ray Client was started with:\n    Ray: 2.50.0\n    Python: 3.12.3", "ray-version-mismatch"),
    ("rank-error", "RuntimeError: Python minor versions differ between client and server: client is 3.8.10, server is 3.7.7", "ray-version-mismatch"),
    ("rank-error", "RuntimeError: Client Ray installation incompatible with server: client is 2021-05-20, server is 2021-12-07", "ray-version-mismatch"),
    ("launcher", "(raylet) [2023-04-09 07:23:59,445 E 395 395] (raylet) node_manager.cc:3049: 10 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: e5d9, IP: 10.0.62.231) over the last time period.", "host-oom-killed"),
    ("rank-error", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the node (IP: 10.0.62.231) where the task was running was 27.71GB / 28.80GB (0.962273), which exceeds the memory usage threshold of 0.95.", "host-oom-killed"),
    ("rank-error", "ray.exceptions.OutOfMemoryError: 2 worker(s) were killed due to the node running low on memory.", "host-oom-killed"),
    ("rank-error", "UserWarning: Failed to load image Python extension: '/opt/conda/lib/python3.10/site-packages/torchvision/image.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev'", "extension-built-for-other-torch"),
    ("traceback", "OSError: /usr/local/lib/python3.8/dist-packages/torchaudio/lib/libtorchaudio.so: undefined symbol: _ZNK3c104Type14isSubtypeOfExtERKSt10shared_ptrIS0_EPSo", "extension-built-for-other-torch"),
    ("traceback", "ImportError: /home/u/detectron2/detectron2/_C.cpython-38-x86_64-linux-gnu.so: undefined symbol: _Z16THPVariable_WrapN2at10TensorBaseE", "extension-built-for-other-torch"),
    # issue 23, twelfth split h12e-: ninja (torch's check, DeepSpeed's jit_load), a torch without an imported name (a
    # removed one, a nightly's), FSDP's dtype check (torch 1.12-1.13, 2.0+), GradScaler's fp16 gradients, TF32
    ("traceback", "RuntimeError: Unable to JIT load the fused_adam op due to ninja not being installed.", "ninja-missing"),
    ("traceback", "  File \"/opt/conda/lib/python3.8/site-packages/torch/utils/cpp_extension.py\", line 1500, in verify_ninja_availability\n    raise RuntimeError(\"Ninja is required to load C++ extensions\")", "ninja-missing"),
    ("traceback", "ImportError: cannot import name 'container_abcs' from 'torch._six' (/opt/conda/lib/python3.9/site-packages/torch/_six.py)", "torch-lacks-imported-name"),
    ("traceback", "ImportError: cannot import name 'fully_shard' from 'torch.distributed.fsdp' (/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/__init__.py)", "torch-lacks-imported-name"),
    ("traceback", "ValueError: `FlatParameter` requires uniform dtype but got torch.float16 and torch.float32", "fsdp-mixed-requires-grad"),
    ("traceback", "ValueError: Must flatten tensors with uniform dtype but got torch.bfloat16 and torch.float32", "fsdp-mixed-requires-grad"),
    ("traceback", "  File \"/usr/lib/python3/dist-packages/torch/cuda/amp/grad_scaler.py\", line 212, in _unscale_grads_\n    raise ValueError(\"Attempting to unscale FP16 gradients.\")", "fp16-trainable-params"),
    ("traceback", "ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7", "bf16-unsupported-gpu"),
    # issue 23, twelfth split h12d-: vLLM's Ray executor without a GPU worker on the driver's node, 0.2-0.6's check
    # (ray_gpu_executor.py) and ray_utils.py's from 0.5
    ("rank-error", "[rank0]: ValueError: Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group or running the driver on a GPU node.", "ray-driver-node-without-gpu"),
    ("launcher", "(EngineCore_DP0 pid=14400) ValueError: Current node has no GPU available. current_node_resource={'memory': 2151287372800.0, 'CPU': 192.0, 'node:10.0.0.3': 1.0}. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in a node current_node_id='a776' current_ip='10.0.0.3'.", "ray-driver-node-without-gpu"),
    # the twelfth split (h12b-/h12c-): Open MPI's slots refusal as 1.x-3.x wrap it, as 4.x/PRRTE wrap it, and a paste
    # that lost its first letter; Horovod's ssh check in both releases' words; SkyPilot's loopback node address
    ("launcher", "There are not enough slots available in the system to satisfy the 16 slots\nthat were requested by the application:\n  ./xhpl", "mpi-host-slots-syntax"),
    ("launcher", "There are not enough slots available in the system to satisfy the 4\nslots that were requested by the application:\n\n  python", "mpi-host-slots-syntax"),
    ("launcher", "here are not enough slots available in the system to satisfy the N\nslots that were requested by the application:", "mpi-host-slots-syntax"),
    ("launcher", "Checking ssh on all remote hosts.\nssh not successful for host hpc4:\nPermission denied, please try again.", "launcher-ssh-unreachable"),
    ("launcher", "ssh not successful for host 10.0.0.2.\nstderr:\n\nstdout:\n", "launcher-ssh-unreachable"),
    ("launcher", "RuntimeError: IP address 127.0.0.1 not found in cluster IPs: ['10.0.0.4', '10.0.0.5']", "hostname-resolves-to-loopback"),
    ("rank-error", "RuntimeError: IP address ::1 not found in cluster IPs: ['fd00::4', 'fd00::5']", "hostname-resolves-to-loopback"),
    # issue 23, twelfth split h12a-: GPU access from containers and clusters in other releases' and tools' words
    ("dmesg", "[ 39.753267] NVRM: API mismatch: the client has the version 260.19.44, but\n[ 39.753268] NVRM: this kernel module has the version 260.19.06. Please\n[ 39.753269] NVRM: make sure that this kernel module and all NVIDIA driver\n[ 39.753270] NVRM: components have the same version.", "nvml-driver-mismatch"),
    ("launcher", "Error: API mismatch: the NVIDIA kernel module has the version 1.0-9755, but this X module has the version 1.0-9631.  Please make sure that the kernel module and all NVIDIA driver components have the same version.", "nvml-driver-mismatch"),
    ("launcher", "Error: API mismatch: the NVIDIA kernel module has version 270.41.03,\nbut this NVIDIA driver component has version 270.18.  Please make\nsure that the kernel module and all NVIDIA driver components\nhave the same version.", "nvml-driver-mismatch"),
    ("tool-output", "ERROR: An error occurred while performing the step: \"Building kernel modules\". See /var/log/nvidia-installer.log for details.", "nvidia-dkms-build-failed"),
    ("tool-output", "FATAL: modpost: GPL-incompatible module nvidia-uvm.ko uses GPL-only symbol 'lockdep_init_map'", "nvidia-dkms-build-failed"),
    ("launcher", "Installing Linux kernel headers...\nE: Unable to locate package linux-headers-5.15.0-1070-aws", "driver-container-kernel-headers"),
    ("launcher", "Installing Linux kernel headers...\nNo package kernel-headers-3.10.0-1160.el7.x86_64 available.\nNo package kernel-devel-3.10.0-1160.el7.x86_64 available.\nError: Nothing to do", "driver-container-kernel-headers"),
    ("rank-error", "Fatal CUDA Error at cuda-hybrid-api.cu:612.\n Return value 46 from 'cudaMallocHost(ptr, size)'.  Exiting.", "gpu-exclusive-process"),
    ("traceback", "RuntimeError: Failed to dlopen libcuda.so.1", "wsl-driver-library"),
    ("rank-error", "thread 'main' panicked at src/lib.rs:98:5:\nUnable to dynamically load the \"cuda\" shared library - searched for library names: [\"cuda\", \"nvcuda\"]. Ensure that `LD_LIBRARY_PATH` has the correct path to the installed library.", "wsl-driver-library"),
    ("launcher", "Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: mount error: file creation failed: /run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a/rootfs/run/nvidia-persistenced/socket: no such device or address: unknown", "persistenced-socket-under-host-run"),
    ("launcher", "FATAL:   container creation failed: mount /run/nvidia-persistenced/socket->/run/nvidia-persistenced/socket error: while mounting /run/nvidia-persistenced/socket: destination /run/nvidia-persistenced/socket doesn't exist in container", "persistenced-socket-mountpoint-missing"),
    ("launcher", "mount: /run/nvidia-persistenced/socket: mount point does not exist.", "persistenced-socket-mountpoint-missing"),
    ("dmesg", "NVRM: The NVIDIA GPU 0000:05:00.0 (PCI ID: 10de:1d81)\nNVRM: installed in this system is not supported by open nvidia.ko\nNVRM: because it does not include the required GPU System Processor (GSP).", "open-module-unsupported-gpu"),
    ("dmesg", "[    3.513144] NVRM: To force use of Open nvidia.ko on other GPUs, see the\n[    3.513145] NVRM: 'OpenRmEnableUnsupportedGpus' kernel module parameter described", "open-module-unsupported-gpu"),
    # issue 23, thirteenth split h13c-: slurmd's gres.conf check in its log file's and syslog's lines; the API server's
    # RBAC refusal of a service account in 1.12+'s words (namespace, cluster scope, a subresource) and before 1.12
    ("launcher", "[2023-05-02T10:11:12.345] fatal: gres.conf duplicate records for gpu", "slurm-gres-duplicate-records"),
    ("dmesg", "May 23 12:49:52 gpu1 slurmd[1234]: slurmd: fatal: gres.conf duplicate records for mps", "slurm-gres-duplicate-records"),
    ("launcher", 'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:default:default" cannot list resource "pods" in API group "" at the cluster scope', "k8s-service-account-forbidden"),
    ("launcher", 'Error from server (Forbidden): pods "mj-worker-1" is forbidden: User "system:serviceaccount:default:mj-launcher" cannot create resource "pods/exec" in API group "" in the namespace "default"', "k8s-service-account-forbidden"),
    ("launcher", 'mpijobs.kubeflow.org is forbidden: User "system:serviceaccount:kubeflow:mpi-operator" cannot list mpijobs.kubeflow.org at the cluster scope', "k8s-service-account-forbidden"),
    ("launcher", 'pods is forbidden: User "system:serviceaccount:kube-system:default" cannot get pods in the namespace "default"', "k8s-service-account-forbidden"),
    # issue 23, thirteenth split h13b-: a process waiting on torch's extension build lock as a traceback, py-spy and
    # FileBaton's warning (2.5+) print it; setpci's read of the ACS Control word as NCCL's guide names it
    ("traceback", "  File \"/usr/local/lib/python3.10/dist-packages/torch/utils/file_baton.py\", line 42, in wait\n    time.sleep(self.wait_seconds)\nKeyboardInterrupt", "torch-extensions-stale-lock"),
    ("tool-output", "Thread 4120 (idle): \"MainThread\"\n    wait (torch/utils/file_baton.py:42)\n    _jit_compile (torch/utils/cpp_extension.py:1523)", "torch-extensions-stale-lock"),
    ("rank-error", "UserWarning: Waited on lock file \"/root/.cache/torch_extensions/py311_cu121/fused_adam/lock\" for 60 seconds.", "torch-extensions-stale-lock"),
    ("tool-output", "$ sudo setpci -s 0000:40:01.1 ECAP_ACS+0x6.w\n005d", "p2p-claimed-not-verified"),
    # issue 23, thirteenth split h13d-: other releases' and tools' words for the group's new and widened hints
    ("traceback", "AttributeError: module 'cupy.cuda' has no attribute 'nccl'. Did you mean: 'nvtx'?", "cupy-nccl-submodule-not-imported"),
    ("rank-error", "W tensorflow/core/framework/op_kernel.cc:1767] OP_REQUIRES failed\nRuntimeError: Collective ops must be configured at program startup", "tf-strategy-created-after-ops"),
    ("tool-output", "megatron/fused_kernels/build/layer_norm_cuda.o: file not recognized: File truncated\ncollect2: error: ld returned 1 exit status", "stale-object-files"),
    ("tool-output", "/usr/bin/ld: build/temp.linux-x86_64-3.8/csrc/fused.o: file not recognized: file format not recognized", "stale-object-files"),
    ("traceback", "RuntimeError: jax.distributed.initialize() must be called before any JAX computations are executed.", "jax-distributed-init-after-backend"),
    ("launcher", "Open MPI/Spectrum MPI/MPICH not found in output of mpirun --version.\n$ mpirun --version\nmpirun.real (OpenRTE) 4.1.2", "horovodrun-mpirun-wrapper"),
    ("launcher", "$ mpirun --version\norterun (OpenRTE) 3.1.6\nhorovodrun convenience script does not find an installed MPI.", "horovodrun-mpirun-wrapper"),
    ("traceback", "    from mpi4py import MPI\nImportError: /opt/conda/lib/libmpi.so.40: cannot open shared object file: No such file or directory", "mpi-binding-library-missing"),
    ("traceback", "OSError: libmpi_cxx.so.40: cannot open shared object file: No such file or directory", "mpi-binding-library-missing"),
    ("traceback", "tensorflow.python.framework.errors_impl.NotFoundError: No OpKernel was registered to support Op 'NcclAllReduce' with these attrs.  Registered devices: [CPU], Registered kernels:\n  <no registered kernels>", "nccl-not-built-in"),
    # issue 23, fourteenth split h14a- and h14b-: the other releases' and Accelerate's words for the group's hints
    ("rank-error", "[2024-01-20 10:00:00,000] [INFO] [comm.py:652:init_distributed] Not using the DeepSpeed or dist launchers, attempting to detect MPI environment...\nModuleNotFoundError: No module named 'mpi4py'", "rank-env-unset"),
    ("traceback", "  File \"/usr/local/lib/python3.8/dist-packages/deepspeed/utils/distributed.py\", line 63, in mpi_discovery\n    from mpi4py import MPI\nImportError: No module named 'mpi4py'", "rank-env-unset"),
    ("rank-error", "ValueError: Please correct the following DeepSpeed config values that mismatch kwargs values:\n- ds train_batch_size=64 vs arg train_batch_size=16", "deepspeed-batch-size-mismatch"),
    ("rank-error", "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\n- ds fp16.enabled=True vs hf fp16|fp16_full_eval+fp16_backend(amp)=False", "deepspeed-config-precision-mismatch"),
    ("traceback", "ValueError: `--mixed_precision` arg cannot be set to `fp16` when `bf16` is set in the DeepSpeed config file.", "deepspeed-config-precision-mismatch"),
    ("traceback", "ValueError: When using DeepSpeed, `accelerate.prepare()` requires you to pass at least one of training or evaluation dataloaders with `batch_size` attribute returning an integer value or alternatively set an integer value in `train_micro_batch_size_per_gpu` in the deepspeed config file", "accelerate-deepspeed-without-dataloader"),
    ("traceback", "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\n\tsize mismatch for base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight: copying a param with shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([8, 4096]).", "zero3-checkpoint-partitioned-weights"),
    # issue 23, fourteenth split h14c-: other tools' and releases' words for the group's new and widened hints
    ("launcher", "Failed to unload kernel module nvidia_uvm: resource temporarily unavailable\nCould not unload NVIDIA driver kernel modules, driver is in use\nfailed to uninstall nvidia driver components: failed to unload driver", "driver-container-modules-in-use"),
    ("launcher", "Error: unable to start container \"ecdb2132\": crun: error stat'ing file `/lib/x86_64-linux-gnu/libEGL_nvidia.so.535.161.07`: No such file or directory: OCI runtime attempted to invoke a command that was not found", "cdi-spec-stale"),
    ("launcher", "Error: crun: cannot stat `/usr/lib/libnvidia-egl-wayland.so.1.1.13`: No such file or directory: OCI runtime attempted to invoke a command that was not found", "cdi-spec-stale"),
    ("dmesg", "[    2.945] NVRM: installed in this system is not supported by open\n[    2.945] NVRM: nvidia.ko because it does not include the required GPU\n[    2.945] NVRM: System Processor (GSP).", "open-module-unsupported-gpu"),
    ("tool-output", "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Required key not available", "driver-module-not-loaded"),
    ("rank-error", "E0101 cuda_driver.cc:152] CUDA initialization failed with error 802", "fabric-manager-not-running"),
    ("launcher", "stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: mount error: failed to add device rules: unable to find any existing device filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE)", "toolkit-cgroups-not-writable"),
    # issue 23, fifteenth split h15f-: other releases' and wrappers' words for the group's new hints
    ("traceback", "  File \"/env/lib/python3.10/site-packages/deepspeed/runtime/engine.py\", line 1226, in _do_optimizer_sanity_check\n    raise ZeRORuntimeException(msg)\ndeepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer (<class 'transformers.optimization.AdamW'>) which in most cases will yield poor performance.", "zero-offload-client-optimizer"),
    ("traceback", "ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer (<class 'deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam'>) which in most cases will yield poor performance.", "deepspeed-cpu-optimizer-check-bug"),
    ("traceback", "AttributeError: 'DataParallel' object has no attribute 'save_pretrained'", "ddp-wrapper-attribute"),
    ("rank-error", "[rank1]: AssertionError: Expects tensor to be on the compute device cuda:1, was on cuda:0", "fsdp-current-device-unset"),
    ("traceback", "pytorch_lightning.utilities.exceptions.MisconfigurationException: Selected distributed backend ddp is not compatible with an interactive environment. Run your code as a script, or choose one of the compatible backends: dp, ddp_spawn, ddp_sharded_spawn, tpu_spawn", "lightning-ddp-interactive"),
    ("traceback", "  File \"/usr/local/lib/python3.8/dist-packages/deepspeed/utils/distributed.py\", line 74, in mpi_discovery\n    assert torch.distributed.get_rank() == rank, \"MPI rank {} does not match torch rank {}\".format(\nAssertionError: MPI rank 9 does not match torch rank 1", "mpi-torch-rank-mismatch"),
    ("rank-error", "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:12355 (errno: 99 - Cannot assign requested address).", "master-addr-localhost-resolution"),
    ("traceback", "  File \"/verl/protocol.py\", line 506, in chunk\n    assert len(self) % chunks == 0, f\"only support equal chunk. Got size of DataProto {len(self)} and chunk {chunks}.\"\nAssertionError: only support equal chunk. Got size of DataProto 6 and chunk 4.", "batch-not-divisible-by-world-size"),
    ("rank-error", "RuntimeError: Multiple CUDA devices detected but we require a single device.", "unsloth-multi-gpu-unsupported"),
    # issue 23, fifteenth split h15e-: other tools' and releases' words for the group's new and widened hints
    ("launcher", "$ enroot start ubuntu\nmkdir: cannot create directory '/var/lib/enroot/cache/group-1000': Permission denied", "enroot-path-not-writable"),
    ("launcher", "Dec 07 10:00:00 host dockerd[1234]: unable to configure the Docker daemon with file /etc/docker/daemon.json: the following directives are specified as a flag and in the configuration file: runtimes: (from flag: [nvidia], from file: map[nvidia:map[path:/usr/bin/nvidia-container-runtime]])", "docker-runtime-flag-and-file"),
    ("traceback", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 500: named symbol not found\n(docker container under WSL2)", "wsl-container-toolkit-too-old"),
    ("launcher", "E0410 nvidia-device-plugin: error starting plugins: error visiting devices: error visiting device: error visiting device: error getting device memory info: Insufficient Permissions", "mig-monitor-devices-unset"),
    ("launcher", "slurmstepd: error: pyxis:     nvidia-container-cli: mount error: file creation failed: /tmp/enroot-data/user-1000/pyxis_3.0/run/nvidia-persistenced/socket: no such device or address\nslurmstepd: error: pyxis:     [ERROR] /usr/local/etc/enroot/hooks.d/98-nvidia.sh exited with return code 1", "persistenced-socket-mountpoint-missing"),
    ("launcher", "time=\"2024-01-01T00:00:00Z\" level=panic msg=\"couldn't find binary nvidia-container-cli in /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin : exec: \\\"nvidia-container-cli\\\": executable file not found in $PATH\"", "container-gpu-runtime-missing"),
    ("tool-output", "==========\n== CUDA ==\n==========\n\nWARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n   Use the NVIDIA Container Toolkit to start this container with GPU support; see\n   https://docs.nvidia.com/datacenter/cloud-native/ .", "no-gpu-in-container"),
]


def test_an_nccl_net_channel_line_shows_the_ranks_connected():
    """NCCL's network channel lines say the direction before "via" (transport/net.cc): a hang after them is
    a transport hang (possibly: who was behind is not in a log)."""
    for line in ("node1:1:9 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/0/GDRDMA",
                 "node1:1:9 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] [send] via NET/Socket/0"):
        entry = {"id": "format", "where": "launcher", "excerpt": line, "expected_class": "hang", "cause": "?"}
        assert "transport-hang" in fired(log_record(entry))


def test_a_permission_error_on_dev_shm_is_not_called_a_size_problem():
    """NCCL's "error: Permission denied" on its /dev/shm segment names the mount's mode, not its size."""
    entry = {"id": "format", "where": "nccl-log", "expected_class": "shm", "cause": "?",
             "excerpt": "node1:1:2 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment "
                        "/dev/shm/nccl-Ab12Cd (size 9637888), error: Permission denied (13)"}
    got = fired(with_fingerprint(log_record(entry), shm=64 * MiB))
    assert "shm-permission-denied" in got and "shm-too-small" not in got


def test_nccl_saying_the_driver_is_too_old_is_not_the_generic_driver_hint():
    """The "driver version is insufficient" printed by NCCL's own CUDA runtime names NCCL's build."""
    got = fired(log_record(entries()["nccl-cuda-mismatch-2"]))
    assert "nccl-built-for-newer-cuda" in got and "driver-too-old" not in got
    assert "driver-too-old" in fired(log_record(entries()["driver-too-old-3"]))


@pytest.mark.parametrize("where,line,hint_id", FORMATS, ids=[f[2] + "-" + str(i) for i, f in enumerate(FORMATS)])
def test_other_versions_of_the_messages_match(where, line, hint_id):
    entry = {"id": "format", "where": where, "excerpt": line, "expected_class": "nccl", "cause": "?"}
    assert hint_id in fired(log_record(entry))


# ---------------------------------------------------------------- the report's wording
def test_the_report_words_a_possible_hint_as_a_possibility(tmp_path):
    from harness import report
    from harness.record import CellRecord
    from harness.results import RunData

    log_only = log_record(entries()["p2p-hang-consumer-1"])  # no fingerprint: GPU model and driver unknown
    measured = with_fingerprint(log_record(entries()["duplicate-gpu-1"]), gpus=RTX, driver="550.54.15")
    log_only["cell"], measured["cell"] = {"id": "log-only", "variant": "default"}, {"id": "measured", "variant": "default"}
    data = RunData(tmp_path / "run", {"run_id": "run"},
                   {"log-only": CellRecord.from_json(log_only), "measured": CellRecord.from_json(measured)}, {})
    section = report.render(data).split("## Known issues that match", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    rtx = next(line for line in lines if "RTX 40-series" in line)
    assert rtx.startswith("- Possibly: **RTX 40-series GPUs hang on PCIe peer-to-peer** (1 cell(s): `log-only`; "
                          "the log matches; ")
    assert "the GPU model" in rtx and "the driver version" in rtx and "were not measured)" in rtx
    assert "Fix: Set NCCL_P2P_DISABLE=1" in rtx
    two = next(line for line in lines if "Two ranks on one GPU" in line)
    assert two.startswith("- **Two ranks on one GPU** (1 cell(s): `measured`). ") and "Possibly" not in two
    assert "Fix: " in two and "[https://github.com/NVIDIA/nccl/issues/418]" in two


def test_an_alternative_that_holds_settles_its_any():
    """The hang shows P2P/IPC in the log, so the unknown phase of the other alternative is not named."""
    got = fired(log_record(entries()["p2p-hang-consumer-1"]))["rtx40-p2p-hang"]
    assert "phase" not in got.unknown
    assert set(got.unknown) == {"gpu_name", "gpu_count_min", "driver_below", "env_unset"}


# issue 23, twelfth split h12d-: a worker hung in vLLM's custom all-reduce set-up, as VLLM_TRACE_FUNCTION's last call,
# py-spy's dump and a traceback's frame say it, in 0.4's _gather_ipc_meta and 0.6+'s create_shared_buffer
@pytest.mark.parametrize("where,text", [
    ("tool-output", "==> vllm_trace_frame_for_process_2201_thread_1401 <==\n2024-09-02 10:11:12.1 Call to create_shared_buffer in /usr/lib/python3.10/site-packages/vllm/distributed/device_communicators/custom_all_reduce.py:150 from __init__ in /usr/lib/python3.10/site-packages/vllm/distributed/device_communicators/custom_all_reduce.py:132"),
    ("tool-output", "Thread 2201 (idle): \"MainThread\"\n    broadcast_object_list (torch/distributed/distributed_c10d.py:2603)\n    _gather_ipc_meta (vllm/distributed/device_communicators/custom_all_reduce.py:217)\n    __init__ (vllm/distributed/device_communicators/custom_all_reduce.py:190)"),
    ("rank-error", "  File \"/usr/local/lib/python3.10/dist-packages/vllm/model_executor/parallel_utils/custom_all_reduce.py\", line 222, in _gather_ipc_meta\n    dist.all_gather_object(all_data, data)\nKeyboardInterrupt"),
])
def test_a_worker_hung_in_vllms_custom_all_reduce_set_up_is_named(where, text):
    entry = {"id": "format", "where": where, "excerpt": text, "expected_class": "hang", "cause": "?"}
    assert "vllm-custom-allreduce-ipc-hang" in fired(log_record(entry))
