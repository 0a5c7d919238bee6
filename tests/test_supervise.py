"""Cells under supervision with real faults, on the host engine and in real containers: a stopped rank
is a hang in the right phase with the rank named, a killed rank is a fail, a rank that never joins is
a hang in init, an exception is a fail with its line, and nothing is ever left behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness import matrix, matrixfile, outcome, runner, supervise
from harness.engines import host
from harness.engines.base import CellSpec
from harness.engines.docker import LABEL_RUN
from harness.engines.host import HostEngine

from .conftest import Fault

TIMEOUTS = matrixfile.Timeouts(fingerprint=60, init=4, prepare=4, step=4, check=4, bandwidth=4, teardown=10, cell=180)


def _spec(engine, out: Path, extra: tuple[str, ...] = (), launcher: str = "accelerate", image: str = "",
          env: tuple[tuple[str, str], ...] = (), timeouts: matrixfile.Timeouts | None = None) -> CellSpec:
    """The CPU matrix's Accelerate 1.15.0 default cell, launched as the runner launches it, with the
    test-only switches allowed; a run id of its own, so its containers are told apart."""
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    m = matrix.Matrix(**{**m.__dict__, "timeouts": timeouts or TIMEOUTS})
    cell = next(c for c in m.cells if c.launcher == launcher and c.stack.accelerate == "1.15.0"
                and c.variant.name == "default")
    if not engine.builds_images:  # the host engine, slurm's host runtime: the stack installed here
        cell = next(c for c in host.host_cells(m, host.host_stack()) if c.launcher == launcher)
    opts = runner.RunOptions(f"test-{out.name}", out.parent, (), 2, extra_args=extra,
                             extra_env=(("HARNESS_TEST_FAULTS", "1"), *env))
    return runner.spec_for(cell, m, engine, opts, image, 1, out)


@pytest.fixture(params=["host", pytest.param("docker", marks=[pytest.mark.engine, pytest.mark.slow])])
def setup(request, tmp_path):
    """(engine, image) for each engine; the docker one builds the real CPU image."""
    if request.param == "host":
        pytest.importorskip("torch")
        return HostEngine(), ""
    engine = request.getfixturevalue("engine")
    return engine, request.getfixturevalue("cpu_image")


def _run(setup, tmp_path, name, extra=(), fault=None, launcher="accelerate", env=(), timeouts=TIMEOUTS):
    engine, image = setup
    spec = _spec(engine, tmp_path / name, extra, launcher, image, env, timeouts)
    callback = Fault(spec.out_dir, *fault) if fault else None
    record = supervise.supervise(engine, spec, timeouts, on_event=callback or (lambda r, e: None),
                                 on_start=callback.start if callback else (lambda running: None))
    assert record.leftovers == [], f"left behind: {record.leftovers}"
    if engine.client is not None:  # an engine of containers: none of this cell's is left
        assert engine.client.leftovers(f"{LABEL_RUN}={spec.run_id}") == []
    return record, outcome.classify(record.to_json())


def test_healthy_cell_passes(setup, tmp_path):
    record, result = _run(setup, tmp_path, "ok")
    assert result.status == "pass", result
    assert record.exit_code == 0
    assert set(record.ranks) == {"0", "1"}
    assert record.phases["bandwidth"].rows


@pytest.mark.parametrize("phase", ["prepare", "bandwidth"])
def test_stopped_rank_is_a_hang_in_its_phase_naming_the_rank(setup, tmp_path, phase):
    record, result = _run(setup, tmp_path, f"stop-{phase}", ("--hold-at", phase), (1, phase, "STOP"))
    assert result.status == "hang", result
    assert result.phase == phase
    assert result.detail["ranks_behind"] == [1]
    assert "rank 1" in result.reason and "stopped" in result.reason
    assert record.ended_by == "stall"
    # forensics: rank 0 answered SIGUSR1 with its threads; the stopped rank could not
    stacks = record.forensics.stacks
    assert "Thread" in stacks["0"] or "File" in stacks["0"]
    assert "did not answer" in stacks["1"]
    assert record.forensics.processes
    if isinstance(setup[0], HostEngine):
        # py-spy (installed with the test extras) reads even the stopped rank
        assert "Thread" in record.forensics.py_spy["1"], record.forensics.py_spy


def test_killed_rank_is_a_fail_not_a_hang(setup, tmp_path):
    record, result = _run(setup, tmp_path, "kill", ("--hold-at", "bandwidth"), (1, "bandwidth", "KILL"))
    assert result.status == "fail", result
    assert result.error_class == "killed"
    assert result.phase == "bandwidth"
    assert "rank 1 died" in result.reason
    # the event files show exactly how far each rank got
    assert {r: s.phase for r, s in record.ranks.items()} == {"0": "bandwidth", "1": "bandwidth"}
    assert list(record.ranks["1"].phases_done) == ["fingerprint", "init", "prepare", "step", "check"]


def parent_of(running, pid: int) -> int:
    """The parent of a rank (its launcher), as the rank's own pid namespace sees it."""
    if hasattr(running, "container"):  # docker: the ranks' pids are the container's
        _, output = running.container.exec_run(["sh", "-c", f"read a b c d rest < /proc/{int(pid)}/stat; echo $d"])
        return int(output)
    return int(Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()[1])


class KilledBehindAStoppedLauncher(Fault):
    """Rank 1's launcher is stopped (SIGSTOP), then rank 1 is SIGKILLed as it starts `phase`: the
    launcher cannot notice (nor reap it: a zombie), so the cell stops progressing with a dead rank, as
    when a launcher's monitor or Slurm's job end is slow to see a death."""

    def __call__(self, rank: int, event: dict) -> None:
        if rank == self.rank and event.get("event") == "phase_start" and event.get("phase") == self.phase \
                and not self.fired:
            launcher = parent_of(self.running, event["pid"])
            if hasattr(self.running, "container"):
                # the launcher is the container's pid 1, which ignores signals sent from inside: stop it
                # from the host, by its host pid
                os.kill(host_pid(self.running, launcher), signal.SIGSTOP)
            else:
                self.running.signal(launcher, "STOP")
        super().__call__(rank, event)


def host_pid(running, inner: int) -> int:
    """The host's pid of a container's process `inner` (NSpid's last field is the container's pid)."""
    for row in running.container.top(ps_args="-o pid")["Processes"]:
        for line in Path(f"/proc/{row[0]}/status").read_text().splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                return int(row[0])
    raise AssertionError(f"no process {inner} in the container")


def run_killed_behind_a_stopped_launcher(setup, tmp_path, name: str):
    engine, image = setup
    spec = _spec(engine, tmp_path / name, ("--hold-at", "bandwidth"), "accelerate", image, (), TIMEOUTS)
    fault = KilledBehindAStoppedLauncher(spec.out_dir, 1, "bandwidth", "KILL")
    record = supervise.supervise(engine, spec, TIMEOUTS, on_event=fault, on_start=fault.start)
    assert record.leftovers == [], f"left behind: {record.leftovers}"
    return record, outcome.classify(record.to_json())


def test_a_killed_rank_the_launcher_has_not_noticed_is_a_fail_not_a_hang(setup, tmp_path):
    record, result = run_killed_behind_a_stopped_launcher(setup, tmp_path, "gone")
    assert record.ended_by == "stall"  # the launcher never exited: the supervisor stopped the cell
    assert record.stall.gone == (1,), record.stall
    assert result.status == "fail" and result.error_class == "killed", result
    assert result.phase == "bandwidth" and result.detail["rank"] == 1
    assert "rank 1 died in bandwidth" in result.reason
    assert "0" in result.detail["victims"], result.detail


def test_rank_that_never_joins_is_a_hang_in_init(setup, tmp_path):
    _record, result = _run(setup, tmp_path, "nojoin", ("--hold-at", "fingerprint"), (1, "fingerprint", "STOP"))
    assert result.status == "hang", result
    assert result.phase == "init"
    assert result.detail["ranks_behind"] == [1]
    assert "still in fingerprint" in result.reason


def test_exception_in_prepare_is_a_fail_with_its_line(setup, tmp_path):
    _record, result = _run(setup, tmp_path, "raise", ("--fail-in", "prepare"))
    assert result.status == "fail", result
    assert result.phase == "prepare"
    assert "injected test fault" in result.reason
    assert result.error_class == "other"


def test_torchrun_launcher_is_supervised_too(setup, tmp_path):
    _record, result = _run(setup, tmp_path, "torchrun-stop", ("--hold-at", "prepare"), (1, "prepare", "STOP"), launcher="torchrun")
    assert result.status == "hang" and result.phase == "prepare" and result.detail["ranks_behind"] == [1]


def test_a_rank_that_raises_while_its_peer_is_still_starting_is_the_cause(setup, tmp_path):
    """Rank 1 is stopped as it starts its fingerprint; rank 0 goes on and fails in init on a real
    misconfiguration (gloo told to use an interface that does not exist). Rank 0 is the cause, rank 1,
    stopped and then killed, only its victim (seen the other way round on 2x H200 before the fix)."""
    # init's threshold is longer here: rank 0 must reach its real failure first, and on a loaded machine
    # it once spent over 4 s in init before gloo refused the interface (read as a hang in init)
    record, result = _run(setup, tmp_path, "cause", ("--hold-at", "fingerprint"), (1, "fingerprint", "STOP"),
                          env=(("GLOO_SOCKET_IFNAME", "nosuchif0"),), timeouts=TIMEOUTS.model_copy(update={"init": 20}))
    assert result.status == "fail", result
    assert result.phase == "init" and result.detail["rank"] == 0, result
    assert "nosuchif0" in result.reason
    assert "rank 1 is a victim" in result.reason and set(result.detail["victims"]) == {"1"}, result
    assert record.ranks["1"].phase == "fingerprint"


def test_a_hang_stays_a_hang_where_the_group_timeout_used_to_fire_first(setup, tmp_path):
    """The process-group timeout used to be timeouts.init (at least 30 s): with a 45 s prepare threshold,
    a rank stopped in prepare made its peer's collective time out first and the cell read as a failure.
    The group timeout now lies past every threshold: the supervisor's hang comes first."""
    timeouts = matrixfile.Timeouts(fingerprint=60, init=5, prepare=45, step=5, check=5, bandwidth=5, teardown=10, cell=240)
    record, result = _run(setup, tmp_path, "late-hang", ("--hold-at", "prepare"), (1, "prepare", "STOP"),
                          timeouts=timeouts)
    assert result.status == "hang", result
    assert result.phase == "prepare" and result.detail["ranks_behind"] == [1], result
    assert record.ended_by == "stall"
