"""Classification of an attempt's raw record: one row per outcome, plus real records from the H200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness import outcome
from harness.outcome import Outcome, classify, launcher_failures
from harness.workload.classify import classify_text

DATA = Path(__file__).parent / "data"


def rank(phase="teardown", error=None, result="ok", wrong=0, busbw=10.0):
    res = None if result is None else {"status": result, "wrong_total": wrong, "largest_busbw_gbs": busbw}
    return {"phase": phase, "error": error, "result": res}


def err(phase, cls, message, wall=1.0, type_="RuntimeError"):
    return {"phase": phase, "error_class": cls, "message": message, "type": type_, "wall": wall}


ELASTIC_TAIL = """
Failures:
[1]:
  time      : 2026-11-29_15:26:22
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 7250)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 7250
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_15:26:22
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 7249)
"""

# torch 2.11 / NCCL 2.28.9 on 2x H200 with NCCL_SOCKET_IFNAME=nosuchif0 and P2P/SHM off.
INVALID_USAGE = """NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, invalid usage \
(run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Bootstrap : no socket interface found"""
# The wording of https://github.com/pytorch/pytorch/issues/ (driver older than the runtime, wrapped by NCCL).
DRIVER_TOO_OLD = """NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled cuda error, \
NCCL version 2.14.3
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'"""
# torch's watchdog on rank 0 while rank 1 was stopped in prepare (seen on 2x H200, Timeout(ms)=90000),
# then torch elastic's summary after the watchdog aborted rank 0.
WATCHDOG_TAIL = """[rank0]:[E1129 10:01:31.123 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation \
timeout: WorkNCCL(SeqNum=2, OpType=ALLGATHER, NumelIn=1, NumelOut=2, Timeout(ms)=90000) ran for 90041 milliseconds \
before timing out.
[rank0]:[E1129 10:01:31.124 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 0] failure detected by \
watchdog at work sequence id: 2 PG status: last enqueued work: 2, last completed work: 1
Failures:
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 7251)
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 7250)  (SIGABRT)
"""

CASES = [
    # (name, raw record, status, phase, error_class, words in reason)
    ("pass", {"ended_by": "exited", "exit_code": 0, "expected_ranks": 2, "ranks": {"0": rank(), "1": rank(busbw=12.5)}},
     "pass", None, None, ["busbw 12.50 GB/s"]),
    ("pass one rank", {"ended_by": "exited", "exit_code": 0, "expected_ranks": 1, "ranks": {"0": rank(busbw=0)}},
     "pass", None, None, ["one rank", "no GPU-to-GPU (or rank-to-rank) path was exercised"]),
    ("slow", {"ended_by": "exited", "exit_code": 0, "expected_ranks": 2, "ranks": {"0": rank(busbw=0.4), "1": rank(busbw=0.5)}},
     "slow", "bandwidth", None, ["busbw 0.50 GB/s", "below the 1 GB/s floor"]),
    ("wrong", {"ended_by": "exited", "exit_code": 0, "expected_ranks": 2, "ranks": {"0": rank(wrong=3), "1": rank(wrong=3)}},
     "wrong", "check", None, ["3 wrong"]),
    ("hang", {"ended_by": "stall", "ranks": {}, "stall": {"phase": "prepare", "threshold": 120, "since_progress": 121.2,
              "ranks_behind": [1], "why_behind": {"1": "silent for 121s (stopped or frozen)"}}},
     "hang", "prepare", None, ["no progress for 121s in prepare", "rank 1 silent"]),
    # data wrong in one collective of the sweep only: that collective and its sizes, never "all-reduce"
    ("wrong in all-gather only", {"ended_by": "exited", "exit_code": 0, "expected_ranks": 2,
                                  "ranks": {"0": rank(wrong=8), "1": rank(wrong=8)},
                                  "phases": {"check": {"phase": "check", "wrong_total": 0}, "bandwidth": {
                                      "phase": "bandwidth", "rows": [{"bytes": 1 << 20, "wrong": 0}],
                                      "collectives": {"all_gather": {"rows": [{"bytes": 4096, "wrong": 0},
                                                                              {"bytes": 1 << 20, "wrong": 8,
                                                                               "collective": "all_gather"}]}}}}},
     "wrong", "bandwidth", None, ["all_gather returned 8 wrong element(s) at 1 MiB"]),
    # a hang in the sweep says the collective and the size it was in when progress stopped
    ("hang in one collective", {"ended_by": "stall", "ranks": {}, "stall": {
        "phase": "bandwidth", "threshold": 120, "since_progress": 121.0, "ranks_behind": [1], "step": "all_gather at 64 KiB",
        "why_behind": {"1": "silent for 121s (stopped or frozen)"}}},
     "hang", "bandwidth", None, ["no progress for 121s in bandwidth (all_gather at 64 KiB)"]),
    ("hang on one of two nodes", {"ended_by": "stall", "ranks": {
        "0": {"phase": "prepare", "placement": {"node": "node-a", "job_id": "7", "step": "0"}},
        "1": {"phase": "prepare", "placement": {"node": "node-b", "job_id": "7", "step": "0"}}},
        "stall": {"phase": "prepare", "threshold": 120, "since_progress": 121.2, "ranks_behind": [1],
                  "why_behind": {"1": "silent for 121s (stopped or frozen)"}}},
     "hang", "prepare", None, ["rank 1 on node-b silent"]),
    ("hang at the cap", {"ended_by": "cap", "ranks": {}, "stall": {"phase": "bandwidth", "threshold": 1800, "since_progress": 3,
                         "ranks_behind": [], "why_behind": {}}},
     "hang", "bandwidth", None, ["hard cap of 1800s"]),
    ("fail with an error", {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "ranks": {
        "0": rank("init", err("init", "nccl", "NCCL error: unhandled system error\nmore", wall=2.0), "error"),
        "1": rank("init", err("init", "timeout", "timed out", wall=3.0), "error")}},
     "fail", "init", "nccl", ["rank 0: RuntimeError: NCCL error: unhandled system error"]),
    ("killed rank is the cause, not its peer's error", {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2,
        "launcher_tail": ELASTIC_TAIL, "ranks": {
            "0": rank("bandwidth", err("bandwidth", "other", "Connection reset by peer"), "error"),
            "1": rank("bandwidth", None, None)}},
     "fail", "bandwidth", "killed", ["rank 1 died in bandwidth (SIGKILL)"]),
    # A SIGKILLed rank on Slurm while the job had not yet ended (CI, a loaded machine): the stall came
    # first, but the rank's process was gone when the supervisor looked; it died, it did not hang.
    ("a silent rank whose process was gone is a death, not a hang",
     {"ended_by": "stall", "expected_ranks": 2, "stall": {"phase": "bandwidth", "threshold": 4, "since_progress": 4.2,
      "ranks_behind": [1], "gone": [1], "why_behind": {"1": "gone: its process had exited"}}, "ranks": {
         "0": rank("bandwidth", None, None), "1": rank("bandwidth", None, None)}},
     "fail", "bandwidth", "killed", ["rank 1 died in bandwidth without an error", "launcher had not yet noticed"]),
    ("a silent rank still alive stays a hang beside a gone-free stall",
     {"ended_by": "stall", "expected_ranks": 2, "stall": {"phase": "bandwidth", "threshold": 4, "since_progress": 4.2,
      "ranks_behind": [1], "gone": [], "why_behind": {"1": "silent for 4s (stopped or frozen)"}}, "ranks": {
         "0": rank("bandwidth", None, None), "1": rank("bandwidth", None, None)}},
     "hang", "bandwidth", None, ["rank 1 silent for 4s"]),
    ("silent death without launcher words", {"ended_by": "exited", "exit_code": 137, "expected_ranks": 2, "ranks": {
        "0": rank("step", None, None), "1": rank("step", None, None)}},
     "fail", "step", "killed", ["rank 0 died in step"]),
    ("a rank never started", {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "ranks": {},
        "launcher_tail": "Traceback...\nModuleNotFoundError: No module named 'torch'\n"},
     "fail", "startup", "import", ["0 of 2 ranks started", "No module named 'torch'"]),
    ("launcher failed after every rank finished", {"ended_by": "exited", "exit_code": 3, "expected_ranks": 1,
        "ranks": {"0": rank()}},
     "fail", "teardown", "launcher", ["exited with 3"]),
    ("infra", {"ended_by": "infra", "infra_reason": "this Docker engine cannot give containers GPUs"},
     "infra-error", None, None, ["cannot give containers GPUs"]),
    ("interrupted", {"ended_by": "interrupted", "ranks": {}}, "interrupted", None, None, ["Ctrl-C"]),
    # Seen on 2x H200: rank 0 raised in init with NCCL's own words, then Accelerate's launcher stopped
    # rank 1 (still in fingerprint) with SIGTERM, printed as "exitcode : -15" without the signal's name.
    ("the rank with its own error is the cause, the signalled peer a victim",
     {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "launcher_tail": ELASTIC_TAIL.replace(
         "-9 (pid: 7250)  (SIGKILL)", "-15 (pid: 7250)"), "ranks": {
         "0": rank("init", err("init", "nccl", INVALID_USAGE, type_="DistBackendError"), "error"),
         "1": rank("fingerprint", None, None)}},
     "fail", "init", "nccl", ["rank 0: DistBackendError: Bootstrap : no socket interface found",
                              "rank 1 is a victim: stopped by the launcher (SIGTERM) in fingerprint"]),
    ("a peer that only lost its connection is a victim of the one that raised",
     {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "ranks": {
         "0": rank("step", err("step", "nccl", "NCCL error: remote process exited or there was a network error",
                               wall=5.0), "error"),
         "1": rank("step", err("step", "cuda", "CUDA error: an illegal memory access was encountered", wall=6.0),
                   "error")}},
     "fail", "step", "cuda", ["rank 1: RuntimeError: CUDA error: an illegal memory access",
                              "rank 0 is a victim: lost its peer in step"]),
    ("a driver older than the runtime is a driver error, not an NCCL one",
     {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "ranks": {
         "0": rank("init", err("init", "nccl", DRIVER_TOO_OLD, type_="DistBackendError"), "error"),
         "1": rank("init", err("init", "nccl", DRIVER_TOO_OLD, type_="DistBackendError", wall=1.5), "error")}},
     "fail", "init", "driver", ["CUDA driver version is insufficient for CUDA runtime version"]),
    ("a rank that raised is the cause even when its stopped peer made the supervisor end the cell",
     {"ended_by": "stall", "expected_ranks": 2, "stall": {"phase": "init", "threshold": 4, "since_progress": 4.1,
      "ranks_behind": [1], "why_behind": {"1": "still in fingerprint"}}, "ranks": {
         "0": rank("init", err("init", "other", "Unable to find address for: nosuchif0"), "error"),
         "1": rank("fingerprint", None, None)}},
     "fail", "init", "other", ["rank 0: RuntimeError: Unable to find address for: nosuchif0",
                               "rank 1 is a victim: still in fingerprint after rank 0 failed"]),
    ("gloo's own collective timeout is a hang too",
     {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "ranks": {
         "0": rank("prepare", err("prepare", "timeout", "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                                  "Timed out waiting 30000ms for recv operation to complete"), "error"),
         "1": rank("prepare", None, None)}},
     "hang", "prepare", None, ["gloo recv did not complete in prepare", "caught by gloo's timeout after 30s on rank 0",
                               "rank 1 did not join"]),
    ("torch's watchdog tearing a rank down is still a hang in its phase",
     {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "launcher_tail": WATCHDOG_TAIL, "ranks": {
         "0": rank("prepare", None, None), "1": rank("prepare", None, None)}},
     "hang", "prepare", None, ["ALLGATHER (SeqNum=2) did not complete in prepare",
                               "caught by torch's watchdog after 90s on rank 0", "rank 1 did not join"]),
    ("every rank timing out in the same collective: none was behind",
     {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "ranks": {
         r: rank("step", err("step", "timeout", "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                             "Timed out waiting 30000ms for recv operation to complete"), "error") for r in ("0", "1")}},
     "hang", "step", None, ["gloo recv did not complete in step", "caught by gloo's timeout after 30s on rank 0",
                            "all ranks waiting"]),
]


@pytest.mark.parametrize("name, raw, status, phase, error_class, words", CASES, ids=[c[0] for c in CASES])
def test_classify(name, raw, status, phase, error_class, words):
    result = classify(raw, min_busbw=1.0)
    assert result.status == status
    assert result.phase == phase
    assert result.error_class == error_class
    for word in words:
        assert word in result.reason, result.reason


def test_a_pinned_nccl_that_did_not_take_is_infra_error():
    raw = {"ended_by": "exited", "exit_code": 0, "expected_ranks": 1, "ranks": {"0": rank()},
           "phases": {"fingerprint": {"fingerprint": {"nccl_loaded": {"version": "2.28.9"}}}}}
    result = classify(raw, nccl_expected="2.23.4")
    assert result.status == "infra-error"
    assert "asked for NCCL 2.23.4 but the ranks loaded 2.28.9" in result.reason
    assert classify(raw, nccl_expected="2.28.9").status == "pass"
    # the H200 record: the system 2.28.3 was asked for (LD_PRELOAD) and loaded
    record = json.loads((DATA / "h200-preload-record.json").read_text())
    assert classify(record["attempts"][-1]["raw"], nccl_expected="2.28.3").status == "pass"


def test_sigterm_from_the_launcher_is_not_the_cause():
    tail = ELASTIC_TAIL.replace("-9 (pid: 7250)  (SIGKILL)", "-15 (pid: 7250)  (SIGTERM)")
    raw = {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "launcher_tail": tail, "ranks": {
        "0": rank("init", err("init", "nccl", "ncclInternalError"), "error"), "1": rank("init", None, None)}}
    result = classify(raw)
    assert result.error_class == "nccl" and "rank 0" in result.reason


def test_launcher_failures_parse():
    assert launcher_failures(ELASTIC_TAIL) == [(1, -9, "SIGKILL"), (0, 1, None)]
    assert launcher_failures(WATCHDOG_TAIL) == [(1, -15, "SIGTERM"), (0, -6, "SIGABRT")]
    assert launcher_failures("nothing here") == []


def test_real_h200_record_reclassifies_to_pass():
    record = json.loads((DATA / "h200-preload-record.json").read_text())
    raw = record["attempts"][-1]["raw"]
    assert classify(raw).status == "pass"
    fingerprint = raw["phases"]["fingerprint"]["fingerprint"]
    # LD_PRELOAD of the system NCCL: torch was built with 2.28.9, 2.28.3 is what ran
    assert fingerprint["nccl_compiled"] == "2.28.9"
    assert fingerprint["nccl_loaded"]["version"] == "2.28.3"
    assert raw["nccl"]["0"]["version"] == "2.28.3"


def test_unknown_status_is_refused():
    with pytest.raises(ValueError):
        Outcome("maybe")


def test_the_peer_of_a_gone_rank_is_a_victim_still_waiting_where_the_cell_was_stopped():
    raw = {"ended_by": "stall", "expected_ranks": 2, "stall": {"phase": "bandwidth", "threshold": 4, "since_progress": 4.2,
           "ranks_behind": [1], "gone": [1], "why_behind": {"1": "gone"}},
           "ranks": {"0": rank("bandwidth", None, None), "1": rank("bandwidth", None, None)}}
    result = classify(raw)
    assert result.detail["rank"] == 1
    assert result.detail["victims"] == {"0": "still waiting in bandwidth when the cell was stopped, after rank 1 failed"}


MISSING = yaml.safe_load((Path(__file__).parent / "data" / "missing_commands.yaml").read_text())


@pytest.mark.parametrize("entry", MISSING, ids=[e["id"] for e in MISSING])
def test_a_command_that_does_not_exist_is_named_with_where_and_the_fix(entry):
    """Issue 22: "launcher exit 127" said nothing of what was missing where. Real lines of the tools that
    start a cell's command (tests/data/missing_commands.yaml); the engine decides where and the fix."""
    command, where, fix = outcome.missing_command(entry["excerpt"], entry["engine"])
    assert command == entry["command"], entry["url"]
    assert where == (f"on node {entry['node']}" if "node" in entry else outcome._WHERE[entry["engine"]])
    assert command in fix
    assert classify_text("", entry["excerpt"]) == "launcher"  # the one classifier agrees
    found = outcome.classify({"ended_by": "exited", "exit_code": 127, "expected_ranks": 2, "engine": entry["engine"],
                              "launcher_tail": "some launcher banner\n" + entry["excerpt"]})
    assert (found.status, found.phase, found.error_class) == ("fail", "startup", "launcher")
    assert f"the command `{command}` does not exist {where}" in found.reason and "Fix: " in found.reason


def test_other_startup_failures_are_not_called_a_missing_command():
    for text in ("python3: can't open file '/x/run.py': [Errno 2] No such file or directory",
                 "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
                 "RuntimeError: the rendezvous timed out"):
        assert outcome.missing_command(text, "host") is None, text


def test_who_was_behind_when_the_watchdog_fired():
    """The ranks that did not report the timeout are behind; one that reported the same timeout too was
    waiting inside the collective (issue 23: the hints' watchdog-timeout and transport-hang are split on
    this), also when the watchdog took its process down before it could record an error or a result."""
    one = {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2, "launcher_tail": WATCHDOG_TAIL,
           "ranks": {"0": rank("prepare", None, None), "1": rank("prepare", None, None)}}
    assert classify(one).detail["ranks_behind"] == [1]
    rank_1 = WATCHDOG_TAIL.replace("[rank0]", "[rank1]").replace("[Rank 0]", "[Rank 1]").split("Failures:")[0]
    both = {**one, "launcher_tail": rank_1 + WATCHDOG_TAIL}
    assert classify(both).detail["ranks_behind"] == [] and "all ranks waiting" in classify(both).reason
    later = {**one, "launcher_tail": rank_1.replace("SeqNum=2", "SeqNum=1") + WATCHDOG_TAIL}  # not the same collective
    assert classify(later).detail["ranks_behind"] != []
    gloo = "Timed out waiting 30000ms for recv operation to complete"
    no_result = {"ended_by": "exited", "exit_code": 1, "expected_ranks": 2,
                 "ranks": {r: rank("step", err("step", "timeout", gloo), None) for r in ("0", "1")}}
    assert classify(no_result).detail["ranks_behind"] == []
