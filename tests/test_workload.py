"""Tests of harness/workload: real ranks on CPU (gloo) through real launchers, no mocks.

The workload is loaded here the way run.py loads it (as the top-level package ``workload``, from
its own folder) without touching sys.path, so these tests do not depend on how the rest of the
``harness`` package is installed.
"""
from __future__ import annotations

import ctypes.util
import importlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKLOAD_DIR = REPO / "harness" / "workload"
RUN_PY = WORKLOAD_DIR / "run.py"
PHASES = ["fingerprint", "init", "prepare", "step", "check", "bandwidth", "teardown"]
TIMEOUT = 300
FAST = ["--device", "cpu", "--sizes", "4K,64K,1M", "--iters", "3", "--warmup", "1",
        "--heartbeat", "0.5"]
COMMON_FIELDS = {"v", "event", "rank", "world", "wall", "mono", "pid"}


def _load(module: str):
    """Import ``workload.<module>`` from the source folder, as run.py would name it."""
    if "workload" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "workload", WORKLOAD_DIR / "__init__.py",
            submodule_search_locations=[str(WORKLOAD_DIR)])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["workload"] = pkg
        spec.loader.exec_module(pkg)
    return importlib.import_module("workload." + module)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment: no inherited launcher/NCCL variables, no user Accelerate config."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "HARNESS_TEST_FAULTS")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("NCCL_", "ACCELERATE_", "TORCHELASTIC_"))}
    env.update(HF_HOME=str(tmp_path / "hf_home"), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path = REPO,
         timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def _events(out: Path, rank: int) -> list[dict]:
    with open(out / f"events-rank{rank}.jsonl") as fh:
        return [json.loads(line) for line in fh]


def _phase_events(events: list[dict]) -> list[tuple]:
    return [(e["event"], e["phase"]) for e in events if e["event"] in ("phase_start", "phase_end")]


def _one(events: list[dict], event: str, phase: str | None = None) -> dict:
    found = [e for e in events if e["event"] == event and (phase is None or e["phase"] == phase)]
    assert len(found) == 1, (event, phase, found)
    return found[0]


def _assert_complete(out: Path, world: int) -> list[list[dict]]:
    """Every rank ran every phase in order and ended with an ok result."""
    import accelerate
    import torch

    per_rank = []
    for rank in range(world):
        events = _events(out, rank)
        per_rank.append(events)
        expected = [(kind, p) for p in PHASES for kind in ("phase_start", "phase_end")]
        assert _phase_events(events) == expected
        assert events[0]["event"] == "start" and events[-1]["event"] == "result"
        assert events[-1]["status"] == "ok" and events[-1]["exit_code"] == 0
        for e in events:
            assert COMMON_FIELDS <= set(e) and e["v"] == 1
            assert e["rank"] == rank and e["world"] == world
        fp = _one(events, "phase_end", "fingerprint")["fingerprint"]
        assert fp["torch"] == torch.__version__
        assert fp["accelerate"] == accelerate.__version__
        assert _one(events, "phase_end", "init")["backend"] == "gloo"
        assert _one(events, "phase_end", "init")["world_size"] == world
        check = _one(events, "phase_end", "check")
        assert check["wrong_total"] == 0 and len(check["checks"]) >= 4
        assert {c["dtype"] for c in check["checks"]} >= {"float32", "bfloat16"}
        assert any(c["numel"] * (2 if c["dtype"] == "bfloat16" else 4) >= 1 << 20
                   for c in check["checks"])
        prepare = _one(events, "phase_end", "prepare")
        assert prepare["num_processes"] == world
        assert isinstance(_one(events, "phase_end", "step")["loss"], float)
        assert (out / f"pid-rank{rank}").read_text().strip() == str(events[0]["pid"])
    return per_rank


def _assert_bandwidth(events: list[dict], world: int) -> None:
    bw = _one(events, "phase_end", "bandwidth")
    assert bw["world"] == world
    assert [r["bytes"] for r in bw["rows"]] == [4096, 65536, 1 << 20]
    factor = 2.0 * (world - 1) / world
    for row in bw["rows"]:
        assert row["dtype"] == "float32" and row["iters"] == 3
        assert row["time_s"] > 0 and row["first_call_s"] > 0
        assert row["algbw_gbs"] == pytest.approx(row["bytes"] / row["time_s"] / 1e9)
        assert row["busbw_gbs"] == pytest.approx(row["algbw_gbs"] * factor)
        if world > 1:
            assert row["busbw_gbs"] > 0
        # repeated trials: the row is the median trial, with every trial and the spread beside it
        assert len(row["busbw_trials"]) == bw["trials"] >= 1
        assert row["busbw_min"] <= row["busbw_gbs"] <= row["busbw_max"]
        assert row["wrong"] == 0 and row["timing"] == "eager" and row["eager_us"] > 0


def test_a_rank_says_the_cpus_it_may_run_on_as_taskset_writes_them(tmp_path: Path) -> None:
    main = _load("main")
    assert main.cpu_ranges([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11" and main.cpu_ranges([]) == ""
    out = tmp_path / "out"
    cpus = sorted(os.sched_getaffinity(0))[:1]  # the rank really pinned to one CPU, as taskset does
    proc = _run(["taskset", "-c", str(cpus[0]), sys.executable, str(RUN_PY), "--out", str(out), "--skip-bandwidth"]
                + FAST, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-5000:]
    start = _one([json.loads(line) for line in (out / "events-rank0.jsonl").read_text().splitlines()], "start")
    assert start["placement"]["cpus"] == str(cpus[0])


def test_a_bandwidth_row_is_the_median_trial_with_its_spread() -> None:
    bw = _load("bandwidth")
    row = bw.bandwidth_row(1 << 20, 20, [2e-4, 1e-4, 4e-4], 0.01, 2, eager_s=[3e-4, 5e-4, 4e-4], timing="cuda-graph")
    assert row["time_s"] == 2e-4 and row["busbw_gbs"] == pytest.approx((1 << 20) / 2e-4 / 1e9)
    assert row["busbw_min"] == pytest.approx((1 << 20) / 4e-4 / 1e9)
    assert row["busbw_max"] == pytest.approx((1 << 20) / 1e-4 / 1e9)
    assert row["eager_us"] == pytest.approx(400.0) and row["timing"] == "cuda-graph" and row["wrong"] == 0


# ------------------------------------------------------------------ real multi-rank runs
@pytest.fixture(scope="module")
def accelerate_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("accel")
    out = tmp / "out"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           str(RUN_PY), "--out", str(out), "--expect-env", '{"NCCL_P2P_DISABLE": "1"}'] + FAST
    proc = _run(cmd, _env(tmp))
    assert proc.returncode == 0, proc.stdout[-5000:]
    return out


def test_accelerate_two_gloo_ranks_run_every_phase(accelerate_run: Path) -> None:
    per_rank = _assert_complete(accelerate_run, 2)
    for events in per_rank:
        _assert_bandwidth(events, 2)
        prepare = _one(events, "phase_end", "prepare")
        assert prepare["distributed_type"] == "MULTI_CPU"
        assert prepare["model_class"] == "DistributedDataParallel"
        assert prepare["process_group_reused"] is True
        # the first optimizer's torch._dynamo import ran on a thread beside fingerprint and init
        assert prepare["prewarm"]["modules"] == ["torch._dynamo"] and prepare["prewarm"]["error"] is None
        assert prepare["prewarm"]["thread_seconds"] > 0
        fp = _one(events, "phase_end", "fingerprint")["fingerprint"]
        assert fp["launcher"] == "accelerate"
        assert fp["nccl_env_changed"]["NCCL_P2P_DISABLE"] == {"expected": "1", "actual": None}
        assert fp["dist_env"]["world"] == 2


def test_ranks_agree_on_bandwidth_time(accelerate_run: Path) -> None:
    """time_s is the MAX over ranks, so every rank records the same numbers."""
    rows = [_one(_events(accelerate_run, r), "phase_end", "bandwidth")["rows"] for r in (0, 1)]
    assert [r["time_s"] for r in rows[0]] == [r["time_s"] for r in rows[1]]


def test_torchrun_two_gloo_ranks_run_every_phase(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(_free_port()), str(RUN_PY), "--out", str(out)] + FAST
    proc = _run(cmd, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-5000:]
    for events in _assert_complete(out, 2):
        _assert_bandwidth(events, 2)
        fp = _one(events, "phase_end", "fingerprint")["fingerprint"]
        assert fp["launcher"] == "torchrun"


def test_plain_python_is_a_world_of_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run([sys.executable, str(RUN_PY), "--out", str(out)] + FAST, _env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-5000:]
    (events,) = _assert_complete(out, 1)
    _assert_bandwidth(events, 1)
    init = _one(events, "phase_end", "init")
    assert init["env_set"]["NCCL_DEBUG"] == "INFO"
    assert init["env_set"]["NCCL_DEBUG_FILE"] == str(out / "nccl-rank0.log")
    fp = _one(events, "phase_end", "fingerprint")["fingerprint"]
    assert fp["launcher"] == "none" and fp["dist_env"]["from_launcher"] is False


def test_skip_bandwidth_still_closes_the_phase(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run([sys.executable, str(RUN_PY), "--out", str(out), "--device", "cpu",
                 "--skip-bandwidth"], _env(tmp_path, NCCL_DEBUG="WARN"))
    assert proc.returncode == 0, proc.stdout[-5000:]
    (events,) = _assert_complete(out, 1)
    bw = _one(events, "phase_end", "bandwidth")
    assert bw["skipped"] is True and bw["rows"] == []
    assert "NCCL_DEBUG" not in _one(events, "phase_end", "init")["env_set"]


# ------------------------------------------------------------------ faults and forensics
def test_fail_in_prepare_records_error_and_exits_nonzero(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run([sys.executable, str(RUN_PY), "--out", str(out), "--device", "cpu",
                 "--fail-in", "prepare"], _env(tmp_path, HARNESS_TEST_FAULTS="1"))
    assert proc.returncode == 1, proc.stdout[-5000:]
    events = _events(out, 0)
    err = _one(events, "error")
    assert err["phase"] == "prepare" and err["type"] == "RuntimeError"
    assert err["error_class"] in _load("classify").ERROR_CLASSES
    assert "injected" in err["message"] and "Traceback" in err["traceback"]
    assert _phase_events(events)[-1] == ("phase_start", "prepare")
    result = events[-1]
    assert result["event"] == "result" and result["status"] == "error"
    assert result["failed_phase"] == "prepare" and result["phases_done"] == ["fingerprint", "init"]
    assert result["teardown"] == "ok"


def test_fail_in_refuses_without_the_fault_variable(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run([sys.executable, str(RUN_PY), "--out", str(out), "--device", "cpu",
                 "--fail-in", "prepare"], _env(tmp_path))
    assert proc.returncode == 2
    assert "HARNESS_TEST_FAULTS" in proc.stdout
    assert not out.exists()


def test_init_times_out_when_a_rank_never_comes(tmp_path: Path) -> None:
    """Rank 0 of a world of two alone: the in-process timeout ends init as class timeout."""
    out = tmp_path / "out"
    env = _env(tmp_path, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()))
    proc = _run([sys.executable, str(RUN_PY), "--out", str(out), "--device", "cpu",
                 "--init-timeout", "3"], env)
    assert proc.returncode == 1, proc.stdout[-5000:]
    events = _events(out, 0)
    err = _one(events, "error")
    assert err["phase"] == "init" and err["error_class"] == "timeout"
    assert events[-1]["status"] == "error" and events[-1]["failed_phase"] == "init"


def _start_long_run(tmp_path: Path) -> tuple:
    """A world-of-one rank stuck sweeping bandwidth for a long time; returns (proc, out)."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(RUN_PY), "--out", str(out), "--device", "cpu", "--sizes", "4K",
           "--iters", "100000000", "--warmup", "0", "--heartbeat", "0.2"]
    proc = subprocess.Popen(cmd, env=_env(tmp_path), cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    path = out / "events-rank0.jsonl"
    while time.monotonic() < deadline:
        if path.exists() and '"source":"main"' in path.read_text():  # inside the sweep
            return proc, out
        assert proc.poll() is None, "rank exited early"
        time.sleep(0.1)
    proc.kill()
    pytest.fail("rank never reached the bandwidth phase")


def test_sigusr1_dumps_all_thread_stacks(tmp_path: Path) -> None:
    proc, out = _start_long_run(tmp_path)
    try:
        pid = int((out / "pid-rank0").read_text())
        assert pid == proc.pid
        os.kill(pid, signal.SIGUSR1)
        stacks = out / "stacks-rank0.txt"
        deadline = time.monotonic() + 30
        # the dump is written thread by thread: wait for the main thread's frames, not just the first line
        while time.monotonic() < deadline and "bandwidth.py" not in stacks.read_text():
            time.sleep(0.1)
        text = stacks.read_text()
        assert "bandwidth.py" in text  # the main thread, inside the sweep
        assert "events.py" in text or "threading.py" in text  # the heartbeat thread too
        assert proc.poll() is None  # the signal only dumps, it does not kill
    finally:
        proc.kill()
        proc.wait(timeout=TIMEOUT)


def test_events_survive_sigkill(tmp_path: Path) -> None:
    proc, out = _start_long_run(tmp_path)
    time.sleep(0.5)  # let heartbeats accumulate
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)
    raw = (out / "events-rank0.jsonl").read_text()
    assert raw.endswith("\n")
    events = [json.loads(line) for line in raw.splitlines()]  # every line intact JSON
    assert events[0]["event"] == "start"
    assert ("phase_start", "bandwidth") in _phase_events(events)
    assert any(e["event"] == "heartbeat" and e.get("source") == "thread" for e in events)
    assert all(e["event"] != "result" for e in events)


# ------------------------------------------------------------------ independence
def test_runs_from_a_copy_without_the_harness_package(tmp_path: Path) -> None:
    """The folder is shipped alone as /opt/harness/workload: nothing else may be needed."""
    dest = tmp_path / "opt" / "harness" / "workload"
    shutil.copytree(str(WORKLOAD_DIR), str(dest),
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    cmd = [sys.executable, "-I", str(dest / "run.py"), "--out", str(out), "--device", "cpu",
           "--skip-bandwidth"]
    proc = _run(cmd, _env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-5000:]
    _assert_complete(out, 1)


def test_sources_never_import_the_rest_of_harness() -> None:
    pattern = re.compile(r"^\s*(import\s+harness|from\s+harness)\b", re.M)
    by_name = re.compile(r"^\s*(import\s+workload|from\s+workload)\b", re.M)
    sources = sorted(WORKLOAD_DIR.glob("*.py"))
    assert sources
    for path in sources:
        text = path.read_text()
        assert not pattern.search(text), path
        if path.name != "run.py":  # only run.py may name the package
            assert not by_name.search(text), path


# ------------------------------------------------------------------ pure helpers
@pytest.mark.parametrize("code,text", [(22809, "2.28.9"), (23203, "2.32.3"), (21805, "2.18.5"),
                                       (2708, "2.7.8"), (2408, "2.4.8"), (21003, "2.10.3")])
def test_decode_nccl_version(code: int, text: str) -> None:
    assert _load("fingerprint").decode_nccl_version(code) == text


@pytest.mark.parametrize("type_name,message,expected", [
    ("DistBackendError", "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error, "
                         "NCCL version 2.19.3\nncclSystemError: System call failed", "nccl"),
    ("RuntimeError", "ncclInternalError: Internal check failed.", "nccl"),
    ("DistBackendError", "", "nccl"),
    ("RuntimeError", "CUDA error: an illegal memory access was encountered", "cuda"),
    ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
    ("RuntimeError", "NCCL error: unhandled cuda error\nCuda failure 'out of memory'", "oom"),
    ("DistBackendError", "NCCL error ... Error while creating shared memory segment "
                         "/dev/shm/nccl-ABC (size 9637888)", "shm"),
    ("RuntimeError", "No space left on device", "shm"),
    ("", "mm_iface failed to allocate receive FIFO\n[ucp_address_unpack] Caught signal 11 (Segmentation fault)", "shm"),
    ("", "[Error][launch.py:324:sigkill_handler]exits with return -7", "shm"),
    ("ModuleNotFoundError", "No module named 'accelerate'", "import"),
    ("ImportError", "libnccl.so.2: cannot open shared object file", "import"),
    ("DistStoreError", "Timed out after 61 seconds waiting for clients. 1/2 clients joined.",
     "timeout"),
    ("DistBackendError", "[Rank 0] Watchdog caught collective operation timeout: "
                         "WorkNCCL(SeqNum=1, OpType=BROADCAST) ran for 60000 milliseconds "
                         "before timing out.", "timeout"),
    ("NotImplementedError", "Using RTX 4000 series doesn't support faster communication "
                            "broadband via P2P or IB. Please set `NCCL_P2P_DISABLE=\"1\"` and "
                            "`NCCL_IB_DISABLE=\"1\" or use `accelerate launch`", "launcher"),
    ("ValueError", "Error initializing torch.distributed using env:// rendezvous: "
                   "environment variable RANK expected, but not set", "launcher"),
    ("", "An ORTE daemon has unexpectedly failed after launch and before\ncommunicating back to mpirun.",
     "launcher"),
    ("ValueError", "No slot '2' specified on host 'work1'", "launcher"),
    ("", "--------\nmpirun has detected an attempt to run as root.\n\nRunning as root is *strongly* discouraged",
     "launcher"),
    ("", "srun: error: Unable to create step for job 123: Invalid generic resource (gres) specification", "launcher"),
    ("", "srun: Job 42 step creation temporarily disabled, retrying (Requested nodes are busy)", "launcher"),
    ("RuntimeError", "Unable to proceed, no GPU resources available", "launcher"),
    ("RuntimeError", "Distributed package doesn't have MPI built in. MPI is only included if you build PyTorch "
                     "from source on a host that has MPI installed.", "import"),
    ("RuntimeError", "PyTorch built without distributed support", "import"),
    ("RuntimeError", "CUDA error: the provided PTX was compiled with an unsupported toolchain.", "driver"),
    ("", "Error! Bad return status for module build on kernel: 6.8.0-31-generic (x86_64)", "driver"),
    ("", "nvidia-container-cli: mount error: failed to add device rules: unable to find any existing device "
         "filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE) failed: operation not permitted", "launcher"),
    ("UserWarning", "Attempted to get default timeout for nccl backend, but NCCL support is not compiled", "import"),
    # other tools' words for classes the rules know (issue 23): pynvml's, go-nvml's, click's, absl's,
    # HfArgumentParser's, fish's and PowerShell's, Open MPI 5's, containerd's
    ("NVMLError_LibRmVersionMismatch", "RM has detected an NVML/RM version mismatch.", "driver"),
    ("NVMLError_DriverNotLoaded", "pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded", "driver"),
    ("", "E0315 factory.go:87] Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND.", "driver"),
    ("", "Error: No such option: --local-rank", "launcher"),
    ("UnrecognizedFlagError", "Unknown command line flag 'local_rank'", "launcher"),
    ("ValueError", "Some specified arguments are not used by the HfArgumentParser: ['--local_rank=0']", "launcher"),
    ("", "fish: Unknown command: torchrun", "launcher"),
    ("", "torchrun: The term 'torchrun' is not recognized as a name of a cmdlet, function, script file, or "
         "executable program.", "launcher"),
    ("", "No PMIx server was reachable, but a PMI1/2 was detected.\nIf srun is being used to launch application,  "
         "2 singletons will be started.", "launcher"),
    ("", "failed to get sandbox runtime: no runtime for \"nvidia\" is configured", "launcher"),
    # inference engines' start-up memory checks and Triton's link of libcuda
    ("ValueError", "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                   "initializing the engine.", "oom"),
    ("", 'Error: Warmup(Generation("Not enough memory to handle 4096 prefill tokens. You need to decrease '
         '`--max-batch-prefill-tokens`"))', "oom"),
    ("RuntimeError", "Not enough memory. Please try to increase --mem-fraction-static.", "oom"),
    # the host's OOM killer as Slurm, the kernel's summary line and Kubernetes say it
    ("RuntimeError", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=10238881.0. Some of your processes "
                     "may have been killed by the cgroup out-of-memory handler.", "oom"),
    ("RuntimeError", "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-1a2b.scope,task=python,"
                     "pid=48211,uid=0", "oom"),
    ("RuntimeError", "Last State: Terminated\n  Reason: OOMKilled\n  Exit Code: 137", "oom"),
    ("", "/usr/bin/ld: cannot find -lcuda: No such file or directory", "import"),
    # NCCL 2.27+ names the peer in its socket-type check; gloo 2025+ says a refused connect "timed out"
    ("", "socketFinalizeAccept from 10.0.0.2<51234>: wrong type 4 != 3", "nccl"),
    ("RuntimeError", "[../third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: "
                     "Connection refused, remote=[node-1]:43275", "other"),
    ("RuntimeError", "injected test fault", "other"),
    # the driver's GSP firmware timing out (Xid 119) is a driver fault, whatever "Timeout" says
    ("", "NVRM: Xid (PCI:0000:1b:00): 119, pid=2345, name=python, Timeout after 6s of waiting for RPC response "
         "from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).", "driver"),
    ("", "NVRM: GPU0 _kgspRpcRecvPoll: Timeout waiting for RPC from GSP!", "driver"),
    # a CUDA extension that could not be built (DeepSpeed's JIT ops): its library never loads, an import failure
    ("RuntimeError", "RuntimeError: Error building extension 'fused_adam'", "import"),
    ("", "nvcc fatal   : Unsupported gpu architecture 'compute_89'\nninja: build stopped: subcommand failed.", "import"),
    ("", "nvcc fatal   : Value 'sm_90' is not defined for option 'gpu-architecture'", "import"),
    ("AttributeError", "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'", "import"),
    # a process joining a Ray cluster of other versions (Ray's check, Ray Client's) is the launcher's
    ("RuntimeError", "Version mismatch: The cluster was started with:\n    Ray: 2.12.0\n    Python: 3.11.11\n"
                     "This process on node 10.0.0.5 was started with:\n    Ray: 2.42.0\n    Python: 3.9.21", "launcher"),
    ("RuntimeError", "Python minor versions differ between client and server: client is 3.8.10, server is 3.7.7",
     "launcher"),
    # no ninja to build an extension, the compiler step of a build failing, a torch without a name the code imports
    ("", "RuntimeError: Ninja is required to load C++ extensions", "import"),
    ("", "RuntimeError: Unable to JIT load the cpu_adam op due to ninja not being installed.", "import"),
    ("", "error: command '/usr/bin/gcc' failed with exit code 1", "import"),
    ("", "error: command 'x86_64-linux-gnu-gcc' failed with exit status 1", "import"),
    ("", "cannot import name 'Partial' from 'torch.distributed._tensor'", "import"),
    # a command that is not a compiler failing is not a build's
    ("", "error: command 'git' failed with exit code 128", "other"),
    # vLLM's Ray executor with no GPU worker on the driver's node (0.2-0.6, and ray_utils from 0.5) is the launcher's;
    # CUDA's 802 by its number alone (the fabric manager not done) is the driver's
    ("ValueError", "Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray placement group or "
                   "running the driver on a GPU node.", "launcher"),
    ("ValueError", "Current node has no GPU available. current_node_resource={'CPU': 8.0, 'memory': 1.0}. vLLM engine "
                   "cannot start without GPU. Make sure you have at least 1 GPU available in a node", "launcher"),
    ("RuntimeError", "CUDA Error 802 on all H200 multi-GPU jobs", "driver"),
    ("RuntimeError", "cudaGetDeviceCount failed: CUDA runtime error (802)", "driver"),
    # Horovod's ssh check of its hosts (either release's wording), SkyPilot's node address not in its cluster
    ("", "Checking ssh on all remote hosts.\nssh not successful for host server1-0:\n"
         "root@10.0.0.2: Permission denied (publickey,password).", "launcher"),
    ("", "ssh not successful for host node-1.\nstderr:\nssh: Could not connect", "launcher"),
    ("RuntimeError", "RuntimeError: IP address 127.0.1.1 not found in cluster IPs: ['10.0.0.4', '10.0.0.5']",
     "launcher"),
    # the twelfth split (h12a-): the kernel module's version check cut before its first line, X's words for it,
    # the kernel unable to bring a GPU up, the open module refusing one, loaders finding no libcuda: the driver's
    ("", "NVRM: this kernel module has the version 375.39.  Please\nNVRM: make sure that this kernel module and all "
         "NVIDIA driver\nNVRM: components have the same version.", "driver"),
    ("", "Error: API mismatch: the NVIDIA kernel module has the version 304.51, but this NVIDIA driver component has "
         "version 295.49.", "driver"),
    ("", "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)", "driver"),
    ("", "NVRM: The NVIDIA GPU 0000:17:00.0 (PCI ID: 10de:1bb3) installed in this system\nNVRM: is not supported by "
         "open nvidia.ko because it does not include the\nNVRM: required GPU System Processor (GSP).", "driver"),
    ("RuntimeError", "RuntimeError: Failed to dlopen libcuda.so.1", "driver"),
    ("", "Unable to dynamically load the \"cuda\" shared library - searched for library names: [\"cuda\", \"nvcuda\"]. "
         "Ensure that `LD_LIBRARY_PATH` has the correct path to the installed library.", "driver"),
    # Singularity unable to create the container, podman/toolbox unable to apply a CDI mount: the launcher's
    ("", "FATAL:   container creation failed: mount /run/nvidia-persistenced/socket->/run/nvidia-persistenced/socket "
         "error: while mounting /run/nvidia-persistenced/socket: destination /run/nvidia-persistenced/socket doesn't "
         "exist in container", "launcher"),
    ("", "Error: mount: /run/nvidia-persistenced/socket: mount point does not exist.\nfailed to apply mount from "
         "Container Device Interface for NVIDIA", "launcher"),
    # the thirteenth split (h13a-, h13c-): the driver API's cuMemCreate refused is CUDA's; slurmd refusing gres.conf,
    # the API server refusing a service account, a Ray node not reaching the head's Redis are the launcher's
    ("", "GpuBuffer cuMemCreate failed: operation not permitted", "cuda"),
    ("", "slurmd[57977]: fatal: gres.conf duplicate records for gpu", "launcher"),
    ("", 'error retrieving resource lock kubeflow/mpi-operator: endpoints "mpi-operator" is forbidden: User '
         '"system:serviceaccount:kubeflow:mpi-operator" cannot get resource "endpoints" in API group "" in the '
         'namespace "kubeflow"', "launcher"),
    ("", "F1119 08:22:23.602082 1513663 1513663 redis_context.cc:298] Could not establish connection to redis "
         "10.0.0.1:6379 (context.err = 1)", "launcher"),
    # a person's user refused is not a launcher's start-up
    ("", 'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group '
         '"" in the namespace "default"', "other"),
    # the thirteenth split (h13d-): NCCL's "unhandled cuda error" in Paddle's wrappers that do not say NCCL is NCCL's;
    # builds without NCCL kernels (TensorFlow) or the distributed kvstore (MXNet), a package's library file not found:
    # import; horovodrun not recognising the mpirun on PATH: the launcher's; JAX's CUDA init: cuda
    ("OSError", "OSError: (External)  Nccl error, unhandled cuda error  (at /paddle/paddle/fluid/platform/"
                "collective_helper.cc:100)", "nccl"),
    ("", "paddle.fluid.core.EnforceNotMet: unhandled cuda error at [/paddle/fluid/platform/nccl_helper.h:93]", "nccl"),
    ("", "No OpKernel was registered to support Op 'NcclAllReduce' used by {{node NcclAllReduce}} with these attrs: "
         "[reduction=\"sum\", T=DT_FLOAT, num_devices=2]", "import"),
    ("", "compile with USE_DIST_KVSTORE=1 to use dist_sync", "import"),
    ("", "File fbgemm_gpu_py.so not found", "import"),
    ("Exception", "Open MPI not found in output of mpirun --version.\nException: horovodrun convenience script does not "
                  "find an installed OpenMPI.", "launcher"),
    ("", "CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:90: operation gpuDeviceGetAttribute( "
         "&major, GPU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) failed: CUDA_ERROR_NOT_INITIALIZED", "cuda"),
    ("RuntimeError", "Unable to initialize backend 'cuda': INTERNAL: no supported devices found for platform CUDA", "cuda"),
    # another op without a kernel is not a build without NCCL
    ("", "No OpKernel was registered to support Op 'CollectiveReduceV2' used by {{node x}}", "other"),
    # the fourteenth split (h14a-): vLLM's own search for libnccl that found none: import; CuPy's NcclError as Ray's
    # RayTaskError prints it: nccl; a RayTaskError of another type is not NCCL's
    ("ValueError", "ValueError: Cannot find libnccl.so.2 in the system.", "import"),
    ("", "ray.exceptions.RayTaskError(NcclError): ray::Worker.compute() (pid=35381, ip=10.0.0.2)", "nccl"),
    ("", "ray.exceptions.RayTaskError(ValueError): ray::Worker.compute() (pid=35381, ip=10.0.0.2)", "other"),
    # the fifteenth split (h15f-): DeepSpeed's MPI discovery at odds with the script's own process group, Lightning's
    # script-launched DDP in a notebook: launcher; a world size in another assertion is not
    ("AssertionError", "AssertionError: MPI world size 16 does not match torch world size 8", "launcher"),
    ("AssertionError", "AssertionError: MPI rank 9 does not match torch rank 1", "launcher"),
    ("MisconfigurationException", "`Trainer(strategy='ddp')` is not compatible with an interactive environment. Run "
     "your code as a script", "launcher"),
    ("AssertionError", "AssertionError: world size 16 does not match the number of GPUs 8", "other"),
    # the fourteenth split (h14c-): the open module's refusal as the kernel wraps it, nvidia-smi without NVML's library,
    # the GPU Operator's driver container unable to unload modules in use: driver; crun unable to stat a CDI spec's
    # driver library, and that library "not found" under podman: launcher; cuDNN 8 unable to load its sub-library:
    # import; nccl-tests' CUDACHECK: cuda
    ("", "NVRM: installed in this system is not supported by open\n             NVRM: nvidia.ko because it does not "
         "include the required GPU", "driver"),
    ("", "[    4.1] NVRM: installed in this system is not supported by open\n[    4.1] NVRM: nvidia.ko because",
     "driver"),
    ("", "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", "driver"),
    ("", "Unloading NVIDIA driver kernel modules...\nCould not unload NVIDIA driver kernel modules, driver is in use",
     "driver"),
    ("", "Error: crun: cannot stat `/lib64/libEGL_nvidia.so.550.54.14`: No such file or directory: OCI runtime "
         "attempted to invoke a command that was not found", "launcher"),
    ("", "Error: unable to start container \"ecdb\": crun: error stat'ing file `/lib/x86_64-linux-gnu/libEGL_nvidia.so."
         "535.161.07`: No such file or directory", "launcher"),
    ("", "libnvidia-egl-wayland.so.1.1.13 not found after the podman update", "launcher"),
    ("", "Could not load library libcudnn_ops_infer.so.8", "import"),
    ("", "node1: Test CUDA failure common.cu:892 'initialization error'", "cuda"),
    # a versioned library not found outside a container engine is not the engine's; NCCL's own test failure is NCCL's
    ("", "libnvidia-egl-wayland.so.1.1.13 not found", "other"),
    ("", "node1: Test NCCL failure common.cu:1005 'unhandled system error'", "nccl"),
    # the fifteenth split (h15a-, h15c-): Open MPI's srun refusal as quoted without its "was", its PMIx client finding
    # no server at MPI_Init, a Ray node unable to reach the GCS: launcher; a rank attaching to a peer's cuMem handle
    # as a nameless /dev/shm segment of size 0: nccl, where a named segment that cannot grow stays shm
    ("", "# fails with : \"... OMPI not build with SLURM's PMI support and therefore cannot execute ...\"", "launcher"),
    ("", "OPAL ERROR: Unreachable in file pmix3x_client.c at line 112\n*** An error occurred in MPI_Init_thread",
     "launcher"),
    ("", "gcs_rpc_client.h:151: Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.", "launcher"),
    ("", "misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), "
         "error: No such file or directory (2)", "nccl"),
    ("", "misc/shmutils.cc:60 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ab12Cd (size "
         "9637888), error: No space left on device (28)", "shm"),
    # the fifteenth split (h15e-): pyxis/enroot unable to import or start the container, an OCI runtime's create or
    # hook failing (cut), the engine's daemon not starting (systemd's words, dockerd refusing its configuration), the
    # Kubernetes device plugin unable to start: launcher; the NGC images' banner of no driver: driver; CUDA's 500 in
    # quotes, and a driver API code by its name: cuda
    ("", "slurmstepd: error: pyxis: failed to import docker image\nslurmstepd: error: spank: required plugin "
         "spank_pyxis.so: task_init_privileged() failed with rc=-1", "launcher"),
    ("", "slurmstepd: error: pyxis:     enroot-mount: failed to mount: /data at /tmp/x/data: Permission denied\n"
         "slurmstepd: error: pyxis: couldn't start container", "launcher"),
    ("", "docker: Error response from daemon: OCI runtime create failed: container_linux.go:367: starting container "
         "process caused: process_linux.go:495: container init caused: Running hook #0:: error running h", "launcher"),
    ("", "Job for docker.service failed because the control process exited with error code.", "launcher"),
    ("", "Process: 1 ExecStart=/usr/bin/dockerd --host=fd:// (code=exited, status=1/FAILURE)", "launcher"),
    ("", "unable to configure the Docker daemon with file /etc/docker/daemon.json: invalid character", "launcher"),
    ("", "error starting plugins: error visiting devices: error visiting device: Insufficient Permissions", "launcher"),
    ("", "failed to construct NVML resource managers", "launcher"),
    ("", "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.", "driver"),
    ("", "WSL2 returns error 500 \"named symbol not found\" when running CUDA apps inside container", "cuda"),
    ("", "'CUDA_ERROR_UNKNOWN' error using DeepVariant GPU version.", "cuda"),
    # the OCI runtime's failure naming a driver too old for the image stays the driver's; a code of another class
    # by its name stays that class's; a daemon.json merely named is nothing
    ("", "OCI runtime create failed: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=11.0",
     "driver"),
    ("", "CUDA_ERROR_OUT_OF_MEMORY: out of memory", "oom"),
    ("", "edited /etc/docker/daemon.json", "other"),
    # the fifteenth split (h15d-): NIXL's agent unable to load a backend's plugin: import; the backend found but
    # failing to start is not
    ("", "E0421 nixl_agent.cpp:259] getPluginParams: backend 'UCX' not found", "import"),
    ("", "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND", "other"),
    # the sixteenth split (h16c-): a CPU-only jaxlib (no "cuda" platform): import; Accelerate's config with keys a
    # newer accelerate wrote: launcher; DeepSpeed's config refusing a value is neither
    ("", "RuntimeError: Backend 'gpu' failed to initialize: NOT_FOUND: Could not find registered platform with "
         "name: \"cuda\". Available platform names are: Host Interpreter", "import"),
    ("", "ValueError: The config file at /root/.cache/huggingface/accelerate/default_config.yaml had unknown keys "
         "(['enable_cpu_affinity'])", "launcher"),
    ("", "pydantic_core._pydantic_core.ValidationError: 1 validation error for DeepSpeedZeroConfig", "other"),
    # the seventeenth split (h17c-): TensorRT-LLM unable to enable peer access between two GPUs: cuda; a peer
    # access already enabled is no error
    ("", "RuntimeError: Can't enable access between nodes 1 and 0", "cuda"),
    ("", "INFO: enable access between nodes 1 and 0", "other"),
    # the sixteenth split (h16b-): TensorFlow finding no libcuda loaded: driver; the engine unable to start the
    # nvidia runtime, a deployment's default-runtime check, Open MPI's PMI component, a site refusing --gres:
    # launcher; an "acceptable" that is not a refused parameter stays other
    ("", "libcuda reported version is: Not found: was unable to find libcuda.so DSO loaded into this program",
     "driver"),
    ("", "fork/exec /usr/bin/nvidia-container-runtime: no such file or directory: unknown", "launcher"),
    ("", "The following requirements are not met: The default runtime is not set correctly", "launcher"),
    ("", "OPAL ERROR: Error in file %s/opal/mca/pmix/s1/pmix_s1.c at line 578", "launcher"),
    ("", "sbatch: error: Parameter --gres=gpu:1 no longer acceptable, please switch to --gpus=1", "launcher"),
    ("", "the loss is no longer acceptable after step 10", "other"),
    # the seventeenth split (h17b-): Singularity's --nv finding no driver: driver; Slurm refusing the --gpus options
    # or gres.conf, PMIx's errors, sshd refusing a key, ch-run, the RDMA device plugin, a registry refusing a
    # pull: launcher; a word of them in a training log stays other
    ("", "WARNING: Could not find any NVIDIA libraries on this host!", "driver"),
    ("", "sbatch: error: Requested GRES option unsupported by configured SelectType plugin", "launcher"),
    ("", "sbatch: unrecognized option '--gpus=4'", "launcher"),
    ("", "error: _node_config_validate: gres/gpu: invalid GRES core specification (0-7) on node n1", "launcher"),
    ("", "slurmd: fatal: can't stat gres.conf file /dev/nvidia0: No such file or directory", "launcher"),
    ("", "[n1:0714] PMIX ERROR: OUT-OF-RESOURCE in file gds_dstore.c at line 1017", "launcher"),
    ("", "Authentication refused: bad ownership or modes for directory /root", "launcher"),
    ("", "ch-run: can't init user+mount namespaces: Operation not permitted (ch-run.c:519 1)", "launcher"),
    ("", 'error creating new device: "missing RDMA device spec for device 0000:e1:00.0"', "launcher"),
    ("", "[ERROR] URL https://gcr.io/v2/x/y/manifests/latest returned error code: 401 Unauthorized", "launcher"),
    ("", "failed to solve: nvcr.io/x:1: failed to resolve source metadata for nvcr.io/x:1: unexpected status from HEAD "
     "request to https://nvcr.io/v2/x/manifests/1: 401 Unauthorized", "launcher"),
    ("", "the pmix error count and the rdma device spec were logged", "other"),
])
def test_classify_text(type_name: str, message: str, expected: str) -> None:
    assert _load("classify").classify_text(type_name, message) == expected


def test_classify_exception_follows_causes_and_backend() -> None:
    classify = _load("classify")
    try:
        try:
            raise OSError("shm_open failed for /dev/shm/x")
        except OSError as inner:
            raise RuntimeError("collective failed") from inner
    except RuntimeError as exc:
        assert classify.classify_exception(exc) == "shm"

    class DistBackendError(RuntimeError):
        pass

    assert classify.classify_exception(DistBackendError("peer closed"), "nccl") == "nccl"
    assert classify.classify_exception(DistBackendError("peer closed"), "gloo") == "other"
    assert classify.classify_exception(ModuleNotFoundError("x")) == "import"


def test_env_values_are_kept_only_for_safe_names_and_changes() -> None:
    fp, mask = _load("fingerprint"), _load("redact").MASK
    environ = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1", "HF_TOKEN": "t",
               "ACCELERATE_API_KEY": "k", "TORCH_SECRET_X": "s", "CUDA_VISIBLE_DEVICES": "0,1",
               "NCCL_PASSWORD": "p", "NCCL_COLLNET_PASSWD": "pw", "TORCH_HUB_CREDENTIALS": "c",
               "TORCH_AUTH_HEADER": "Bearer x", "TORCH_HOME": "/root/.cache/torch",
               "NCCL_NET_PLUGIN": "http://user:pw@host/plugin", "NCCL_VERSION": "2.28.3-1", "PATH": "/bin"}
    env = fp.relevant_env(environ)
    for name in ("ACCELERATE_API_KEY", "TORCH_SECRET_X", "NCCL_PASSWORD", "NCCL_COLLNET_PASSWD", "TORCH_HUB_CREDENTIALS",
                 "TORCH_AUTH_HEADER", "TORCH_HOME"):  # credential-looking, or not known to be safe
        assert env[name] == mask, name
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["NCCL_P2P_DISABLE"] == "1"
    assert env["NCCL_NET_PLUGIN"] == "http://***@host/plugin"
    assert "HF_TOKEN" not in env and "PATH" not in env
    changed = fp.nccl_env_changed({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "HF_TOKEN": mask,
                                   "NCCL_SOCKET_IFNAME": None}, environ)
    assert changed == {
        "NCCL_SHM_DISABLE": {"expected": "1", "actual": None},
        "NCCL_IB_DISABLE": {"expected": None, "actual": "1"},
        "NCCL_PASSWORD": {"expected": None, "actual": mask},
        "NCCL_COLLNET_PASSWD": {"expected": None, "actual": mask},
        "NCCL_NET_PLUGIN": {"expected": None, "actual": "http://***@host/plugin"},
    }
    assert fp.detect_launcher({"ACCELERATE_MIXED_PRECISION": "no",
                               "TORCHELASTIC_RUN_ID": "x"}) == "accelerate"
    assert fp.detect_launcher({"TORCHELASTIC_RUN_ID": "x"}) == "torchrun"
    assert fp.detect_launcher({"ACCELERATE_LOG_LEVEL": "info"}) == "none"


def test_small_helpers() -> None:
    fp, cli, bw, distenv = (_load(m) for m in ("fingerprint", "cli", "bandwidth", "distenv"))
    assert fp.parse_driver_proc(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.3.0") == "550.54.15"
    assert fp.parse_driver_proc(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build"
    ) == "580.159.04"
    assert fp.memlock_limit()["soft"] == "unlimited" or isinstance(fp.memlock_limit()["soft"], int)
    assert cli.parse_sizes("4096,8K,1M,1GiB") == [4096, 8192, 1 << 20, 1 << 30]
    gpu = cli.default_sizes("cuda")
    assert gpu[0] == 8192 and gpu[-1] == 1 << 30 and gpu == sorted(set(gpu))
    assert cli.default_sizes("cpu") == [4096 * 4 ** k for k in range(7)]
    assert bw.bus_factor(1) == 0.0 and bw.bus_factor(2) == 1.0 and bw.bus_factor(8) == 1.75
    assert distenv.async_error_var("2.1.2+cu121") == "NCCL_ASYNC_ERROR_HANDLING"
    assert distenv.async_error_var("2.2.0") == "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    assert distenv.parse_version("2.7.1+cu126") == (2, 7, 1)
    env: dict[str, str] = {"NCCL_DEBUG": "WARN"}
    set_now = distenv.set_init_env(env, "/o", 3, "2.13.0")
    assert env["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_SUBSYS" not in env
    assert set_now == {"NCCL_DEBUG_FILE": "/o/nccl-rank3.log",
                       "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}


def test_mapped_libs_parses_proc_maps(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r--p 00000000 08:01 1 /usr/lib/libnccl.so.2.28.3\n"
        "7f01-7f02 r-xp 00001000 08:01 1 /usr/lib/libnccl.so.2.28.3\n"
        "7f02-7f03 r--p 00000000 08:01 2 /opt/v/nvidia/nccl/lib/libnccl.so.2\n"
        "7f03-7f04 r--p 00000000 08:01 3 /opt/plugins/libnccl-net.so\n"
        "7f04-7f05 rw-p 00000000 00:00 0 \n"
        "7ffd-7ffe rw-p 00000000 00:00 0 [stack]\n")
    fp = _load("fingerprint")
    assert fp.mapped_libs("libnccl.so", str(maps)) == [
        "/usr/lib/libnccl.so.2.28.3", "/opt/v/nvidia/nccl/lib/libnccl.so.2"]
    assert len(fp.mapped_libs("libnccl", str(maps))) == 3
    assert fp.mapped_libs("libnccl", str(tmp_path / "absent")) == []


def test_bounded_reports_timeout_and_errors() -> None:
    fp = _load("fingerprint")
    assert fp.bounded(lambda: time.sleep(5), 0.1) == "timeout"
    assert fp.bounded(lambda: 1 // 0, 5)["error"].startswith("ZeroDivisionError")
    assert fp.bounded(lambda: True, 5) is True


def _fake_nccl(tmp_path: Path, name: str, code: int) -> Path:
    """A real shared object named libnccl.so.2 whose ncclGetVersion answers ``code``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in libnccl")
    folder = tmp_path / name
    folder.mkdir()
    src = folder / "nccl.c"
    src.write_text(f"int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}\n")
    lib = folder / "libnccl.so.2"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", str(lib), str(src)],
                   check=True, timeout=120)
    return lib


def _nccl_loaded_in_child(env: dict[str, str], preload_path: Path | None = None) -> dict:
    code = ("import ctypes, json, sys\n"
            f"sys.path.insert(0, {str(WORKLOAD_DIR.parent)!r})\n"
            "from workload import fingerprint\n")
    if preload_path is not None:
        code += f"ctypes.CDLL({str(preload_path)!r})\n"
    code += "print(json.dumps(fingerprint.nccl_loaded()))\n"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_nccl_loaded_reads_the_library_really_in_the_process(tmp_path: Path) -> None:
    """ncclGetVersion through ctypes: LD_PRELOAD wins, dlopen fallback, several mapped."""
    a = _fake_nccl(tmp_path, "a", 22809)
    b = _fake_nccl(tmp_path, "b", 23007)
    env = _env(tmp_path)
    env.pop("LD_PRELOAD", None)
    got = _nccl_loaded_in_child(dict(env, LD_PRELOAD=str(a)))
    assert (got["version"], got["code"], got["path"], got["source"]) == \
        ("2.28.9", 22809, str(a), "mapped")
    got = _nccl_loaded_in_child(dict(env, LD_LIBRARY_PATH=str(b.parent)))
    assert (got["version"], got["path"], got["source"]) == ("2.30.7", str(b), "dlopen")
    got = _nccl_loaded_in_child(dict(env, LD_PRELOAD=str(a)), preload_path=b)
    assert got["version"] == "2.28.9" and got["path"] == str(a)  # what the soname resolves to
    assert sorted(e["version"] for e in got["all"]) == ["2.28.9", "2.30.7"]
    if ctypes.util.find_library("nccl") is None:  # no system libnccl to find by soname
        got = _nccl_loaded_in_child(dict(env, LD_LIBRARY_PATH=str(tmp_path / "nowhere")))
        assert got["path"] is None and "error" in got


def test_event_lines_are_single_valid_json(tmp_path: Path) -> None:
    events = _load("events")
    writer = events.EventWriter(str(tmp_path / "e.jsonl"), rank=1, world=4)
    rec = writer.emit("phase_end", phase="step", loss=float("nan"), obj=object())
    writer.close()
    line = (tmp_path / "e.jsonl").read_text()
    assert line.count("\n") == 1
    parsed = json.loads(line)
    assert parsed["loss"] is None and parsed["rank"] == 1 and parsed["world"] == 4
    assert COMMON_FIELDS <= set(parsed) and rec["event"] == "phase_end"
