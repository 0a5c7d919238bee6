"""Report, compare and publish on results of real CPU cells (host engine, gloo): the table checked
cell by cell through a markdown parser, a planted regression caught, bad input named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness import commands, compare, matrix, matrixfile, publish, record, report, results, runner
from harness.engines import host
from harness.engines.host import HostEngine
from harness.errors import HarnessError
from harness.record import CellRecord
from harness.runfacts import RunFacts

from .conftest import REPO, Fault

CELLS = ["cpu-torch2.13.0-acc1.15.0+default", "cpu-torch2.13.0-acc1.15.0+p2p-off"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Run A: two real cells that pass. Run B: the same cells, one hung for real by a stopped rank,
    the other with its bandwidth cut to a quarter (planted: a gloo cell must move beyond its run-to-run
    drift to count, see compare.GLOO_MIN_CHANGE; a halving overlapped a base run's trials on a loaded machine). Run C: a byte-for-byte copy of A."""
    root = tmp_path_factory.mktemp("results")
    code = commands.run_matrix(
        commands.Selection(matrix.DEFAULT_CPU_MATRIX, only=("launcher=accelerate",)),
        commands.MatrixOptions(engine="host", results=root, run_id="A"),
    )
    assert code == 0
    shutil.copytree(root / "A", root / "B")
    shutil.copytree(root / "A", root / "C")
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    m = matrix.Matrix(**{**m.__dict__, "timeouts": matrixfile.Timeouts(init=8, prepare=8, step=8, check=8, bandwidth=8)})  # 4 s: flaky on a loaded machine
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.id == CELLS[0])
    opts = runner.RunOptions("B", root, (), 2, extra_args=("--hold-at", "step"), extra_env=(("HARNESS_TEST_FAULTS", "1"),))

    stop_rank_1 = Fault(root / "B", 1, "step", "STOP")
    assert runner.run_cell(HostEngine(), cell, m, opts, on_event=stop_rank_1, on_start=stop_rank_1.start).outcome.status == "hang"
    planted = root / "B" / "cells" / CELLS[1] / "record.json"
    record = json.loads(planted.read_text())
    for row in record["attempts"][-1]["raw"]["phases"]["bandwidth"]["rows"]:
        for key in ("busbw_gbs", "algbw_gbs", "busbw_min", "busbw_max"):
            if row.get(key) is not None:
                row[key] *= 0.25
        row["busbw_trials"] = [t * 0.25 for t in row.get("busbw_trials") or []]
    planted.write_text(json.dumps(record))
    return root


def _table(text: str) -> list[list[str]]:
    """The compatibility table as parsed by markdown-it (GFM tables): rows of cell texts."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    rows, row, in_table, tables = [], None, False, 0
    for tok in tokens:
        if tok.type == "table_open":
            tables += 1
            in_table = tables == 2  # the first table is the host header
        elif tok.type == "table_close":
            in_table = False
        elif in_table and tok.type == "tr_open":
            row = []
        elif in_table and tok.type == "tr_close":
            rows.append(row)
        elif in_table and tok.type == "inline":
            row.append(tok.content)
    return rows


def test_report_table_cell_by_cell(runs):
    text = report.render(results.load_run(runs / "A"))
    rows = _table(text)
    assert rows[0] == ["CUDA", "NCCL", "torch", "Accelerate", "launcher", "default", "p2p-off", "recommendation"]
    assert len(rows) == 2 and all(len(r) == len(rows[0]) for r in rows)
    cuda, nccl, torch, acc, launcher, default, p2p_off, recommendation = rows[1]
    assert (cuda, nccl, torch, acc, launcher) == ("cpu", "gloo (CPU)", "2.13.0", "1.15.0", "accelerate")
    for cell in (default, p2p_off):
        assert cell.startswith("✅ pass ") and cell.endswith(" GB/s")
    assert recommendation == "gloo: NCCL variants have no effect"  # issue 12: gloo ignores every NCCL variable
    assert "On gloo (CPU) rows the NCCL variants have no effect" in text
    assert "at 16 MiB" in text
    assert "Rerun: `invoke matrix --matrix" in text and "--only 'cpu-torch2.13.0-acc1.15.0+p2p-off'" in text
    assert "| 16 MiB |" in text  # per-cell bandwidth table


def test_report_shows_the_hang_with_its_phase_and_note(runs):
    text = report.render(results.load_run(runs / "B"))
    header, row = _table(text)
    default = row[header.index("default")]
    assert default == "⏳ hang in step (note 1)"
    assert "1. hang in step: no progress for" in text and "rank 1 silent" in text
    assert row[-1] == "gloo: NCCL variants have no effect (default: hang)"  # gloo: p2p-off is no remedy


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_missing_or_corrupt_record_is_named_and_the_rest_renders(runs, tmp_path, damage):
    broken = tmp_path / "broken"
    shutil.copytree(runs / "A", broken)
    if damage == "corrupt":
        (broken / "cells" / CELLS[0] / "record.json").write_text("{not json")
    else:
        (broken / "cells" / CELLS[0] / "record.json").unlink()
    data = results.load_run(broken)
    assert list(data.problems) == [CELLS[0]]
    text = report.render(data)
    header, row = _table(text)
    assert row[header.index("default")] == "❓ missing (note 1)"
    assert row[header.index("p2p-off")].startswith("✅ pass ")
    assert (f"corrupt record cells/{CELLS[0]}/record.json: not JSON" if damage == "corrupt" else "no record.json") in text


def test_unknown_run_lists_the_runs(runs):
    with pytest.raises(HarnessError) as err:
        results.resolve_run(runs, "nope")
    assert "A, B, C" in str(err.value) and err.value.code == 2


def test_newer_schema_gets_a_clear_message(runs, tmp_path):
    future = tmp_path / "future"
    shutil.copytree(runs / "A", future)
    path = future / "cells" / CELLS[0] / "record.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema": 99}))
    assert "schema 99 is newer" in results.load_run(future).problems[CELLS[0]]


def _invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_compare_catches_the_planted_regressions_and_exits_1(runs):
    d = compare.diff(results.load_run(runs / "A"), results.load_run(runs / "B"))
    assert len(d.regressions) == 2
    assert any(CELLS[0] in r and "pass → hang" in r for r in d.regressions)
    assert any(CELLS[1] in r and "busbw -75% at 16 MiB" in r for r in d.regressions)
    proc = _invoke("compare", "A", "B", "--results", str(runs))
    assert proc.returncode == 1, proc.stderr
    assert "**Regressed.**" in proc.stdout


def test_compare_of_equal_runs_exits_0(runs):
    proc = _invoke("compare", "A", "C", "--results", str(runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Nothing regressed." in proc.stdout and "2 cell(s) unchanged" in proc.stdout


def test_compare_threshold_and_bad_input(runs):
    assert compare.diff(results.load_run(runs / "A"), results.load_run(runs / "B"), threshold=0.8).regressions == [
        r for r in compare.diff(results.load_run(runs / "A"), results.load_run(runs / "B")).regressions if "hang" in r]
    proc = _invoke("compare", "A", "nope", "--results", str(runs))
    assert proc.returncode == 2 and "run `nope` not found" in proc.stderr and "Traceback" not in proc.stderr


def test_publish_writes_report_plot_and_index(runs, tmp_path):
    docs = tmp_path / "docs" / "compat"
    for run in ("A", "B"):
        proc = _invoke("publish", "--run", run, "--to", str(docs), "--results", str(runs))
        assert proc.returncode == 0, proc.stderr
    host = next(p for p in docs.iterdir() if p.is_dir())
    page = (host / "A.md").read_text()
    assert "![busbw by message size](A-busbw.png)" in page
    png = (host / "A-busbw.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    index = (docs / "index.md").read_text()
    assert f"## {host.name}" in index
    a_line = next(l for l in index.splitlines() if l.startswith(f"- [A]({host.name}/A.md)"))
    b_line = next(l for l in index.splitlines() if l.startswith(f"- [B]({host.name}/B.md)"))
    assert a_line.endswith(": 2 pass") and b_line.endswith(": 1 hang, 1 pass")
    assert index.index("- [B]") < index.index("- [A]")  # newest first


def test_matching_known_issue_is_explained_with_its_link(runs, tmp_path):
    from .test_hints import make_record

    hung = make_record(status="hang", phase="prepare", reason="no progress for 121s in prepare",
                       gpus=("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"), driver="535.104.05")
    hung["cell"] = {"cuda": "12.4.1", "torch": "2.5.1", "accelerate": "0.24.1", "variant": "default",
                    "launcher": "accelerate", "stack": "cu12.4.1-torch2.5.1-acc0.24.1", "id": "cu12.4.1-torch2.5.1-acc0.24.1+default"}
    data = results.RunData(tmp_path, {"host": {"hostname": "rtx-box"}}, {hung["cell"]["id"]: CellRecord.from_json(hung)}, {})
    text = report.render(data)
    assert "## Known issues that match" in text
    assert "RTX 40" in text and "https://github.com/huggingface/accelerate/pull/2558" in text
    assert "`cu12.4.1-torch2.5.1-acc0.24.1+default`" in text


# ---------------------------------------------------------------- the NCCL-only control per failing cell
def test_each_failing_cell_says_what_nccl_alone_did_and_so_where_the_fault_is():
    from .test_record import GIB_ROW, NO_SOCKET, _with_control
    hung = _with_control("hang", record.Outcome("pass", "busbw", 20.0), [GIB_ROW])
    busbw = f"{GIB_ROW['busbw_gbs']:.1f}"
    assert report.control_text(hung) == (f"pass ({busbw} GB/s at 1 GiB): the fault is above NCCL, in the "
                                         "torch/Accelerate path (prepare)")
    assert report.control_text(_with_control("fail", NO_SOCKET)) == (
        "fail (nccl, 'Bootstrap : no socket interface found'): the fault is in NCCL or its configuration")
    assert report.control_text(_with_control("hang", record.Outcome("hang", "stalled", 91.0, "nccl-init"))) == (
        "hang (in nccl-init): the fault is in NCCL or its configuration")
    assert report.control_text(_with_control("pass", None)) is None  # nothing to place
    assert report.control_text(_with_control("fail", None, cuda="cpu")) == "not applicable (gloo)"


def test_the_control_line_is_escaped_like_every_other_text():
    from .test_record import _with_control
    evil = record.Outcome("fail", "x", 1.0, "nccl-init", "nccl", {"key_line": "<img src=x onerror=alert(1)> | a"})
    rec = _with_control("fail", evil)
    lines = [l for l in report._detail("c", rec, RunFacts()) if l.startswith("- NCCL alone")]
    assert lines == ["- NCCL alone: fail (nccl, '&lt;img src=x onerror=alert(1)&gt; \\| a'): the fault is in NCCL or "
                     "its configuration"]


# ---------------------------------------------------------------- where the ranks ran (slurm placements)
def test_the_cell_detail_lists_the_nodes_and_nccls_transport_between_them():
    from .test_hints import make_record
    data = make_record(status="pass", phase=None, reason="busbw")
    raw = data["attempts"][-1]["raw"]
    raw["ranks"] = {str(r): {"phase": "teardown", "placement": {"node": node, "gpu": gpu, "job_id": "41", "step": "0"}}
                    for r, (node, gpu) in enumerate([("gpu-a", "0"), ("gpu-a", "1"), ("gpu-b", "0"), ("gpu-b", "1")])}
    raw["nccl"]["0"]["transports"] = {"P2P/CUMEM": 4, "NET/IB": 4}
    rec = CellRecord.from_json(data)
    lines = [l for l in report._detail("c", rec, RunFacts()) if l.startswith("- nodes")]
    assert lines == ["- nodes: gpu-a (ranks 0,1), gpu-b (ranks 2,3); between nodes: NET/IB"]
    del raw["ranks"]["2"]["placement"], raw["ranks"]["3"]["placement"]  # a record from before placements: no line
    for r in ("0", "1"):
        del raw["ranks"][r]["placement"]
    assert not [l for l in report._detail("c", CellRecord.from_json(data), RunFacts()) if l.startswith("- nodes")]


def test_the_cell_detail_lists_each_ranks_cpu_affinity_where_the_rank_said_it():
    from .test_hints import make_record
    data = make_record(status="pass", phase=None, reason="busbw")
    raw = data["attempts"][-1]["raw"]
    raw["ranks"] = {"0": {"phase": "teardown", "placement": {"node": "n", "cpus": "0-7"}},
                    "1": {"phase": "teardown", "placement": {"node": "n", "cpus": "8-15,24"}}}
    rec = CellRecord.from_json(data)
    assert [l for l in report._detail("c", rec, RunFacts()) if l.startswith("- CPU")] == [
        "- CPU affinity: rank 0: 0-7; rank 1: 8-15,24"]
    del raw["ranks"]["0"]["placement"]["cpus"], raw["ranks"]["1"]["placement"]  # records from before it: no line
    assert not [l for l in report._detail("c", CellRecord.from_json(data), RunFacts()) if l.startswith("- CPU")]


@pytest.mark.parametrize("engine, base, rerun", [
    ({"name": "slurm", "flags": ["--engine", "slurm", "--nodes=2", "--partition=gpu", "--slurm-arg=--exclusive"]},
     "host", "--engine slurm --nodes=2 --partition=gpu --slurm-arg=--exclusive --only"),
    ({"name": "host", "flags": ["--engine", "host"]}, "host", "--engine host --only"),
    ({"name": "host"}, "host", "--engine host --only"),  # a run from before engine flags were kept
    ({"name": "docker"}, "harness-base:bookworm", "--matrix matrix.yaml --only"),  # the default engine
])
def test_the_rerun_line_repeats_the_engine_and_its_flags(engine, base, rerun):
    """A cell that ran as a Slurm job is rerun as one, with the allocation it had (it used to say
    `--engine host` for every cell on the nodes' own stack)."""
    run = RunFacts.from_json({"host": {"engine": engine}, "matrix": {"path": "matrix.yaml"}})
    cell = CellRecord.from_json({"id": "s+default", "cell": {"cuda": "cpu", "torch": "2.13.0", "accelerate": "1.15.0",
                                                             "variant": "default", "base": base},
                                 "outcome": {"status": "pass"}})
    assert rerun in report.rerun_command(cell, run)


def test_the_index_lists_the_run_that_started_last_first_not_the_last_name(tmp_path):
    """The README's own before/after run ids: by name, `before-driver-upgrade` was listed as the newest."""
    host = tmp_path / "h200-box"
    host.mkdir()
    for run, started in (("before-driver-upgrade", "2026-12-01T10:00:00+0000"),
                         ("after-driver-upgrade", "2026-12-01T12:00:00+0100")):  # 11:00 UTC: the later
        (host / f"{run}.md").write_text("# report\n")
        (host / f"{run}.json").write_text(json.dumps({"run": run, "started": started, "counts": {"pass": 1}}))
    (host / "no-sidecar.md").write_text("# report\n")
    publish.write_index(tmp_path)
    listed = [line.split("]")[0][3:] for line in (tmp_path / "index.md").read_text().splitlines() if line.startswith("- [")]
    assert listed == ["after-driver-upgrade", "before-driver-upgrade", "no-sidecar"]


def test_the_other_collectives_sweeps_are_in_the_cells_detail_and_all_reduce_stays_the_column():
    from .bandwidth_records import GIB, H200, cell_record, row, run_data

    trials = [340.1, 340.5, 340.9, 341.3, 340.6]
    rec = cell_record(H200, "default", [row(GIB, trials)],
                      others={"all_gather": [row(GIB, [t / 2 for t in trials])], "broadcast": [row(GIB, trials)]})
    text = report.render(run_data("R", [rec]))
    table = text[:text.index("### ")]
    assert "340.6" in table and "170.3" not in table  # the column is all-reduce's
    detail = text[text.index("### "):]
    gather = detail.index("all_gather (nccl-tests' size and bus factor):")
    assert detail.index("broadcast (nccl-tests' size and bus factor):") > gather
    assert "| 1 GiB |" in detail[gather:] and "170.30" in detail[gather:] and "all_gather calls" in detail[gather:]
