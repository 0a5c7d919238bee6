"""The NCCL-only control (workload/nccl_control.py, issue 16 item 1): it finds the libnccl and libcudart the
cell would load, hands rank 0's unique id to the others through the output folder, checks and times an
all-reduce per size, and says every step in the workload's events; where no libnccl exists (this host)
a rank fails with `nccl-not-found` under the real supervisor.

The GPU path is exercised here through fakes at the ctypes boundary (functions named as in nccl.h and
cuda_runtime_api.h, host memory standing in for device memory); bench/nccl_control.py runs it for real."""

from __future__ import annotations

import ctypes
import functools
import json
import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import launch, matrix, matrixfile, record, report, runner, supervise
from harness.engines import host
from harness.engines.base import CellSpec
from harness.engines.host import HostEngine

from .conftest import Fault
from .test_supervise import TIMEOUTS
from .test_workload import WORKLOAD_DIR, _load

control = _load("nccl_control")
libnccl = _load("libnccl")
main = _load("main")
classify = _load("classify")
bandwidth = _load("bandwidth")


# ---------------------------------------------------------------- finding the libraries
def _touch(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not an ELF file")
    return str(path)


def test_nccl_is_looked_for_where_torch_would_get_it(tmp_path):
    """Mapped (LD_PRELOAD) first, then torch's wheel copy in path order, then the system soname."""
    first = _touch(tmp_path / "venv" / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    second = _touch(tmp_path / "user" / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    search = [str(tmp_path / "missing"), str(tmp_path / "venv"), str(tmp_path / "user")]
    assert libnccl.nccl_candidates(search, ["/preloaded/libnccl.so.2.28.3"]) == [
        "/preloaded/libnccl.so.2.28.3", first, second, "libnccl.so.2"]


def test_cudart_is_found_in_cuda_12_and_cuda_13_wheel_layouts(tmp_path):
    cu12 = _touch(tmp_path / "a" / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12")
    cu13 = _touch(tmp_path / "b" / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    found = libnccl.cudart_candidates([str(tmp_path / "a"), str(tmp_path / "b")], [])
    assert found[:2] == [cu12, cu13]
    assert found[2:] == ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]


def test_a_library_that_does_not_load_names_every_path_tried(tmp_path):
    broken = _touch(tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    with pytest.raises(libnccl.LibraryNotFound) as err:
        libnccl.load_first([broken, "libnccl-that-does-not-exist.so.2"], "libnccl", "nccl-not-found")
    assert err.value.error_class == "nccl-not-found"
    assert broken in str(err.value) and "libnccl-that-does-not-exist.so.2" in str(err.value)


# ---------------------------------------------------------------- the unique id
def test_the_unique_id_reaches_a_rank_that_waits_for_it(tmp_path):
    path = control.id_file(str(tmp_path), "29500")
    uid = bytes(range(128))
    got = {}
    waiter = threading.Thread(target=lambda: got.setdefault("uid", control.await_id(path, 30)))
    waiter.start()
    control.publish_id(path, uid)
    waiter.join(30)
    assert got["uid"] == uid
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # no temporary file left


def test_a_rank_whose_id_never_comes_times_out_as_a_timeout(tmp_path):
    with pytest.raises(TimeoutError) as err:
        control.await_id(control.id_file(str(tmp_path), "1"), 0.05)
    assert classify.classify_exception(err.value) == "timeout"


# ---------------------------------------------------------------- fakes at the ctypes boundary
def _fake_libs(init_rc: int = 0, corrupt: bool = False):
    """libnccl and libcudart as ctypes would give them: functions by their C names, host memory for device
    memory, a world of one (the all-reduce leaves the data as it is); `corrupt` spoils one element of every
    float32 all-reduce; `init_rc` is what ncclCommInitRank returns."""
    memory: dict[int, ctypes.Array] = {}
    calls: list[str] = []

    def out(pointer, value):
        pointer.contents.value = value
        return 0

    def malloc(pointer, nbytes):
        buf = (ctypes.c_char * nbytes)()
        memory[ctypes.addressof(buf)] = buf
        return out(pointer, ctypes.addressof(buf))

    def free(ptr):
        calls.append("free")
        del memory[ptr]
        return 0

    def memcpy(dst, src, nbytes, kind):
        ctypes.memmove(dst, src, nbytes)
        return 0

    def memset(ptr, value, nbytes):
        ctypes.memset(ptr, value, nbytes)
        return 0

    def all_reduce(send, recv, count, dtype, op, comm, stream):
        calls.append("allreduce")
        if corrupt and dtype == libnccl.NCCL_FLOAT32 and count > 1:
            ctypes.c_float.from_address(recv).value += 1
        return 0

    def init_rank(comm, nranks, uid, rank):
        calls.append("init")
        return init_rc or out(comm, 0xC0FFEE)

    nccl = SimpleNamespace(
        ncclGetVersion=lambda p: out(p, 22809), ncclGetUniqueId=lambda p: 0, ncclCommInitRank=init_rank,
        ncclAllReduce=all_reduce, ncclCommDestroy=lambda comm: calls.append("destroy") or 0,
        ncclGetErrorString=lambda rc: b"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        ncclGetLastError=lambda comm: b"socket.cc:484 NCCL WARN Net : Connect to 10.0.0.2<43122> failed")
    cuda = SimpleNamespace(
        cudaSetDevice=lambda d: 0, cudaGetDeviceCount=lambda p: out(p, 2),
        cudaRuntimeGetVersion=lambda p: out(p, 13000), cudaMalloc=malloc,
        cudaFree=free, cudaMemcpy=memcpy, cudaMemset=memset,
        cudaStreamCreate=lambda p: out(p, 0x5), cudaStreamSynchronize=lambda s: 0, cudaStreamDestroy=lambda s: 0,
        cudaGetErrorString=lambda rc: b"out of memory")
    facts = {"nccl": {"path": "/fake/libnccl.so.2"}, "cudart": {"path": "/fake/libcudart.so.13"}}
    libs = lambda: (libnccl.Nccl(nccl), libnccl.Cuda(cuda), {k: dict(v) for k, v in facts.items()})  # noqa: E731
    return libs, calls, memory


def _run_control(tmp_path, monkeypatch, libs, *argv: str):
    """One rank of the control in this process, a world of one, with `libs` instead of the real ones."""
    monkeypatch.setattr(os, "environ", {"PATH": os.environ.get("PATH", ""), "MASTER_PORT": "29555"})
    out = tmp_path / "out"
    args = control.parse_args(["--out", str(out), "--heartbeat", "30", *argv])
    code = main.run_rank(args, functools.partial(control.Control, libs=libs))
    events = [json.loads(line) for line in (out / "events-rank0.jsonl").read_text().splitlines()]
    return code, events


def test_a_healthy_rank_says_every_step_and_checks_the_data(tmp_path, monkeypatch):
    libs, calls, memory = _fake_libs()
    code, events = _run_control(tmp_path, monkeypatch, libs, "--sizes", "4K,2M", "--iters", "2", "--warmup", "1",
                                "--trials", "2")
    assert code == 0
    steps = [(e["event"], e.get("phase")) for e in events if e["event"] != "heartbeat"]
    assert steps == [("start", None)] + [(kind, phase) for phase in control.PHASES
                                         for kind in ("phase_start", "phase_end")] + [("result", None)]
    ends = {e["phase"]: e for e in events if e["event"] == "phase_end"}
    assert ends["nccl-load"]["nccl"] == {"path": "/fake/libnccl.so.2", "code": 22809, "version": "2.28.9"}
    assert ends["nccl-load"]["device_count"] == 2
    rows = ends["nccl-allreduce"]["rows"]
    assert [r["bytes"] for r in rows] == [4096, 2 << 20] and all(r["wrong"] == 0 for r in rows)
    assert all(r["timing"] == "nccl-control" and len(r["busbw_trials"]) == 2 for r in rows)
    assert all(r["busbw_gbs"] == 0 for r in rows)  # a world of one moves nothing over a bus
    assert ends["nccl-teardown"]["destroyed"] is True and calls[-1] == "destroy" and not memory
    result = events[-1]
    assert result["status"] == "ok" and result["largest_bytes"] == 2 << 20
    assert any(e["event"] == "heartbeat" and e.get("source") == "main" for e in events)  # progress per size
    assert (tmp_path / "out" / "pid-rank0").exists()  # the supervisor's forensics can signal it


def test_data_that_comes_back_wrong_is_counted(tmp_path, monkeypatch):
    libs, _, _ = _fake_libs(corrupt=True)
    code, events = _run_control(tmp_path, monkeypatch, libs, "--sizes", "4K", "--iters", "1", "--trials", "1")
    rows = next(e for e in events if e.get("phase") == "nccl-allreduce" and e["event"] == "phase_end")["rows"]
    assert code == 0 and rows[0]["wrong"] >= 1 and events[-1]["wrong_total"] >= 1


def test_an_nccl_error_carries_its_name_and_ncclGetLastError_text(tmp_path, monkeypatch):
    libs, calls, memory = _fake_libs(init_rc=2)
    code, events = _run_control(tmp_path, monkeypatch, libs, "--sizes", "4K")
    error = next(e for e in events if e["event"] == "error")
    assert code == 1 and error["phase"] == "nccl-init" and error["error_class"] == "nccl"
    assert "ncclCommInitRank failed: NCCL error 2 (unhandled system error" in error["message"]
    assert "Connect to 10.0.0.2<43122> failed" in error["message"]
    assert events[-1]["status"] == "error" and events[-1]["failed_phase"] == "nccl-init"
    assert "allreduce" not in calls and not memory


def test_a_cuda_error_carries_the_runtimes_text(tmp_path, monkeypatch):
    libs, _, _ = _fake_libs()
    nccl_lib, cuda_lib, facts = libs()
    cuda_lib.f["cudaMalloc"] = lambda pointer, nbytes: 2  # cudaErrorMemoryAllocation
    code, events = _run_control(tmp_path, monkeypatch, lambda: (nccl_lib, cuda_lib, facts), "--sizes", "4K")
    error = next(e for e in events if e["event"] == "error")
    assert code == 1 and error["error_class"] == "oom"
    assert error["message"] == "cudaMalloc failed: CUDA error 2 (out of memory)"


def test_the_control_accepts_the_arguments_its_launch_line_gives():
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    argv = launch.control_launch(m.cells[0], m, ranks=2).argv
    args = control.parse_args(list(argv[argv.index(launch.CONTAINER_CONTROL) + 1:]))
    assert args.iters == m.bandwidth_iters and args.trials == m.bandwidth_trials


# ---------------------------------------------------------------- a real fault: no libnccl on this host
def test_without_libnccl_each_rank_fails_as_nccl_not_found_under_the_supervisor(tmp_path):
    pytest.importorskip("torch")  # the launcher (torchrun) comes with torch
    try:
        ctypes.CDLL("libnccl.so.2")
        pytest.skip("this host has a libnccl: the fault is not real here")
    except OSError:
        pass
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.launcher == "torchrun")
    out = tmp_path / "control"
    lnch = launch.control_launch(cell, m, ranks=2, python=HostEngine.python, out=str(out),
                                 control=str(WORKLOAD_DIR / "control.py"), port=host._free_port())
    spec = CellSpec(f"test-control-{tmp_path.name}", cell.id, lnch, out)
    record = supervise.supervise(HostEngine(), spec, TIMEOUTS)
    assert record.leftovers == []
    assert record.ended_by == "exited" and record.exit_code not in (0, None)
    assert set(record.ranks) == {"0", "1"}
    for rank in record.ranks.values():
        assert rank.error.error_class == "nccl-not-found" and rank.error.phase == "nccl-load"
        assert "libnccl.so.2" in rank.error.message
        assert rank.result.status == "error"


# ---------------------------------------------------------------- wired into a cell's run (runner.run_cell)
def _killed_cell(tmp_path: Path, control: str):
    """A real gloo cell on the host engine whose rank 1 is SIGKILLed in `step`, run with `--control`."""
    pytest.importorskip("torch")
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    t = matrixfile.Timeouts(fingerprint=60, init=20, prepare=20, step=20, check=20, bandwidth=20, teardown=10, cell=120)
    m = matrix.Matrix(**{**m.__dict__, "timeouts": t, "bandwidth_sizes": [4096]})
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.launcher == "torchrun")
    opts = runner.RunOptions(f"control-{control}", tmp_path, (), 2, extra_args=("--hold-at", "step"),
                             extra_env=(("HARNESS_TEST_FAULTS", "1"),), control=control)
    kill = Fault(tmp_path, 1, "step", "KILL")
    result = runner.run_cell(HostEngine(), cell, m, opts, on_event=kill, on_start=kill.start)
    assert result.outcome.status == "fail" and result.outcome.error_class == "killed"
    return result


def test_a_failing_gloo_cell_gets_no_control_by_default(tmp_path):
    result = _killed_cell(tmp_path, "failing")
    assert [a.raw.kind for a in result.attempts] == ["cell"]
    assert result.control.status == "not-run" and result.control.reason == "not applicable (gloo)"
    assert result.layer == "unknown"
    assert report.control_text(result) == "not applicable (gloo)"


def test_control_always_runs_the_control_as_an_attempt_of_the_cell_and_reports_it(tmp_path):
    """Real fault on this CPU host: no libnccl, so the control fails as nccl-not-found; this proves it is
    launched, supervised, kept as attempt-2 of kind control, and shown, while the cell's verdict stays."""
    try:
        ctypes.CDLL("libnccl.so.2")
        pytest.skip("this host has a libnccl: the fault is not real here")
    except OSError:
        pass
    result = _killed_cell(tmp_path, "always")
    assert [(a.attempt, a.raw.kind) for a in result.attempts] == [(1, "cell"), (2, "control")]
    assert result.attempt_count == 1 and result.last_attempt is result.attempts[0]  # the cell's evidence
    stored = json.loads((tmp_path / "control-always" / "cells" / result.id / "attempt-2" / "attempt.json").read_text())
    assert stored["kind"] == "control" and stored["leftovers"] == []
    assert any(str(WORKLOAD_DIR / "control.py") == arg for arg in result.attempts[1].command)
    reread = record.CellRecord.from_json(
        json.loads((tmp_path / "control-always" / "cells" / result.id / "record.json").read_text()))
    assert reread.outcome == result.outcome and reread.outcome.error_class == "killed"
    control = reread.control
    assert (control.status, control.phase, control.error_class) == ("fail", "nccl-load", "nccl-not-found")
    assert "libnccl" in control.key_line and not control.could_run
    assert reread.layer == "unknown"  # the control never reached NCCL: it says nothing of the cell
    text = report.control_text(reread)
    assert text.startswith("fail (nccl-not-found, ") and "the layer is unknown" in text
