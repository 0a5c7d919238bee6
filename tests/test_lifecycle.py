"""Nothing lost, nothing left behind (issue 14): a harness that dies takes its cell with it (SIGKILL,
SIGTERM), what a dead harness left is removed by the next command, a run folder has one owner at a
time, a full or read-only results folder stops the run with exit 4 keeping every record, and no event
line crashes the supervisor. Faults are real: signals to a real `python -m harness matrix`, a tmpfs
filled or remounted read-only while a cell runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import matrixfile, owner, results, supervise
from harness.engines import host
from harness.errors import HarnessError, WriteError

from .conftest import REPO, WHEELHOUSE, mounted_tmpfs

CELL_MATRIX = """version: 1
stacks:
  matrix: {{cuda: ["cpu"], torch: ["2.13.0"], accelerate: ["1.15.0"]}}
variants: {variants}
launchers: [accelerate]
ranks: 2
timeouts: {{bandwidth: {stall}, cell: 900}}
bandwidth: {{sizes: ["{size}"], iters: {iters}, warmup: 1, trials: 1}}
"""
# a cell whose bandwidth sweep would run for minutes: what a killed harness must not leave running
LONG = dict(variants="[default]", stall=600, size="64M", iters=5000)


def _matrix(tmp_path: Path, name: str, **fields) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(CELL_MATRIX.format(**{**LONG, **fields}))
    return path


def _harness(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=300)


def _owned_by(pid: int) -> list[host.Marked]:
    """Host processes started by the harness with this pid (its owner marker in their environment)."""
    return [p for p in host.marked(owner.OWNER_VAR) if (o := owner.Owner.parse(p.value)) and o.pid == pid]


def _wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"{what}: the harness ended first (exit {proc.returncode}): {err[-2000:]}")
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _in_phase(run: Path, phase: str, variant: str = "default") -> bool:
    """Both ranks of the cell of `variant` have started `phase`."""
    for rank in (0, 1):
        started = []
        for path in run.glob(f"cells/*+{variant}/attempt-1/events-rank{rank}.jsonl"):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                started.append(event.get("phase") if event.get("event") == "phase_start" else None)
        if phase not in started:
            return False
    return True


def _all_json_parses(root: Path) -> list[Path]:
    bad = []
    for path in root.rglob("*.json"):
        try:
            json.loads(path.read_text())
        except ValueError:
            bad.append(path)
    return bad


# ------------------------------------------------------------------------------------ fast: no torch
@pytest.mark.parametrize("line", [
    b'{"event":"phase_start","phase":{"a":1},"pid":1}',
    b'{"event":"phase_end","phase":"init","seconds":[1,2]}',
    b'{"event":"phase_start","phase":"init","pid":"12"}',
    b'{"event":"heartbeat","pid":true,"source":"main"}',
    b'{"event":"error","phase":"init","message":["x"],"error_class":{"b":2}}',
    b'{"event":["phase_start"]}',
    b'["not", "an", "object"]',
    b'"phase_start"',
    b"[" * 20000 + b"]" * 20000,
    b"\xff\xfe not utf-8",
])
def test_a_malformed_event_line_is_counted_and_skipped_never_a_crash(tmp_path, line):
    path = tmp_path / "events-rank0.jsonl"
    good = b'{"event":"phase_start","phase":"init","pid":7}'
    path.write_bytes(line + b"\n" + good + b"\n" + b'{"event":"phase_end","pha')  # and a torn last line
    tail = supervise.EventTail(path)
    watch = supervise.Watch(1, matrixfile.Timeouts(), started=0.0)
    for event in tail.read():
        watch.feed(0, event, 1.0)
    assert tail.malformed == 1
    assert watch.phase() == "init" and watch.states[0].pid == 7
    assert watch.stalled(2.0) is None and watch.behind(2.0) == {}


def test_an_owner_is_dead_once_its_process_is_gone_and_never_when_it_is_elsewhere():
    child = subprocess.Popen(["sleep", "30"])
    ticks = int(Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    alive = owner.Owner(socket.gethostname(), owner.current().boot, child.pid, ticks)
    assert owner.Owner.parse(alive.marker) == alive and not alive.dead()
    assert owner.Owner(alive.host, alive.boot, child.pid, ticks + 1).dead()  # the pid, reused by another process
    assert not owner.Owner("another-host", alive.boot, child.pid, ticks + 1).dead()  # cannot tell: never touched
    child.kill()
    child.wait()
    assert alive.dead()
    assert owner.Owner.parse("garbage") is None


def _stray(env_owner: str) -> subprocess.Popen:
    return subprocess.Popen(["sleep", "120"], env={**os.environ, owner.OWNER_VAR: env_owner})


def _dead_marker() -> str:
    me = owner.current()
    return owner.Owner(me.host, me.boot, 2**22 + 7, 1).marker  # above pid_max: no such process


@pytest.mark.parametrize("command", [["clean"], ["list", "--matrix", "matrix-cpu.yaml"]])
def test_the_next_command_removes_what_a_dead_harness_left_and_says_so(command):
    """Also `clean` without a Docker engine: the host is swept, exit 0 (it used to exit 4)."""
    orphan, live = _stray(_dead_marker()), _stray(owner.current().marker)
    try:
        done = _run(*command, env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert f"process {orphan.pid}" in done.stderr and "dead harness" in done.stderr
        assert live.poll() is None, "a live harness's process was killed"
        if command == ["clean"]:
            assert "No Docker engine reachable" in done.stderr and "removed 1 process(es)" in done.stdout
    finally:
        for p in (orphan, live):
            p.kill()
            p.wait()


def test_a_run_folder_has_one_owner_and_a_dead_owners_lock_is_taken_over(tmp_path):
    run = results.run_dir(tmp_path, "shared")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from harness import results;\n"
                               "with results.owned(results.Path(sys.argv[1])):\n print('held', flush=True); time.sleep(60)",
                               str(run)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(HarnessError) as exc, results.owned(run):
            pass
        assert exc.value.code == 2 and f"pid {holder.pid}" in str(exc.value) and "--run-id" in str(exc.value)
    finally:
        holder.kill()
        holder.wait()
    with results.owned(run) as stale:  # the kernel dropped the dead holder's lock; its file still names it
        assert stale is not None and f"pid {holder.pid}" in stale
    with results.owned(run) as stale:
        assert stale is None  # released cleanly


@pytest.fixture
def tmpfs(tmp_path):
    """A real small file system of its own (root only: mount), unmounted afterwards."""
    with mounted_tmpfs(tmp_path / "mnt") as mnt:
        yield mnt


def _fill(mnt: Path) -> None:
    """Fill the file system to its last byte."""
    with open(mnt / "filler", "wb", buffering=0) as fh:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while fh.write(b"\0" * size):
                    pass
            except OSError:
                continue


def test_a_write_to_a_full_disk_is_a_write_error_naming_the_path_and_keeps_the_old_file(tmpfs):
    record = tmpfs / "record.json"
    results.write_json(record, {"kept": True})
    _fill(tmpfs)
    with pytest.raises(WriteError) as exc:
        results.write_json(record, {"kept": False, "pad": "x" * (1 << 20)})
    assert str(record) in str(exc.value) and "No space left" in str(exc.value) and "Fix: free space" in str(exc.value)
    assert json.loads(record.read_text())["kept"] is True
    assert sorted(p.name for p in tmpfs.iterdir()) == ["filler", "record.json"]  # no temporary file left
    with pytest.raises(WriteError) as exc:
        results.run_dir(tmpfs, "run")  # the start-up check writes a realistic size
    assert exc.value.code == 4


# ------------------------------------------------------------------- real cells on the host engine
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_harness_takes_its_cell_with_it(tmp_path, sig):
    pytest.importorskip("torch")
    run = tmp_path / "k"
    proc = _harness("matrix", "--engine", "host", "--matrix", str(_matrix(tmp_path, "long")),
                    "--results", str(tmp_path), "--run-id", "k")
    try:
        _wait_for(lambda: _in_phase(run, "init"), proc, "the cell's ranks did not start")
        assert len(_owned_by(proc.pid)) >= 3  # the launcher and both ranks, tagged with their owner
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 5
        while _owned_by(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _owned_by(proc.pid) == [], "the cell outlived its harness"
    finally:
        proc.kill()
    if sig == signal.SIGTERM:  # handled like Ctrl-C: the cell is recorded as interrupted, the report written
        assert proc.returncode == 130, err[-2000:]
        (record,) = run.glob("cells/*/record.json")
        assert json.loads(record.read_text())["outcome"]["status"] == "interrupted"
        assert (run / "report.md").exists() and "Traceback" not in err
    assert _all_json_parses(run) == []


def test_a_second_harness_on_the_same_run_exits_2_and_the_first_is_unaffected(tmp_path):
    pytest.importorskip("torch")
    m = _matrix(tmp_path, "mid", size="16M", iters=300)
    args = ("matrix", "--engine", "host", "--matrix", str(m), "--results", str(tmp_path), "--run-id", "same")
    first = _harness(*args)
    try:
        _wait_for(lambda: _in_phase(tmp_path / "same", "init"), first, "the first harness's cell did not start")
        # Held while the second runs: on a slow CI machine the first had finished (and let go of the run)
        # before the second's interpreter was up. A stopped process still holds its lock; its ranks go on.
        first.send_signal(signal.SIGSTOP)
        try:
            second = _run(*args)
        finally:
            first.send_signal(signal.SIGCONT)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"in use by harness pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
        _out, err = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 0, err[-2000:]
    (record,) = (tmp_path / "same").glob("cells/*/record.json")
    assert json.loads(record.read_text())["outcome"]["status"] == "pass"


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory) -> Path:
    """A finished run with one passed cell (default), to be continued with --resume on a tmpfs."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("earlier")
    m = _matrix(root, "quick", size="4K", iters=2)
    done = _run("matrix", "--engine", "host", "--matrix", str(m), "--results", str(root), "--run-id", "r")
    assert done.returncode == 0, done.stderr[-2000:]
    return root / "r"


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_results_folder_that_fails_mid_cell_stops_the_run_with_exit_4_keeping_every_record(
        tmpfs, tmp_path, earlier_run, fault):
    run = tmpfs / "r"
    shutil.copytree(earlier_run, run)
    (kept,) = run.glob("cells/*+default/record.json")
    before = kept.read_bytes()
    # the second cell: its sweep would last minutes; a bandwidth stall threshold of 6 s ends it early
    m = _matrix(tmp_path, "two", variants="[default, p2p-off]", stall=6)
    proc = _harness("matrix", "--engine", "host", "--matrix", str(m), "--results", str(tmpfs), "--run-id", "r",
                    "--resume")
    try:
        _wait_for(lambda: _in_phase(run, "bandwidth", "p2p-off"), proc, "the second cell did not reach bandwidth")
        if fault == "read-only":  # a read-only bind mount over the run: the ranks' open files keep theirs
            subprocess.run(["mount", "--bind", str(run), str(run)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(run)], check=True)
        else:
            _fill(tmpfs)
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 4, err[-3000:]
    assert "Traceback" not in err
    cause = "Read-only file system" if fault == "read-only" else "No space left on device"
    assert f"cannot write {run}" in err and cause in err and "Fix:" in err and "--resume --run-id r" in err
    assert kept.read_bytes() == before
    assert _all_json_parses(run) == [] and not list(run.rglob(".*.tmp"))
    assert _owned_by(proc.pid) == []


# ------------------------------------------------------------------- a real container of the docker engine
@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_harness_takes_its_container_with_it(engine, cpu_image, tmp_path, sig):
    from harness.engines.docker import LABEL_OWNER, LABEL_RUN

    run_id = f"{sig.name.lower()}-{os.getpid()}-{tmp_path.name}"[:60]
    proc = _harness("matrix", "--engine", "docker", "--matrix", str(_matrix(tmp_path, "long")), "--wheelhouse",
                    str(WHEELHOUSE), "--results", str(tmp_path), "--run-id", run_id)
    try:
        _wait_for(lambda: _in_phase(tmp_path / run_id, "init"), proc, "the cell's container did not start")
        (name,) = engine.client.leftovers(f"{LABEL_RUN}={run_id}")
        assert engine.client.labelled(f"{LABEL_RUN}={run_id}")[0][1][LABEL_OWNER].split("/")[2] == str(proc.pid)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 15
        while engine.client.leftovers(f"{LABEL_RUN}={run_id}") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.client.leftovers(f"{LABEL_RUN}={run_id}") == [], f"{name} outlived its harness"
    finally:
        proc.kill()
    if sig == signal.SIGTERM:  # handled like Ctrl-C: the container is removed by the harness itself
        assert proc.returncode == 130, err[-2000:]
        (record,) = (tmp_path / run_id).glob("cells/*/record.json")
        assert json.loads(record.read_text())["outcome"]["status"] == "interrupted" and "Traceback" not in err
    assert _all_json_parses(tmp_path / run_id) == []
