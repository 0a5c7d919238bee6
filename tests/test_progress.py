"""Plain (non-terminal) progress: one line per result; the steps in between only when verbose (-v)."""

from __future__ import annotations

import io

from rich.console import Console

from harness.progress import Progress


def _plain(verbose: bool, capsys) -> list[str]:
    out = io.StringIO()
    progress = Progress(Console(file=out, force_terminal=False, width=200), verbose=verbose)
    with progress.task("[1/1] building cpu-stack (log: builds/cpu-stack.log)"):
        progress.detail("Step 4/9 : RUN pip install ...")
    with progress.task("[1/2] cell-a (so far: none yet)", echo=False) as task:
        task.detail("rank 0 phase_start init")
        task.detail("rank 0 phase_end init")
    progress.say("[1/2] cell-a: PASS - ok (12s)")
    return out.getvalue().splitlines() + capsys.readouterr().err.splitlines()


def test_plain_output_is_one_line_per_result(capsys):
    assert _plain(False, capsys) == ["[1/1] building cpu-stack (log: builds/cpu-stack.log)", "[1/2] cell-a: PASS - ok (12s)"]


def test_verbose_plain_output_adds_each_step_and_phase(capsys):
    lines = _plain(True, capsys)
    assert "[1/2] cell-a (so far: none yet)" in lines
    assert "    rank 0 phase_start init" in lines and "    rank 0 phase_end init" in lines
    assert "    Step 4/9 : RUN pip install ..." in lines
