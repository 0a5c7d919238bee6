"""The launch of a cell: the process-group timeout handed to the workload always lies past every stall
threshold, so torch's watchdog can never turn a hang into a dead rank before the supervisor decides."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import launch, matrix


@pytest.mark.parametrize("overrides", [{}, {"prepare": 300}, {"init": 5, "prepare": 5, "step": 5}, {"bandwidth": 900}])
def test_process_group_timeout_outlasts_every_stall_threshold(overrides):
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    m = replace(m, timeouts=matrix.Timeouts(**{**m.timeouts.model_dump(), **overrides}))
    cell = m.runnable[0]
    argv = launch.launch(cell, m, ranks=2).argv
    pg_timeout = float(argv[argv.index("--init-timeout") + 1])
    thresholds = m.timeouts.model_dump(exclude={"cell"})
    assert pg_timeout >= max(thresholds.values()) + launch.PG_TIMEOUT_MARGIN_S


def test_default_thresholds_leave_the_watchdog_behind_the_prepare_threshold():
    # seen on 2x H200: the group timeout was timeouts.init (90 s) and fired before the 120 s prepare threshold
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    assert m.timeouts.init < m.timeouts.prepare < launch.process_group_timeout(m)
