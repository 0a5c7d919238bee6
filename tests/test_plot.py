"""The bandwidth plot publish writes: one figure per run, one panel per stack with all its variants, a
shared y axis, host and run id in the title, measured points marked, the spread over trials shown."""

from __future__ import annotations

from harness import publish

from .bandwidth_records import CPU, GIB, H200, cell_record, row, run_data

MIB = 1 << 20


def _run():
    h200 = [cell_record(H200, v, [row(MIB, [t / 4 for t in trials]), row(GIB, trials)])
            for v, trials in (("default", [340.1, 340.5, 341.3]), ("p2p-nvl", [340.6, 341.4, 342.0]),
                              ("p2p-off", [27.1, 27.3, 27.4]))]
    torchrun = [cell_record(H200, "default", [row(MIB, busbw=80.0), row(GIB, busbw=339.0)], launcher="torchrun")]  # older
    cpu = [cell_record(CPU, v, [row(MIB, [0.3, 0.31, 0.33]), row(16 * MIB, [0.73, 0.8, 0.91])]) for v in ("default", "p2p-off")]
    hung = [cell_record(H200, "net-only", status="hang")]
    return run_data("2026-01-15-h200", h200 + torchrun + cpu + hung, host="h200-box")


def test_one_panel_per_stack_with_every_variant_on_a_shared_y_axis():
    fig = publish.figure(_run())
    axes = fig.axes
    assert len(axes) == 3  # H200 accelerate, H200 torchrun, CPU: the empty fourth slot of the grid is removed
    assert all(axes[0].get_shared_y_axes().joined(axes[0], ax) for ax in axes[1:])
    assert "h200-box" in fig._suptitle.get_text() and "2026-01-15-h200" in fig._suptitle.get_text()
    titles = [ax.get_title() for ax in axes]
    h200 = axes[next(i for i, t in enumerate(titles) if "accelerate" in t and "CUDA 13.0" in t)]
    labels = [line.get_label() for line in h200.get_lines() if not line.get_label().startswith("_")]
    assert labels == ["default", "p2p-nvl", "p2p-off"]  # the hung net-only has no points
    assert all(line.get_marker() == "o" for line in h200.get_lines() if not line.get_label().startswith("_"))
    assert h200.collections  # the min-max band (and error bars) of the trials
    cpu = axes[next(i for i, t in enumerate(titles) if "CUDA cpu" in t)]
    assert "gloo: NCCL variants have no effect" in cpu.get_title()


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "busbw.png"
    assert publish.plot(_run(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    assert not publish.plot(run_data("empty", [cell_record(H200, "default", status="hang")]), tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
