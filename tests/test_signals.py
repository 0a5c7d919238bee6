"""The README's interruption contract holds for every command, not only `matrix`: Ctrl-C, SIGTERM and
SIGHUP end it with exit 130 and one line, never 143 without a word (issue 22) nor a traceback; a signal
the harness was started ignoring (nohup's SIGHUP) stays ignored.

Each command is signalled while it really waits: on a Docker engine that takes the connection and never
answers (a hung dockerd), which every command asks before its work (the sweep of what dead harnesses
left, or the engine itself), for up to 3 s."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli

from .conftest import REPO, foreground, interrupt_when


class HungEngine:
    """A Unix socket that accepts connections and never answers, as DOCKER_HOST."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "docker.sock"
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(self.path))
        self.server.listen(8)
        self.server.setblocking(False)
        self.taken: list[socket.socket] = []

    def asked(self) -> bool:
        """Whether a command has connected (and now waits for an answer that never comes)."""
        try:
            self.taken.append(self.server.accept()[0])
        except BlockingIOError:
            pass
        return bool(self.taken)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": f"unix://{self.path}", "PYTHONPATH": str(REPO)}

    def close(self) -> None:
        for conn in self.taken:
            conn.close()
        self.server.close()


@pytest.fixture
def hung(tmp_path):
    engine = HungEngine(tmp_path)
    yield engine
    engine.close()


def _commands(tmp: Path) -> dict[str, list[str]]:
    results = ["--results", str(tmp / "results")]
    return {
        "report": ["report", *results],
        "compare": ["compare", "a", "b", *results],
        "publish": ["publish", "--to", str(tmp / "docs"), *results],
        "list": ["list", "--matrix", "matrix-cpu.yaml"],
        "doctor": ["doctor"],
        "clean": ["clean"],
        "build": ["build", "--matrix", "matrix-cpu.yaml", *results],
        "base-image": ["base-image"],
        "matrix": ["matrix", "--matrix", "matrix-cpu.yaml", *results],
    }


@pytest.mark.parametrize("command, sig", [(c, signal.SIGTERM) for c in _commands(Path("."))]
                         + [("report", signal.SIGHUP), ("report", signal.SIGINT)], ids=lambda v: getattr(v, "name", v))
def test_a_signalled_command_exits_130_with_one_line(tmp_path, hung, command, sig):
    argv = [sys.executable, "-m", "harness", *_commands(tmp_path)[command]]
    code, output = interrupt_when(argv, hung.asked, settle=0.2, what=f"{command} never asked the engine", timeout=60,
                                  sig=sig, env=hung.env)
    assert code == 130, output[-2000:]
    said = "interrupted" if sig == signal.SIGINT else f"interrupted by {sig.name}"
    assert output.splitlines()[-1] == said and "Traceback" not in output, output[-2000:]


def test_a_hangup_the_harness_was_started_ignoring_stays_ignored(tmp_path, hung):
    """`nohup invoke report`: the hangup of its terminal does not end it; it waits out the engine and reports."""
    (tmp_path / "results" / "r1" / "cells").mkdir(parents=True)
    argv = foreground([sys.executable, "-m", "harness", "report", "--results", str(tmp_path / "results")],
                      ignored=("SIGHUP",))
    proc = subprocess.Popen(argv, cwd=REPO, env=hung.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not hung.asked():
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert out.startswith("# ") and "r1" in out and "interrupted" not in err


def test_a_signal_while_the_command_line_is_parsed_is_130_too(monkeypatch, capsys):
    """Before any task runs invoke itself answers an interrupt with exit 1 and no word; the signal is real,
    sent by this process to itself while the Program parses."""
    parse = cli.HarnessProgram.parse_core

    def signalled(self, argv):
        os.kill(os.getpid(), signal.SIGTERM)
        parse(self, argv)

    monkeypatch.setattr(cli.HarnessProgram, "parse_core", signalled)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["--list"]) == 130
    assert capsys.readouterr().err == "interrupted by SIGTERM\n"
    assert signal.getsignal(signal.SIGTERM) is before  # restored after the command
