"""Numbers you can compare (issue 12): `compare` counts a busbw change only beyond both the threshold
and the noise the two runs measured, and the report recommends a variant over `default` only when it
wins beyond noise by more than report.MIN_GAIN. Pure: hand-built records through the real record types."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import commands, compare, report, results
from harness.cellfields import CellFields
from harness.compare import GLOO_MIN_CHANGE
from harness.matrix import Cell, Stack

from .bandwidth_records import CPU, CPU_OLD_ACC, GIB, H200, VARIANTS, cell_record, row, run_data, save_run

MIB = 1 << 20
DEFAULT_TRIALS = [340.1, 340.5, 340.9, 341.3, 340.6]  # 2x H200, NVLink: busbw at 1 GiB, five trials
DEFAULT = "cu13.0-torch2.11.0-acc1.15.0+default"


def h200_run(name: str, default: list[float] | None = None, p2p_off: list[float] | None = None, old: bool = False):
    """Two H200 cells: default (P2P over NVLink) and p2p-off (SHM), rows at 1 MiB and 1 GiB."""
    def rows(trials: list[float]) -> list[dict]:
        if old:  # an older record: medians only
            return [row(MIB, busbw=trials[0] / 4), row(GIB, busbw=sorted(trials)[len(trials) // 2])]
        return [row(MIB, [t / 4 for t in trials]), row(GIB, trials)]

    return [cell_record(H200, "default", rows(default or DEFAULT_TRIALS)),
            cell_record(H200, "p2p-off", rows(p2p_off or [27.1, 27.3, 27.4, 27.2, 27.3]))]


# ---------------------------------------------------------------- compare
def test_two_runs_of_the_same_images_compare_equal_and_exit_0(tmp_path, capsys):
    save_run(tmp_path, "A", h200_run("A"))
    save_run(tmp_path, "B", h200_run("B", default=[339.8, 340.4, 341.1, 341.0, 340.2], p2p_off=[27.0, 27.4, 27.3, 27.1, 27.2]))
    assert commands.compare("A", "B", tmp_path) == 0
    out = capsys.readouterr().out
    assert "Nothing regressed." in out and "2 cell(s) unchanged." in out and "Regressions" not in out


def test_a_halving_is_a_regression_naming_the_cell_the_size_and_both_ranges(tmp_path, capsys):
    save_run(tmp_path, "A", h200_run("A"))
    save_run(tmp_path, "B", h200_run("B", default=[170.2, 172.0, 173.1, 174.4, 176.0]))
    assert commands.compare("A", "B", tmp_path) == 1
    out = capsys.readouterr().out
    assert "**Regressed.**" in out
    d = compare.diff(*(results.load_run(tmp_path / r) for r in "AB"))
    assert d.regressions == [f"`{DEFAULT}`: busbw -49% at 1 GiB, 340.6 → 173.1 GB/s "
                             "(before 340.1-341.3, after 170.2-176.0 GB/s: ranges apart)"]
    assert d.changes[0].verdict == "regression" and d.changes[0].size == GIB and d.unchanged == 1


def test_a_slowdown_of_one_other_collective_alone_is_a_regression_naming_that_collective():
    def run(gather: list[float]) -> results.RunData:
        rows = [row(MIB, [t / 4 for t in DEFAULT_TRIALS]), row(GIB, DEFAULT_TRIALS)]
        return run_data("X", [cell_record(H200, "default", rows, others={"all_gather": [row(GIB, gather)],
                                                                          "broadcast": [row(GIB, DEFAULT_TRIALS)]})])

    same = [170.0, 170.4, 170.8, 171.2, 170.6]
    d = compare.diff(run(same), run([t / 2 for t in same]))
    assert d.regressions == [f"`{DEFAULT}`: busbw of all_gather -50% at 1 GiB, 170.6 → 85.3 GB/s "
                             "(before 170.0-171.2, after 85.0-85.6 GB/s: ranges apart)"]
    assert [c.collective for c in d.changes] == ["all_gather"]
    assert compare.diff(run(same), run(same)).regressions == []


@pytest.mark.parametrize("factor", [0.7, 1.3])
def test_a_30_percent_shift_with_overlapping_ranges_is_within_noise(factor):
    noisy = [250.0, 300.0, 340.0, 400.0, 470.0]  # a cell whose own trials spread widely
    a = run_data("A", h200_run("A", default=noisy))
    b = run_data("B", h200_run("B", default=[t * factor for t in noisy]))
    d = compare.diff(a, b)
    assert not d.regressed and d.regressions == [] and d.improvements == []
    assert len(d.within_noise) == 1 and DEFAULT in d.within_noise[0]
    assert f"{factor - 1:+.0%} at 1 GiB" in d.within_noise[0] and "ranges overlap" in d.within_noise[0]
    text = compare.render(a, b, d, 0.1)
    assert "## Within noise (not counted)" in text and "Nothing regressed." in text
    assert "2 cell(s) unchanged (1 within noise)." in text


def test_old_records_without_trials_fall_back_to_the_threshold_and_say_so():
    a = run_data("A", h200_run("A", old=True))
    worse = run_data("B", h200_run("B", default=[t * 0.85 for t in DEFAULT_TRIALS], old=True))
    d = compare.diff(a, worse)
    assert d.regressed and len(d.regressions) == 1
    assert "-15% at 1 GiB" in d.regressions[0]
    assert "spread unknown before and after: an older record or one trial; the threshold alone decides" in d.regressions[0]
    assert "Where a spread is unknown (an older record, one trial), the threshold alone decides." in compare.render(a, worse, d, 0.1)
    slightly = run_data("C", h200_run("C", default=[t * 0.95 for t in DEFAULT_TRIALS], old=True))
    assert not compare.diff(a, slightly).regressed and compare.diff(a, slightly).unchanged == 2
    # one side old, the other with trials: still unknown, still the threshold alone
    d = compare.diff(a, run_data("D", h200_run("D", default=[t * 0.85 for t in DEFAULT_TRIALS])))
    assert d.regressed and "spread unknown before:" in d.regressions[0]


def test_one_trial_is_an_unknown_spread():
    one = run_data("A", [cell_record(H200, "default", [row(GIB, [340.5])])])
    d = compare.diff(one, run_data("B", [cell_record(H200, "default", [row(GIB, [300.0])])]))
    assert d.regressed and "spread unknown before and after" in d.regressions[0]


def test_outcome_changes_always_count():
    a = run_data("A", h200_run("A"))
    hung = h200_run("B")
    hung[0] = cell_record(H200, "default", status="hang")
    d = compare.diff(a, run_data("B", hung))
    assert d.regressions == [f"`{DEFAULT}`: pass → hang (hang in prepare)"] and d.regressed
    assert compare.diff(run_data("B", hung), a).improvements == [f"`{DEFAULT}`: hang → pass"]


def test_the_threshold_still_applies_beyond_noise():
    a = run_data("A", h200_run("A"))
    b = run_data("B", h200_run("B", default=[t * 0.93 for t in DEFAULT_TRIALS]))  # -7%, ranges apart
    assert compare.diff(a, b).unchanged == 2 and not compare.diff(a, b).regressed
    assert compare.diff(a, b, threshold=0.05).regressed


def _cpu_run(name: str, busbw: list[float], spread: float = 0.04):
    """The CPU matrix (two Accelerate releases x two launchers x default/p2p-off = 8 gloo cells), busbw
    at 16 MiB per cell with five trials of +/- `spread`."""
    cells = [(s, v, launcher) for s in (CPU, CPU_OLD_ACC) for launcher in ("accelerate", "torchrun")
             for v in ("default", "p2p-off")]
    return run_data(name, [cell_record(s, v, [row(MIB, [x * bw / 4 for x in (1, 1, 1, 1, 1)]),
                                               row(16 * MIB, [bw * (1 + spread * k) for k in (-1, -0.5, 0, 0.5, 1)])],
                                       launcher=launcher)
                           for (s, v, launcher), bw in zip(cells, busbw)], host="ci-2-core")


# within one run the identical gloo cells ranged 0.73-0.91 GB/s (issue 12)
CPU_A = [0.73, 0.80, 0.85, 0.91, 0.78, 0.82, 0.88, 0.75]


def test_cpu_drift_between_two_plain_runs_is_not_a_regression():
    """Two plain runs of the same images on a shared 2-core machine. With one measurement per size the
    cells moved from -63% to +48% (issue 12); measured in five trials, two runs of the CPU matrix in
    containers moved each cell by a few percent (tests/test_matrix_run.py measures it for real). A cell
    that moves by less than the gloo floor, or whose trials overlap the base run's pooled range, is noise."""
    drift = [0.8, 1.2, 1.0, 0.9, 1.12, 0.75, 0.95, 1.15]
    a, b = _cpu_run("A", CPU_A), _cpu_run("B", [x * f for x, f in zip(CPU_A, drift)])
    d = compare.diff(a, b)
    assert not d.regressed and d.regressions == [] and d.improvements == []
    assert any("-25% at 16 MiB" in line and f"under the {GLOO_MIN_CHANGE:.0%} floor for gloo cells" in line
               for line in d.within_noise)
    assert any("+20% at 16 MiB" in line for line in d.within_noise)
    assert d.unchanged == 8


def test_one_slowed_gloo_cell_is_a_regression_its_twins_are_not():
    """One cell's container held to half a CPU (seen: -71%, 0.24-0.32 against 0.86-1.05 GB/s): its trials
    lie outside the base run's pooled range; the unaffected cells of the same run do not mask it."""
    slowed = [x * (0.3 if i == 0 else 1.0) for i, x in enumerate(CPU_A)]
    d = compare.diff(_cpu_run("A", CPU_A), _cpu_run("B", slowed))
    assert d.regressed and len(d.regressions) == 1
    assert "cpu-torch2.13.0-acc1.15.0+default`" in d.regressions[0] and "-70% at 16 MiB" in d.regressions[0]
    assert "pooled over its 8 gloo cells" in d.regressions[0] and "ranges apart" in d.regressions[0]


def test_a_cpu_halving_is_a_regression():
    a, b = _cpu_run("A", CPU_A), _cpu_run("B", [x * 0.5 for x in CPU_A])
    d = compare.diff(a, b)
    assert d.regressed and len(d.regressions) == 8
    assert all("-50% at 16 MiB" in r and "ranges apart" in r for r in d.regressions)


def test_old_cpu_records_use_the_gloo_floor():
    old = lambda name, bw: run_data(name, [cell_record(CPU, "default", [row(16 * MIB, busbw=bw)])], host="ci")  # noqa: E731
    assert not compare.diff(old("A", 0.82), old("B", 0.62)).regressed  # -24%: what two identical cells of one run differ by
    d = compare.diff(old("A", 0.82), old("B", 0.41))
    assert d.regressed and "-50% at 16 MiB" in d.regressions[0] and "the threshold alone decides" in d.regressions[0]


# ---------------------------------------------------------------- the recommendation
def _row_cells(default: list[float] | str, **others: list[float] | str) -> dict:
    """One report row: variant -> record; a list is the busbw trials at 1 GiB, a string the status."""
    def one(variant: str, spec: list[float] | str):
        if isinstance(spec, str):
            return cell_record(H200, variant, status=spec)
        return cell_record(H200, variant, [row(MIB, [t / 4 for t in spec]), row(GIB, spec)])

    return {v: one(v, spec) for v, spec in {"default": default, **others}.items()}


def test_the_h200_case_recommends_default_with_p2p_nvl_within_noise():
    """2x H200: p2p-nvl 341.4 GB/s over default 340.5 is +0.3%, inside the trials of both."""
    cells = _row_cells([340.0, 340.3, 340.5, 340.8, 341.2], **{"p2p-nvl": [340.6, 341.0, 341.4, 341.7, 342.0]},
                       **{"p2p-off": [27.1, 27.3, 27.4, 27.2, 27.3]})
    assert report.recommend(cells, GIB) == "default; p2p-nvl within noise (+0.3%)"


def test_a_win_beyond_noise_names_the_variant_and_its_variable():
    cells = _row_cells(DEFAULT_TRIALS, **{"p2p-nvl": [406.0, 407.5, 408.6, 409.0, 410.0]})
    assert report.recommend(cells, GIB) == "p2p-nvl: set NCCL_P2P_LEVEL=NVL (+20% over default, ranges apart)"


def test_a_gain_under_the_minimum_or_inside_the_noise_keeps_default():
    assert report.MIN_GAIN == 0.05
    small = _row_cells(DEFAULT_TRIALS, **{"p2p-nvl": [350.0, 350.5, 351.0, 351.5, 352.0]})  # +3%, ranges apart
    assert report.recommend(small, GIB) == "default; p2p-nvl +3.1%, under the 5% minimum gain"
    noisy = _row_cells([300.0, 330.0, 340.5, 350.0, 380.0], **{"p2p-nvl": [310.0, 350.0, 370.0, 390.0, 400.0]})
    assert report.recommend(noisy, GIB) == "default; p2p-nvl within noise (+8.7%)"


def test_a_failing_default_recommends_the_best_passing_variant_with_its_variables():
    cells = _row_cells("hang", **{"p2p-off": [27.1, 27.3, 27.4, 27.2, 27.3], "net-only": [2.7, 2.8, 2.8, 2.9, 2.8]})
    assert report.recommend(cells, GIB) == "p2p-off: set NCCL_P2P_DISABLE=1 (default: hang)"
    cells = _row_cells("fail", **{"net-only": [2.7, 2.8, 2.8, 2.9, 2.8]})
    assert report.recommend(cells, GIB) == "net-only: set NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (default: fail)"
    assert report.recommend(_row_cells("hang", **{"p2p-off": "fail"}), GIB) == "no variant passes"


def test_old_records_recommend_on_the_minimum_gain_alone_and_say_so():
    old = lambda v, bw: cell_record(H200, v, [row(GIB, busbw=bw)])  # noqa: E731
    assert report.recommend({"default": old("default", 340.5), "p2p-nvl": old("p2p-nvl", 341.4)}, GIB) == (
        "default; p2p-nvl +0.3%, under the 5% minimum gain (spread unknown)")
    assert report.recommend({"default": old("default", 340.5), "p2p-nvl": old("p2p-nvl", 410.0)}, GIB) == (
        "p2p-nvl: set NCCL_P2P_LEVEL=NVL (+20% over default, spread unknown)")


def test_gloo_rows_get_no_recommendation_from_nccl_variants():
    fast = [1.1, 1.15, 1.2, 1.22, 1.25]  # +40% beyond noise: on gloo still not advice
    cells = {"default": cell_record(CPU, "default", [row(16 * MIB, [0.8, 0.82, 0.85, 0.86, 0.9])]),
             "p2p-off": cell_record(CPU, "p2p-off", [row(16 * MIB, fast)])}
    assert report.recommend(cells, 16 * MIB) == "gloo: NCCL variants have no effect"
    cells["default"] = cell_record(CPU, "default", status="hang")
    assert report.recommend(cells, 16 * MIB) == "gloo: NCCL variants have no effect (default: hang)"


def test_the_report_shows_the_spread_and_the_recommendation():
    text = report.render(run_data("A", list(_row_cells([340.0, 340.3, 340.5, 340.8, 341.2],
                                                       **{"p2p-nvl": [340.6, 341.0, 341.4, 341.7, 342.0]}).values())))
    line = next(l for l in text.splitlines() if l.startswith("| 13.0 |"))
    assert "✅ pass 340.5 [340.0-341.2] GB/s" in line and "✅ pass 341.4 [340.6-342.0] GB/s" in line
    assert line.endswith("| default; p2p-nvl within noise (+0.3%) |")
    assert "| 1 GiB | 3153.4 | 340.50 | 340.50 [340.00-341.20] | 0 | 3168.4 | 350.00 |" in text
    assert "Bandwidth: median of 5 trials of 20 all-reduces, [min-max] over the trials" in text


# ---------------------------------------------------------------- the bisect line beside a regression
def _stack_run(name: str, stacks: dict, status: str = "pass", trials: list[float] | None = None,
               matrix: str | None = "matrix-cpu.yaml") -> results.RunData:
    records = [cell_record(stack, "default", [row(16 * MIB, trials or [0.80, 0.82, 0.84])],
                           status=status if stack is stacks["new"] else "pass")
               for stack in stacks.values()]
    run = {"run_id": name, "host": {"hostname": "ci", "driver": "580.159.04"}} | ({"matrix": {"path": matrix}} if matrix else {})
    return results.RunData(results.Path("/results") / name, run, {r.id: r for r in records}, {})


def test_a_regression_between_two_releases_of_one_axis_prints_the_bisect_that_finds_which_broke_it():
    old, new = CPU, CPU_OLD_ACC  # Accelerate 1.15.0 -> 0.34.2, nothing else moved
    run = _stack_run("R", {"old": old, "new": new}, status="fail")
    d = compare.diff(compare.of_stack(run, old.id), compare.of_stack(run, new.id))
    (line,) = d.regressions
    assert line.startswith("`default`: pass → fail")
    assert ("find the release that broke it: `invoke bisect 'cpu-torch2.13.0-acc1.15.0+default' --axis accelerate "
            "--good 1.15.0 --bad 0.34.2 --matrix matrix-cpu.yaml`") in line
    # a bandwidth regression asks for the same search judged by busbw
    slow = _stack_run("S", {"old": old, "new": new})
    slow.records[f"{new.id}+default"] = cell_record(new, "default", [row(16 * MIB, [0.30, 0.31, 0.32])])
    d = compare.diff(compare.of_stack(slow, old.id), compare.of_stack(slow, new.id))
    assert len(d.regressions) == 1 and "-62% at 16 MiB" in d.regressions[0]
    assert "--good 1.15.0 --bad 0.34.2 --matrix matrix-cpu.yaml --metric busbw`" in d.regressions[0]
    assert "bisect" in compare.render(slow, slow, d, 0.10)


def _fields(stack: Stack, **kw) -> CellFields:
    return CellFields.read(Cell(replace(stack, **kw), VARIANTS["default"], "accelerate").fields())


@pytest.mark.parametrize("old, new, command", [
    (_fields(CPU), _fields(CPU, torch="2.14.0"), "--axis torch --good 2.13.0 --bad 2.14.0"),
    (_fields(H200, nccl="2.27.7", nccl_via="pip"), _fields(H200, nccl="2.28.3", nccl_via="pip"),
     "--axis nccl --good 2.27.7 --bad 2.28.3"),
    (_fields(H200), _fields(H200, cuda="13.1"), "--axis cuda --good 13.0 --bad 13.1 --versions 13.0,13.1"),
    (_fields(H200, image="site/train:2026-11", name="train"), _fields(H200, image="site/train:2026-12", name="train"),
     "--axis image --good site/train:2026-11 --bad site/train:2026-12 --versions site/train:2026-11,site/train:2026-12"),
    # nothing the search can walk: the same stack (a driver upgrade), two axes moved, an NCCL that was not pinned
    (_fields(CPU), _fields(CPU), None),
    (_fields(CPU), _fields(CPU, torch="2.14.0", accelerate="1.16.0"), None),
    (_fields(H200), _fields(H200, nccl="2.28.3", nccl_via="pip"), None),
])
def test_the_bisect_command_is_given_only_where_one_axis_moved(old, new, command):
    got = compare.bisect_command(old, new, None)
    assert (got is None) if command is None else (got is not None and command in got and got.startswith(
        f"invoke bisect '{old.id}' "))
