"""The launch of a cell: the process-group timeout handed to the workload always lies past every stall
threshold, so torch's watchdog can never turn a hang into a dead rank before the supervisor decides."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import launch, matrix, matrixfile


@pytest.mark.parametrize("overrides", [{}, {"prepare": 300}, {"init": 5, "prepare": 5, "step": 5}, {"bandwidth": 900}])
def test_process_group_timeout_outlasts_every_stall_threshold(overrides):
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    m = replace(m, timeouts=matrixfile.Timeouts(**{**m.timeouts.model_dump(), **overrides}))
    cell = m.runnable[0]
    argv = launch.launch(cell, m, ranks=2).argv
    pg_timeout = float(argv[argv.index("--init-timeout") + 1])
    thresholds = m.timeouts.model_dump(exclude={"cell"})
    assert pg_timeout >= max(thresholds.values()) + launch.PG_TIMEOUT_MARGIN_S


def test_default_thresholds_leave_the_watchdog_behind_the_prepare_threshold():
    # seen on 2x H200: the group timeout was timeouts.init (90 s) and fired before the 120 s prepare threshold
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    assert m.timeouts.init < m.timeouts.prepare < launch.process_group_timeout(m)


@pytest.mark.parametrize("launcher", ["accelerate", "torchrun"])
def test_the_control_runs_through_the_cells_own_launcher_env_and_ranks(launcher):
    """Issue 16: the NCCL-only control is started as the cell is (launcher, variant env, rank count, GPU
    device), with the control's entry where the workload's was and the matrix's bandwidth settings."""
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    cell = next(c for c in m.cells if c.launcher == launcher and c.variant.env_dict)
    cell_launch = launch.launch(cell, m, ranks=2, port=29611)
    control = launch.control_launch(cell, m, ranks=2, port=29611)
    script = cell_launch.argv.index(launch.CONTAINER_WORKLOAD)
    assert control.argv[:script] == cell_launch.argv[:script]
    assert control.argv[script] == launch.CONTAINER_CONTROL
    assert (control.env, control.ranks, control.device) == (cell_launch.env, cell_launch.ranks, "cuda")
    args = control.argv[script + 1:]
    for flag in ("--out", "--iters", "--warmup", "--trials", "--init-timeout"):
        assert args[args.index(flag) + 1] == cell_launch.argv[cell_launch.argv.index(flag) + 1], flag
    if m.bandwidth_sizes:
        assert args[args.index("--sizes") + 1] == ",".join(str(s) for s in m.bandwidth_sizes)
    assert "--expect-env" not in args and "--device" not in args  # the control's parser has neither
