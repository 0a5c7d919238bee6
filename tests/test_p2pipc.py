"""The P2P check the way NCCL uses the pair (issue 24 item 4; harness/workload/p2pipc.py): between the
rank processes, through CUDA IPC handles published in the process group's store, a driver-compiled
kernel that reads the peer's buffer and checks every element, bounded in time; recorded per ordered pair
in the check phase and read by the report and the hints.

Without a GPU here, the kernel itself runs on the GPU machine (bench/p2p_ipc.py); these tests hold its
text to the pattern the owner writes, assemble it with ptxas where the CUDA toolkit is installed, and
run the store protocol for real between processes (a driver that is not there, a rank that never
publishes)."""

from __future__ import annotations

import datetime
import multiprocessing as mp
import re
import shutil
import subprocess
import time

import pytest
import torch.distributed as dist

from harness import hints, report
from harness.payloads import PhaseEnd
from harness.record import CellRecord
from harness.workload import p2pipc
from harness.workload.phases import p2p_unused

from .test_hints import make_record


# ------------------------------------------------------------------- the pattern and the kernel
def test_the_owner_writes_the_values_the_kernel_expects():
    for seed in (p2pipc.seed_of(0), p2pipc.seed_of(7)):
        values = p2pipc.pattern(5000, seed)
        for i in (0, 1, 2, 4095, 4999):
            assert int(values[i]) & 0xFFFFFFFF == p2pipc.expected(i, seed)


def test_the_kernel_multiplies_by_the_same_constant_and_each_owner_has_its_own_pattern():
    text = p2pipc.PTX.decode()
    constant = int(re.search(r"mad\.lo\.s32 %r8, %r6, (-?\d+), %r2;", text).group(1))
    assert constant & 0xFFFFFFFF == p2pipc.GOLDEN
    seeds = {p2pipc.seed_of(r) for r in range(256)}
    assert len(seeds) == 256  # a reader that opened another rank's buffer finds every element wrong


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no CUDA toolkit (ptxas) on this machine")
def test_the_kernel_assembles_for_hopper(tmp_path):
    src = tmp_path / "check.ptx"
    src.write_bytes(p2pipc.PTX.rstrip(b"\x00"))
    done = subprocess.run(["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "check.cubin")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_rank_reads_the_buffers_of_its_host_on_other_gpus_only():
    me = {"rank": 1, "host": "a", "bus": "0000:02:00.0"}
    owners = [{"rank": 0, "host": "a", "bus": "0000:01:00.0", "handle": "00"},
              me | {"handle": "00"},
              {"rank": 2, "host": "a", "bus": "0000:02:00.0", "handle": "00"},  # the same GPU
              {"rank": 3, "host": "b", "bus": "0000:01:00.0", "handle": "00"},  # another host
              {"rank": 4, "host": "a", "bus": "0000:03:00.0", "error": "CudaError: cuMemAlloc_v2: out of memory"}]
    assert [o["rank"] for o in p2pipc.peers_to_read(me, owners)] == [0]
    assert [o["rank"] for o in p2pipc.peers_to_read(me | {"bus": None}, owners)] == [0, 2]  # same_gpu


@pytest.mark.parametrize("env, reason", [
    ({}, None), ({"NCCL_P2P_DISABLE": "0"}, None), ({"NCCL_P2P_LEVEL": "NVL"}, None),
    ({"NCCL_P2P_DISABLE": "1"}, "NCCL_P2P_DISABLE=1"), ({"NCCL_P2P_LEVEL": "loc"}, "NCCL_P2P_LEVEL=loc"),
])
def test_the_check_stays_out_of_cells_where_nccl_uses_no_p2p(env, reason):
    got = p2p_unused(env)
    assert (got is None) if reason is None else got.startswith(reason)


# ------------------------------------------------------------------- the store protocol, for real
def _rank(rank: int, world: int, port: int, prefix: str, timeout: float, out: mp.Queue) -> None:
    store = dist.PrefixStore(prefix, dist.TCPStore("127.0.0.1", port, is_master=False,
                                                   timeout=datetime.timedelta(seconds=timeout + 30)))
    t0 = time.monotonic()
    try:
        out.put((rank, p2pipc.exchange(rank, world, 0, store, store_timeout_s=timeout), time.monotonic() - t0))
    except Exception as exc:  # noqa: BLE001
        out.put((rank, f"{type(exc).__name__}: {exc}", time.monotonic() - t0))


def _run(world: int, present: int, prefix: str, timeout: float = 3.0) -> list:
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, world, master.port, prefix, timeout, out)) for r in range(present)]
    for p in procs:
        p.start()
    got = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
    return got


def test_without_a_gpu_driver_every_rank_says_why_its_buffer_was_not_offered_and_none_waits_for_it():
    got = _run(world=2, present=2, prefix="nodriver")
    assert [rank for rank, _, _ in got] == [0, 1]
    for _, answer, _ in got:
        assert isinstance(answer, dict), answer
        assert answer["pairs"] == []
        assert [u["rank"] for u in answer["unpublished"]] == [0, 1]
        assert all(u["error"] for u in answer["unpublished"])


def test_a_rank_that_never_reaches_the_check_ends_the_others_wait_within_the_store_timeout():
    (_, answer, seconds), = _run(world=2, present=1, prefix="absent", timeout=2.0)
    assert isinstance(answer, str) and seconds < 2.0 + 10, (answer, seconds)


# ------------------------------------------------------------------- what readers make of it
def _with_check(p2p: dict, **kw) -> dict:
    record = make_record(gpus=("NVIDIA H200", "NVIDIA H200"), **kw)
    record["attempts"][0]["raw"]["phases"]["check"] = {"phase": "check", "wrong_total": 0, "p2p_ipc": p2p}
    return record


READ = {"owner": 1, "reader": 0, "src": 1, "dst": 0, "bytes": 4 << 20, "seconds": 0.0012}


def test_the_report_names_each_pair_read_through_ipc_with_its_answer():
    ok = CellRecord.parse(_with_check({"pairs": [READ | {"result": True, "wrong": 0}]}))
    assert report.p2p_ipc_text(ok) == "GPU 1→0 (rank 1's buffer read by rank 0) ok (4 MiB, 1.2 ms)"
    bad = CellRecord.parse(_with_check({"pairs": [READ | {"result": False, "wrong": 17}]}))
    assert "WRONG DATA, 17 wrong" in report.p2p_ipc_text(bad)
    skipped = CellRecord.parse(_with_check({"skipped": "NCCL_P2P_DISABLE=1: NCCL does not use P2P in this cell"}))
    assert report.p2p_ipc_text(skipped).startswith("not run: NCCL_P2P_DISABLE=1")
    assert report.p2p_ipc_text(CellRecord.parse(make_record())) is None  # one GPU, older records


@pytest.mark.parametrize("result, broken", [(False, True), ("timeout", True), (True, False),
                                            ("CudaError: cuIpcOpenMemHandle: CUDA_ERROR_INVALID_DEVICE", False)])
def test_wrong_data_or_no_answer_through_ipc_is_p2p_that_does_not_work(result, broken):
    record = _with_check({"pairs": [READ | {"result": result}]}, status="hang", phase="prepare",
                         reason="no progress for 120s in prepare")
    assert hints.facts(record).peer_unverified is broken
    assert ("p2p-claimed-not-verified" in {m.hint.id for m in hints.match(record) if m.certain}) is broken


def test_what_a_rank_wrote_there_that_does_not_fit_is_left_out_and_named_the_rest_kept():
    problems: list[str] = []
    phase = PhaseEnd.tolerant({"event": "phase_end", "phase": "check", "p2p_ipc": {
        "pairs": [READ | {"result": True, "wrong": 0}, {"result": {"no": 1}, "src": -4}, "x"], "skipped": 7}}, problems)
    assert phase.p2p_ipc is not None
    assert [r.result for r in phase.p2p_ipc.pairs] == [True, None] and phase.p2p_ipc.skipped is None
    assert len(problems) == 4 and any("p2p_ipc.pairs[1].result" in p for p in problems)
    record = _with_check(phase.model_dump(mode="json", by_alias=True, exclude_none=True)["p2p_ipc"])
    assert report.p2p_ipc_text(CellRecord.parse(record)).startswith("GPU 1→0 (rank 1's buffer read by rank 0) ok")
