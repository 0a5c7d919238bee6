"""A hang's advice comes from who was behind (issue 23), shown for real both ways in real containers
(CPU image, gloo), each through runner.run_cell and read back from the record on disk:

- one rank behind: rank 1 is stopped (SIGSTOP) as it starts `step`, so it never reaches the gradient
  all-reduce that rank 0 waits in. The cell is a hang naming rank 1, and its hints say "find the rank
  behind" (watchdog-timeout), not the transport advice.
- every rank inside the same collective, the path between them broken after init: both ranks are held
  at the start of `step` (the workload's test-only --hold-at), then every packet into the container's
  network namespace is dropped from the host (`nsenter -t <rank's host pid> -n iptables -A INPUT -j
  DROP`), then both are released into the all-reduce. The ranks share that namespace and gloo's pairs
  are TCP connections inside it (over its loopback), so nothing they send arrives: both wait in the
  collective, alive (their heartbeats go to the mounted results folder, not the network). The cell is a
  hang with no rank behind, and its hints give the transport advice (transport-hang: the rescue search
  and the P2P/SHM/NET/socket knobs) and never "raise the timeout". The rule dies with the container.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from harness import commands, hints, matrix, matrixfile, report, results, runner
from harness.engines.docker import LABEL_RUN
from harness.record import CellRecord

from .conftest import Fault, _unavailable

# short thresholds: each cell hangs for about 8 s before the supervisor stops it (4 s was flaky on a
# loaded machine, tests/test_report.py)
TIMEOUTS = matrixfile.Timeouts(fingerprint=60, init=8, prepare=8, step=8, check=8, bandwidth=8, teardown=10, cell=180)
RANK_BEHIND, TRANSPORT = "watchdog-timeout", "transport-hang"

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _cell() -> tuple[matrix.Cell, matrix.Matrix]:
    """The CPU matrix's Accelerate 1.15.0 default cell (gloo), with the short thresholds."""
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    m = matrix.Matrix(**{**m.__dict__, "timeouts": TIMEOUTS})
    cell = next(c for c in m.cells if c.launcher == "accelerate" and c.stack.accelerate == "1.15.0"
                and c.variant.name == "default")
    return cell, m


def _run(engine, image: str, root: Path, run_id: str, fault) -> tuple[CellRecord, dict]:
    """Run the cell for real with both ranks held at `step` until `fault` releases them; the record as
    read back from results/<run>/cells/<cell>/record.json."""
    cell, m = _cell()
    opts = runner.RunOptions(run_id, root, (), 2, extra_args=("--hold-at", "step"),
                             extra_env=(("HARNESS_TEST_FAULTS", "1"),))
    runner.run_cell(engine, cell, m, opts, image=image, on_event=fault, on_start=fault.start)
    assert engine.client.leftovers(f"{LABEL_RUN}={run_id}") == []
    data = json.loads((root / run_id / "cells" / cell.id / "record.json").read_text())
    record = CellRecord.parse(data)
    assert record is not None
    return record, data


def _host_pid(running, inner: int) -> int:
    """The host's pid of the container's process `inner` (NSpid's last field is the container's pid)."""
    for row in running.container.top(ps_args="-o pid")["Processes"]:
        for line in Path(f"/proc/{row[0]}/status").read_text().splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                return int(row[0])
    raise AssertionError(f"no process {inner} in the container")


class CutThePathAfterInit(Fault):
    """Both ranks held at the start of `step` (init and prepare done: their gloo pairs are connected);
    then every packet into their network namespace is dropped, from the host, and both are released
    into the all-reduce. The counters of the DROP rule are read a few seconds later, while they wait."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, rank=1, phase="step", sig=None)
        self.held: dict[int, int] = {}  # rank -> its pid in the container
        self.netns: set[str] = set()
        self.counters = ""
        self.lock = threading.Lock()

    def _iptables(self, pid: int, *args: str) -> str:
        return subprocess.run(["nsenter", "-t", str(pid), "-n", "iptables", *args], capture_output=True, text=True,
                              check=True, timeout=30).stdout

    def _count(self, pid: int) -> None:
        try:
            self.counters = self._iptables(pid, "-L", "INPUT", "-v", "-x", "-n")
        except (subprocess.SubprocessError, OSError) as exc:  # the cell may be gone already
            self.counters = f"(not read: {exc})"

    def __call__(self, rank: int, event: dict) -> None:
        if event.get("event") != "phase_start" or event.get("phase") != "step":
            return
        with self.lock:
            self.held[rank] = event["pid"]
            if len(self.held) < 2 or self.fired:
                return
            self.fired = 1
            pids = {r: _host_pid(self.running, pid) for r, pid in self.held.items()}
            self.netns = {os.readlink(f"/proc/{pid}/ns/net") for pid in pids.values()}
            self._iptables(pids[0], "-A", "INPUT", "-j", "DROP")
            for pid_file in self.root.rglob("pid-rank0"):  # the attempt both ranks write into
                if pid_file.read_text().strip() == str(self.held[0]):
                    (pid_file.parent / "release").touch()
            threading.Timer(5.0, self._count, args=(pids[0],)).start()


def _known_issues(run: Path) -> str:
    """The run's report.md, written as `invoke matrix` writes it: its section of matching known issues."""
    results.write_text(run / "report.md", report.render(results.load_run(run)))
    return (run / "report.md").read_text().split("## Known issues that match", 1)[1].split("\n## ", 1)[0]


def _matches(record: CellRecord) -> dict[str, hints.Match]:
    return {m.hint.id: m for m in hints.match(record)}


@pytest.fixture(scope="module")
def tools() -> None:
    if os.geteuid() != 0:
        _unavailable("entering a container's network namespace (nsenter -n) needs root")
    for tool in ("nsenter", "iptables"):
        if shutil.which(tool) is None:
            _unavailable(f"no {tool} on this host (util-linux, iptables; scripts/setup.sh installs iptables)")


def test_a_rank_behind_gets_the_find_that_rank_advice(engine, cpu_image, tmp_path):
    stop_rank_1 = Fault(tmp_path / "behind", 1, "step", "STOP")  # it never reaches the all-reduce
    record, data = _run(engine, cpu_image, tmp_path, "behind", stop_rank_1)
    out = record.outcome
    assert out is not None and out.status == "hang" and out.phase == "step", out
    assert out.detail["ranks_behind"] == [1], out.detail
    assert "rank 1 silent" in out.reason and "stopped or frozen" in out.reason
    assert data["outcome"]["detail"]["ranks_behind"] == [1]  # as written on disk
    got = _matches(record)
    assert RANK_BEHIND in got and got[RANK_BEHIND].certain, got
    assert TRANSPORT not in got, got
    assert "Find the rank that is behind" in got[RANK_BEHIND].hint.fix
    # the forensics the advice points at: rank 0's threads, waiting in the all-reduce
    assert "did not answer" in record.last_raw.forensics.stacks["1"]
    assert "File" in record.last_raw.forensics.stacks["0"] or "Thread" in record.last_raw.forensics.stacks["0"]
    section = _known_issues(tmp_path / "behind")
    line = next(line for line in section.splitlines() if "A rank was behind" in line)
    assert line.startswith("- **A rank was behind") and "Find the rank that is behind" in line
    assert "transport hang" not in section and "invoke rescue" not in section
    # the bug report of this real hang (issue 24): the rank behind named, its stack first, the rerun line
    out = tmp_path / "bug.md"
    assert commands.bugreport(record.id or "", "behind", tmp_path, "nccl", out) == 0
    bug = out.read_text()
    stacks = bug.split("## Stacks", 1)[1].split("\n## ", 1)[0]
    assert "Ranks behind when the hang was declared: 1." in stacks
    assert stacks.index("rank 1:") < stacks.index("rank 0:"), stacks
    assert "A rank was behind" in bug and f"--only '{record.id}'" in bug


def test_every_rank_waiting_on_a_cut_path_gets_the_transport_advice(engine, cpu_image, tools, tmp_path):
    cut = CutThePathAfterInit(tmp_path / "cut")
    record, data = _run(engine, cpu_image, tmp_path, "cut", cut)
    assert cut.fired and len(cut.netns) == 1, cut.netns  # both ranks in the one namespace whose input was dropped
    dropped = [line.split() for line in cut.counters.splitlines() if " DROP " in f" {line} "]
    assert dropped and int(dropped[0][0]) > 0, cut.counters  # gloo's packets really hit the rule
    out = record.outcome
    assert out is not None and out.status == "hang" and out.phase == "step", out
    assert out.detail["ranks_behind"] == [], out.detail
    assert "all ranks waiting" in out.reason
    assert data["outcome"]["detail"]["ranks_behind"] == []
    # both ranks were alive inside the collective (released from the hold, in DDP's gradient all-reduce,
    # which runs in backward): their own threads answered SIGUSR1
    for rank in ("0", "1"):
        stack = record.last_raw.forensics.stacks[rank]
        assert " in backward" in stack and "wait_for_release" not in stack, stack
    got = _matches(record)
    assert TRANSPORT in got and got[TRANSPORT].certain, got
    assert RANK_BEHIND not in got, got
    advice = " ".join(m.hint.fix + " " + m.hint.explanation for m in got.values())
    assert "invoke rescue" in advice and "GLOO_SOCKET_IFNAME" in advice and "NCCL_P2P_DISABLE=1" in advice
    assert "raise the timeout" not in advice.lower()

    # the report of that run (as `invoke matrix` writes report.md) gives the same advice
    section = _known_issues(tmp_path / "cut")
    line = next(line for line in section.splitlines() if "transport hang" in line)
    assert line.startswith("- **Every rank waits inside the same collective") and "Possibly" not in line
    assert "invoke rescue" in line and "NCCL_SOCKET_IFNAME" in line
    assert "raise the timeout" not in section.lower() and "A rank was behind" not in section
