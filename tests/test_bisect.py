"""`invoke bisect` (issue 25): the releases between a good and a bad one, the verdict of each step, the
search that goes around skipped steps, and the driver that runs each step as an ordinary supervised run
(here on the fake engine's scripted ranks; tests marked `engine` run real images) and goes on where an
interrupted search stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from packaging.version import Version

from harness import bisection, bisectrun, images, pipeline, reaper, results, supervise
from harness.bisection import Step, answer, judge, next_version, plan
from harness.errors import HarnessError
from harness.pipeline import MatrixOptions
from harness.selection import Selection

from .conftest import REPO
from .fakeengine import FakeBuilder, FakeEngine, Rank, error, stall

RELEASED = ["1.0.0", "0.34.2", "0.34.0", "0.33.0", "0.30.1", "0.30.0", "0.29.0", "0.28.0", "0.27.2", "0.25.0",
            "0.30.0rc1", "0.24.0", "not-a-version"]


# ------------------------------------------------------------------- the plan
def test_the_releases_run_from_the_good_end_to_the_bad_end_in_either_direction():
    newer_good = plan("accelerate", "c", "0.34.2", "0.27.2", RELEASED)
    assert newer_good.versions == ("0.34.2", "0.34.0", "0.33.0", "0.30.1", "0.30.0", "0.29.0", "0.28.0", "0.27.2")
    older_good = plan("accelerate", "c", "0.27.2", "0.34.2", RELEASED)
    assert older_good.versions == tuple(reversed(newer_good.versions))
    assert "0.30.0rc1" not in older_good.versions  # pre-releases only where an end is one


def test_an_end_the_index_does_not_list_is_walked_all_the_same_and_n_a_ones_are_set_aside_with_why():
    p = plan("accelerate", "c", "0.34.1", "0.28.0", RELEASED, lambda v: "needs Python 3.12" if v == "0.30.0" else None)
    assert p.good == "0.34.1" and p.bad == "0.28.0"
    assert p.na == (("0.30.0", "needs Python 3.12"),)
    assert p.worst_case_steps == 2 + 3  # the ends, then 4 unknown ones (5 less the n/a): 5 answers, 3 halvings


def test_the_image_axis_walks_the_tags_in_the_order_given_either_way_round():
    tags = ["2026-09", "2026-10", "hotfix", "2026-11", "2026-12"]
    assert plan("image", "c", "2026-10", "2026-12", tags).versions == ("2026-10", "hotfix", "2026-11", "2026-12")
    assert plan("image", "c", "2026-12", "2026-10", tags).versions == ("2026-12", "2026-11", "hotfix", "2026-10")
    with pytest.raises(HarnessError, match=r"--bad '2027-01' is not in --versions .* Fix: list the images"):
        plan("image", "c", "2026-10", "2027-01", tags)


def test_the_cuda_axis_moves_the_default_base_and_wheel_index_with_it_and_keeps_ones_the_stack_named():
    from harness.matrix import Stack
    default = Stack("12.4.1", "2.5.1", "1.0.1", base="nvidia/cuda:12.4.1-runtime-ubuntu22.04", python="3.10",
                    torch_index="https://download.pytorch.org/whl/cu124", template="cuda")
    moved = bisection.stack_at(default, "cuda", "12.1.1")
    assert (moved.cuda, moved.base, moved.torch_index) == (
        "12.1.1", "nvidia/cuda:12.1.1-runtime-ubuntu22.04", "https://download.pytorch.org/whl/cu121")
    own = bisection.stack_at(Stack("12.4.1", "2.5.1", "1.0.1", base="site/cuda:12.4", python="3.10",
                                   torch_index="https://mirror/whl", template="cuda"), "cuda", "12.1.1")
    assert (own.base, own.torch_index) == ("site/cuda:12.4", "https://mirror/whl")


@pytest.mark.parametrize("current, version, image", [
    ("site/train:2026-11", "2026-12", "site/train:2026-12"),
    ("registry:5000/site/train:2026-11", "b3", "registry:5000/site/train:b3"),
    ("registry:5000/site/train", "b3", "registry:5000/site/train:b3"),
    ("site/train@sha256:" + "0" * 64, "2026-12", "site/train:2026-12"),
    ("site/train:2026-11", "other/image:1", "other/image:1"),  # a reference is taken as given
])
def test_a_bare_tag_is_one_of_the_current_images_repository(current, version, image):
    assert bisection.image_ref(current, version) == image


@pytest.mark.parametrize("args, words", [
    (("python", "c", "1", "2"), "--axis 'python' is not an axis"),
    (("accelerate", "c", "one", "0.2"), "--good 'one' is not a version"),
    (("accelerate", "c", "0.2", "0.2"), "the same release"),
])
def test_bad_input_says_the_flag_and_the_fix(args, words):
    with pytest.raises(HarnessError, match="Fix:") as raised:
        plan(*args, RELEASED)
    assert words in str(raised.value)


# ------------------------------------------------------------------- one step's verdict
@pytest.mark.parametrize("step, klass, verdict", [
    ("pass", None, "good"),
    ("fail", "import", "bad"),
    ("fail", "nccl", "skip"),  # failed another way: says nothing of this regression
    ("hang", None, "skip"),
    ("build-error", None, "skip"),
    ("infra-error", None, "skip"),
    ("not run", None, "skip"),
])
def test_a_step_is_bad_only_when_it_fails_as_the_bad_end_did(step, klass, verdict):
    assert judge(step, klass, "pass", "fail", "import")[0] == verdict


def test_a_hang_at_the_bad_end_makes_a_hang_bad_whatever_its_class():
    assert judge("hang", None, "pass", "hang", None)[0] == "bad"


@pytest.mark.parametrize("status, change, verdict", [
    ("pass", "regression", "bad"),
    ("pass", "within noise", "good"),  # beyond the threshold but inside the noise: not counted, as compare says
    ("pass", "improvement", "good"),
    ("pass", None, "good"),  # no change beyond the threshold
    ("fail", "regression", "skip"),  # a step that failed says nothing of a slowdown
    ("hang", None, "skip"),
])
def test_by_busbw_a_step_is_bad_only_when_it_passed_and_compare_calls_it_a_regression(status, change, verdict):
    assert bisection.judge_busbw(status, change, "busbw -50%")[0] == verdict


# ------------------------------------------------------------------- the search
def _search(p: bisection.Plan, truth: dict[str, str]) -> tuple[list[str], str]:
    steps: dict[str, Step] = {}
    tried = []
    while (v := next_version(p, steps)) is not None:
        tried.append(v)
        status = truth[v]
        klass = "import" if status == "fail" else None
        if v in (p.good, p.bad):
            verdict, why = bisection.judge_end("good" if v == p.good else "bad", status, klass)
        else:
            verdict, why = judge(status, klass, "pass", "fail", "import")
        steps[v] = Step(v, verdict, status, why)
    return tried, answer(p, steps)


def test_bisection_finds_the_first_bad_release_in_log2_steps():
    p = plan("accelerate", "c", "0.34.2", "0.24.0", RELEASED)
    truth = {v: "pass" if Version(v) >= Version("0.30.0") else "fail" for v in p.versions}
    tried, said = _search(p, truth)
    assert said == "first bad: accelerate 0.29.0 (last good 0.30.0)"
    assert len(tried) <= p.worst_case_steps < len(p.versions)


def test_a_skipped_step_is_gone_around_and_named_where_it_hides_the_boundary():
    p = plan("accelerate", "c", "0.34.2", "0.24.0", RELEASED)
    truth = {v: "pass" if Version(v) >= Version("0.30.0") else "fail" for v in p.versions} | {"0.29.0": "build-error"}
    tried, said = _search(p, truth)
    assert "0.29.0" in tried
    assert said == "first bad: accelerate 0.28.0 or one of 0.29.0 (skipped or n/a); last good 0.30.0"


def test_ends_that_do_not_hold_stop_the_search_with_the_fix():
    p = plan("accelerate", "c", "0.34.2", "0.24.0", RELEASED)
    tried, said = _search(p, {v: "pass" for v in p.versions})
    assert tried == ["0.34.2", "0.24.0"]
    assert "the bad end accelerate 0.24.0 is skip here" in said and "Fix:" in said


# ------------------------------------------------------------------- the driver, on scripted ranks
MATRIX = """version: 1
stacks:
  include:
    - {cuda: cpu, torch: "2.13.0", accelerate: "0.34.2"}
variants: [default]
launchers: [accelerate]
timeouts: {fingerprint: 5, init: 5, prepare: 5, step: 5, check: 5, bandwidth: 5, teardown: 5, cell: 60}
"""
CELL = "cpu-torch2.13.0-acc0.34.2+default"
BOUNDARY = Version("0.30.0")  # the scripted regression: older Accelerate fails to import in prepare


def _accelerate(cell_id: str) -> Version:
    return Version(cell_id.split("-acc", 1)[1].split("+", 1)[0])


def _engine(fail_build: tuple[str, ...] = ()) -> FakeEngine:
    return FakeEngine(lambda spec: ({0: error("prepare", "import", "ModuleNotFoundError: No module named 'x'")}
                                    if _accelerate(spec.cell_id) < BOUNDARY else {}),
                      builder=FakeBuilder(fail=fail_build))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(images, "prepare", lambda stack, options, log: images.render(stack, options))
    monkeypatch.setattr(reaper, "sweep", lambda *args, **kwargs: [])
    monkeypatch.setattr(supervise, "STACK_DUMP_WAIT_S", 0.05)
    path = tmp_path / "m.yaml"
    path.write_text(MATRIX)

    def run(engine: FakeEngine, **kw) -> int:
        monkeypatch.setattr(pipeline.engines, "choose", lambda *args: engine)
        return bisectrun.bisect(Selection(path), MatrixOptions(results=tmp_path / "res"), bisectrun.BisectOptions(
            CELL, "accelerate", "0.34.2", "0.24.0", tuple(RELEASED), **kw))
    return run, tmp_path / "res"


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command printed (progress lines go to stderr)."""
    got = capsys.readouterr()
    return got.out + got.err


def _started(engine: FakeEngine) -> list[str]:
    return [_accelerate(r.spec.cell_id).base_version for r in engine.started]


def test_each_step_is_a_supervised_run_and_the_answer_names_the_first_bad_release(fake, capsys):
    run, res = fake
    engine = _engine()
    assert run(engine) == 0
    out = _said(capsys)
    assert "first bad: accelerate 0.29.0 (last good 0.30.0)" in out
    assert len(_started(engine)) <= 5
    summary = json.loads((res / bisectrun.default_id(CELL, "accelerate", "0.34.2", "0.24.0") / "bisect.json").read_text())
    by_version = {s["version"]: s for s in summary["steps"]}
    assert by_version["0.29.0"]["verdict"] == "bad" and by_version["0.30.0"]["verdict"] == "good"
    run_id = by_version["0.29.0"]["run_id"]
    record = results.load_run(res / run_id).records["cpu-torch2.13.0-acc0.29.0+default"]
    assert record.status == "fail" and record.error_class == "import"  # an ordinary run's record
    assert "Rerun (first bad): invoke matrix --matrix" in out and "--only 'cpu-torch2.13.0-acc0.29.0+default'" in out
    assert (f"The smallest change that reproduces it: accelerate 0.30.0 -> 0.29.0 in {CELL}, nothing else moved (variant "
            "default, launcher accelerate); the first bad step's record: fail (import), as the bad end") in out


def test_a_stopped_search_goes_on_without_running_its_steps_again(fake, capsys):
    run, _ = fake
    first = _engine()
    assert run(first, max_steps=2) == 1  # the budget: not finished
    assert "Stopped at the budget" in _said(capsys)
    again = _engine()
    assert run(again) == 0
    assert not set(_started(first)) & set(_started(again))
    assert "first bad: accelerate 0.29.0" in _said(capsys)


def test_an_interrupted_search_keeps_its_steps_and_the_same_command_goes_on_from_them(fake, capsys):
    """SIGTERM (as Ctrl-C; the pipeline takes both alike) while the third step's ranks are stuck: exit 130
    with how to go on; the same command then runs neither end again, only the interrupted step and the rest."""
    run, _ = fake
    third = "0.30.0"  # the middle of the ten releases after both ends
    stuck = _engine()
    scripted = stuck.script
    assert callable(scripted)
    stuck.script = lambda spec: ({0: stall("step", beating=True), 1: stall("step", beating=True)}
                                 if _accelerate(spec.cell_id) == Version(third) else scripted(spec))

    def interrupt_the_third_step() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(_accelerate(r.spec.cell_id) == Version(third) for r in stuck.started):
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    threading.Thread(target=interrupt_the_third_step, daemon=True).start()
    assert run(stuck) == 130
    assert "the same `invoke bisect` command goes on from there" in _said(capsys)
    again = _engine()
    assert run(again) == 0
    assert _started(again)[0] == third and {"0.34.2", "0.24.0"}.isdisjoint(_started(again))
    assert "first bad: accelerate 0.29.0 (last good 0.30.0)" in _said(capsys)


def test_by_busbw_the_first_release_whose_bandwidth_fell_is_found_and_a_failed_step_is_skipped(fake, capsys):
    """Every step passes; from 0.29.0 down the ranks measure half the bandwidth (-50%, beyond the 30% floor of
    gloo cells): by outcome nothing broke, by busbw 0.29.0 did. A step that fails (0.28.0) is skip."""
    run, res = fake
    slow = FakeEngine(lambda spec: (
        {0: error("prepare", "import", "ModuleNotFoundError: No module named 'x'")} if _accelerate(spec.cell_id) == Version("0.28.0")
        else {r: Rank(busbw=5.0 if _accelerate(spec.cell_id) < BOUNDARY else 10.0) for r in (0, 1)}))
    assert run(slow, metric="busbw") == 0
    out = _said(capsys)
    assert "judged by busbw (a drop beyond 10% and the noise)" in out
    assert "first bad: accelerate 0.29.0 (last good 0.30.0)" in out, out
    summary = json.loads((res / bisectrun.default_id(CELL, "accelerate", "0.34.2", "0.24.0", "busbw")
                          / "bisect.json").read_text())
    by_version = {s["version"]: s for s in summary["steps"]}
    assert summary["metric"] == "busbw" and by_version["0.29.0"]["status"] == "pass"
    assert "busbw -50% at 1 MiB" in by_version["0.29.0"]["why"]
    assert by_version.get("0.28.0", {"verdict": "skip"})["verdict"] == "skip"


def test_by_busbw_a_bad_end_that_did_not_slow_down_stops_with_the_fix(fake, capsys):
    run, _ = fake
    assert run(FakeEngine(lambda spec: {}), metric="busbw") == 2
    out = _said(capsys)
    assert "the bad end does not hold here (no busbw regression)" in out and "Fix: give --bad" in out


def test_a_step_whose_image_does_not_build_is_skipped_and_the_search_goes_around_it(fake, capsys):
    run, _ = fake
    assert run(_engine(fail_build=("cpu-torch2.13.0-acc0.29.0",))) == 0
    assert "first bad: accelerate 0.28.0 or one of 0.29.0 (skipped or n/a); last good 0.30.0" in _said(capsys)


# ------------------------------------------------------------------- the command
def test_the_dry_run_lists_the_releases_and_the_worst_case_and_runs_nothing(tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    done = subprocess.run([sys.executable, "-m", "harness", "bisect", CELL, "--axis", "accelerate", "--good", "0.34.2",
                           "--bad", "0.28.0", "--versions", ",".join(RELEASED), "--matrix", str(tmp_path / "m.yaml"),
                           "--results", str(tmp_path / "res"), "--dry-run"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "7 releases from good 0.34.2 to bad 0.28.0, at most 5 steps" in done.stdout + done.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("flags, words", [
    (["--axis", "cuda"], "--axis cuda: no package index lists CUDA versions (base images). Fix: give them"),
    (["--axis", "image"], "--axis image: this cell's stack is built from versions"),
    (["--axis", "accelerate", "--metric", "speed"], "--metric 'speed' is not a metric bisect judges by. Fix:"),
    (["--axis", "accelerate", "--metric", "busbw", "--threshold", "10"], "--threshold 10.0: the relative drop"),
])
def test_bad_flags_are_exit_2_naming_the_flag_and_the_fix(tmp_path, flags, words):
    (tmp_path / "m.yaml").write_text(MATRIX)
    done = subprocess.run([sys.executable, "-m", "harness", "bisect", CELL, "--good", "0.34.2", "--bad", "0.28.0",
                           "--matrix", str(tmp_path / "m.yaml"), "--results", str(tmp_path / "res"), "--dry-run",
                           *flags], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert words in done.stderr, done.stderr
    assert not (tmp_path / "res").exists()


def test_a_cell_the_matrix_does_not_have_is_bad_input_with_the_closest_one(tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    done = subprocess.run([sys.executable, "-m", "harness", "bisect", CELL.replace("0.34.2", "0.34.3"), "--axis",
                           "accelerate", "--good", "0.34.2", "--bad", "0.28.0", "--versions", "0.34.2,0.28.0",
                           "--matrix", str(tmp_path / "m.yaml"), "--dry-run"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"did you mean {CELL}" in done.stderr


# ------------------------------------------------------------------- for real, in containers
REAL = """version: 1
stacks:
  include:
    - {cuda: cpu, torch: "2.13.0", accelerate: "0.34.2"}
variants: [default]
launchers: [accelerate]
ranks: 2
timeouts: {fingerprint: 60, init: 60, prepare: 60, step: 30, check: 30, bandwidth: 60, teardown: 30, cell: 600}
bandwidth: {sizes: ["4K", "64K"], iters: 5, warmup: 1, trials: 1}
"""


@pytest.mark.engine
@pytest.mark.slow
def test_a_real_bisect_in_containers_names_the_oldest_accelerate_torch_2_13_installs_and_goes_on_from_its_runs(
        engine, test_images, tmp_path, capsys):
    """torch 2.13.0 requires setuptools >= 77.0.3 (its wheel's metadata), and an image of Accelerate < 0.25 pins
    setuptools < 70 (their launchers import pkg_resources; compat.needs_setuptools_below_70): pip refuses the pair,
    so 0.24.x cannot be built with it while 0.25.0 passes. Bisection over the real releases between finds it."""
    path = tmp_path / "m.yaml"
    path.write_text(REAL)
    options = MatrixOptions(engine="docker", results=tmp_path / "res")
    walk = bisectrun.BisectOptions(CELL, "accelerate", "0.34.2", "0.24.0", ("0.34.2", "0.25.0", "0.24.1", "0.24.0"))
    assert bisectrun.bisect(Selection(path), options, walk) == 0
    said = _said(capsys)
    assert "first bad: accelerate 0.24.1 (last good 0.25.0)" in said
    summary = json.loads((tmp_path / "res" / bisectrun.default_id(CELL, "accelerate", "0.34.2", "0.24.0")
                          / "bisect.json").read_text())
    assert {s["version"]: s["status"] for s in summary["steps"]} == {
        "0.34.2": "pass", "0.25.0": "pass", "0.24.1": "build-error", "0.24.0": "build-error"}
    # the same command again reads every step from its run: nothing is built or run
    assert bisectrun.bisect(Selection(path), options, walk) == 0
    again = _said(capsys)
    assert "first bad: accelerate 0.24.1 (last good 0.25.0)" in again and "Running 1 cell" not in again
