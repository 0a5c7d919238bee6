"""A launcher that fails before any rank starts is a launcher failure, with its own hint (issue 23 item
3), seen for real: the cell's rendezvous port is really taken (a socket of this test listens on it)
when the launcher starts. torchrun's TCPStore cannot listen: `fail`, class `launcher`, phase `startup`,
and the certain rendezvous-port hint. Accelerate 1.15 checks the port itself before it starts the
ranks and, on one node, takes another one (its UserWarning): the cell passes, and the record keeps
what Accelerate said."""

from __future__ import annotations

import json
import socket

import pytest

from harness import hints, matrix, runner
from harness.engines import host
from harness.engines.host import HostEngine
from harness.record import CellRecord

from .test_matrix_run import _fast


@pytest.fixture
def port_in_use(monkeypatch):
    """The port the host engine gives the next cell's launcher, with this test already listening on it."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    monkeypatch.setattr(host, "_free_port", lambda: held.getsockname()[1])
    yield held.getsockname()[1]
    held.close()


def _run(tmp_path, launcher: str) -> tuple[CellRecord, dict]:
    pytest.importorskip("torch")
    m = _fast(matrix.load(matrix.DEFAULT_CPU_MATRIX))
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.launcher == launcher)
    result = runner.run_cell(HostEngine(), cell, m, runner.RunOptions(launcher, tmp_path, (), 2))
    return result, json.loads((tmp_path / launcher / "cells" / cell.id / "record.json").read_text())


def test_torchrun_on_a_port_in_use_is_a_launcher_failure_with_the_port_hint(tmp_path, port_in_use):
    result, record = _run(tmp_path, "torchrun")
    assert (result.outcome.status, result.outcome.error_class, result.outcome.phase) == ("fail", "launcher", "startup")
    assert "0 of 2 ranks started" in result.outcome.reason and "address already in use" in result.outcome.reason
    found = {m.hint.id: m.certain for m in hints.match(record)}
    assert found == {"rendezvous-port-in-use": True}


def test_accelerate_takes_another_port_itself_and_says_so(tmp_path, port_in_use):
    result, record = _run(tmp_path, "accelerate")
    assert result.outcome.status == "pass"
    assert f"Port `{port_in_use}` is already in use" in record["attempts"][-1]["raw"]["launcher_tail"]
