"""Images on the real Docker engine: built through the SDK, cached by content hash, failures recorded
as build-error while the other images go on, and the real CPU stack runs Python inside."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import commands, images, matrix, wheelhouse
from harness.engines.docker import LABEL

from .conftest import REPO, TEST_REPO

pytestmark = pytest.mark.engine

TINY = textwrap.dedent(
    """\
    FROM {{ stack.base }}
    {% include "_labels.j2" %}
    RUN echo "MARKER" > /marker
    COPY workload/ /opt/harness/workload/
    """
)


@pytest.fixture
def tiny_images(tmp_path, monkeypatch, base_image, test_images):
    """An images/ folder with three tiny templates (no pip: seconds to build) and a matrix using them;
    the images are the test's own (test_images), removed afterwards."""
    fake = tmp_path / "images"
    shutil.copytree(matrix.IMAGES_DIR, fake)
    token = test_images  # a fresh token per test: earlier images must not turn the first build into a cache hit
    (fake / "tiny-a.Dockerfile.j2").write_text(TINY.replace("MARKER", f"a {token}"))
    (fake / "tiny-b.Dockerfile.j2").write_text(TINY.replace("MARKER", f"b {token}"))
    (fake / "tiny-broken.Dockerfile.j2").write_text(
        TINY.replace("MARKER", f"x {token}") + 'RUN echo "ERROR: this stack cannot be built" >&2 && false\n'
    )
    monkeypatch.setattr(matrix, "IMAGES_DIR", fake)
    path = tmp_path / "tiny.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            stacks:
              include:
                - {cuda: cpu, torch: "2.13.0", accelerate: "1.15.0", template: tiny-a}
                - {cuda: cpu, torch: "2.13.0", accelerate: "0.34.2", template: tiny-b}
            variants: [default, p2p-off]
            """
        )
    )
    return fake, path, token


def _build(selection: commands.Selection, results: Path, run_id: str, **opts) -> tuple[int, dict]:
    code = commands.build(selection, images.BuildOptions(**opts), results, run_id)
    record = json.loads((results / run_id / "builds.json").read_text())
    return code, record


def _statuses(record: dict) -> dict[str, str]:
    return {k: v["status"] for k, v in record["images"].items()}


def test_second_build_is_a_cache_hit_and_a_changed_template_rebuilds_only_its_images(engine, tiny_images, tmp_path):
    fake, path, token = tiny_images
    sel = commands.Selection(path)
    results = tmp_path / "results"
    code, first = _build(sel, results, "one", rebuild=True)
    assert code == 0
    assert all(v["tag"].startswith(f"{TEST_REPO}/") for v in first["images"].values())
    assert _statuses(first) == {"cpu-torch2.13.0-acc1.15.0": "built", "cpu-torch2.13.0-acc0.34.2": "built"}
    ids = {k: engine.client.image_id(v["tag"]) for k, v in first["images"].items()}

    code, second = _build(sel, results, "two")
    assert _statuses(second) == {"cpu-torch2.13.0-acc1.15.0": "cached", "cpu-torch2.13.0-acc0.34.2": "cached"}
    assert {k: v["tag"] for k, v in second["images"].items()} == {k: v["tag"] for k, v in first["images"].items()}
    # no build step ran: nothing was logged for the second run
    assert not list((results / "two" / "builds").glob("*.log"))

    (fake / "tiny-a.Dockerfile.j2").write_text(TINY.replace("MARKER", f"a, changed {token}"))
    code, third = _build(sel, results, "three")
    assert _statuses(third) == {"cpu-torch2.13.0-acc1.15.0": "built", "cpu-torch2.13.0-acc0.34.2": "cached"}
    new_a = third["images"]["cpu-torch2.13.0-acc1.15.0"]["tag"]
    assert engine.client.image_id(new_a) != ids["cpu-torch2.13.0-acc1.15.0"]
    out = engine.client.run_once(third["images"]["cpu-torch2.13.0-acc1.15.0"]["tag"], ["cat", "/marker"])
    assert out.output.strip() == f"a, changed {token}"
    labels = engine.client.image_labels(new_a)
    assert labels[f"{LABEL}.stack"] == "cpu-torch2.13.0-acc1.15.0"
    assert labels[f"{LABEL}.accelerate"] == "1.15.0"
    assert labels[f"{LABEL}.content-hash"].startswith(third["images"]["cpu-torch2.13.0-acc1.15.0"]["tag"].split(":")[1])


def test_a_failed_build_is_build_error_for_its_cells_and_the_rest_goes_on(engine, tiny_images, tmp_path):
    _fake, path, _ = tiny_images
    path.write_text(path.read_text().replace("template: tiny-a", "template: tiny-broken"))
    code, record = _build(commands.Selection(path), tmp_path / "results", "run", rebuild=True)
    assert code == 1
    broken, good = record["images"]["cpu-torch2.13.0-acc1.15.0"], record["images"]["cpu-torch2.13.0-acc0.34.2"]
    assert broken["status"] == "build-error"
    assert "returned a non-zero code" in broken["reason"]
    assert "this stack cannot be built" in broken["reason"]
    assert "this stack cannot be built" in Path(broken["log"]).read_text()
    assert good["status"] == "built"
    assert set(record["cells"]) == {"cpu-torch2.13.0-acc1.15.0+default", "cpu-torch2.13.0-acc1.15.0+p2p-off"}
    assert all(o["status"] == "build-error" for o in record["cells"].values())


@pytest.mark.slow
def test_real_cpu_stack_builds_from_the_default_wheel_store_and_runs_python(engine, cpu_image, tmp_path):
    """torch 2.13.0 CPU + Accelerate, wheels locked and downloaded on the host, installed with --no-index:
    `invoke build` without flags finds the image cpu_image made the same way."""
    sel = commands.Selection(matrix.DEFAULT_CPU_MATRIX, only=("stack=cpu-torch2.13.0-acc1.15.0",))
    code, record = _build(sel, tmp_path / "results", "real")
    assert code == 0, record
    image = record["images"]["cpu-torch2.13.0-acc1.15.0"]
    assert (image["status"], image["tag"]) == ("cached", cpu_image)
    probe = (
        "import torch, accelerate, torch.distributed as dist, os;"
        "print(torch.__version__, accelerate.__version__, dist.is_gloo_available(),"
        " os.path.exists('/opt/harness/workload/run.py'))"
    )
    out = engine.client.run_once(image["tag"], ["python", "-c", probe], timeout=120)
    assert out.exit_code == 0, out.output
    assert out.output.split() == ["2.13.0+cpu", "1.15.0", "True", "True"]


def _offline_env(monkeypatch=None) -> dict[str, str]:
    """The package index unreachable: every proxy variable at a port nobody listens on, the index there
    too, and none of the host's pip configuration (its find-links and file:// mirrors)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k.lower() != "no_proxy"}
    dead = "http://127.0.0.1:9"
    env.update({var: dead for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")})
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"{dead}/simple", PIP_RETRIES="1")
    if monkeypatch:
        for key in set(os.environ) - set(env):
            monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
    return env


def _matrix(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "matrix", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.mark.slow
def test_after_the_first_run_invoke_matrix_and_a_rerun_line_find_their_image_offline(engine, cpu_image, tmp_path):
    """The README's first command is `./scripts/setup.sh && invoke matrix`; after it, `invoke matrix` and
    the "Rerun:" line of its report run with zero builds and with the package index unreachable. One
    cell of matrix-cpu.yaml (what `invoke matrix` selects without GPUs), through the same defaults."""
    cell = "cpu-torch2.13.0-acc1.15.0+default"
    stack = cell.split("+")[0]
    runs = ["--results", str(tmp_path)]
    first = _matrix("--only", cell, *runs, "--run-id", "first")
    assert first.returncode == 0, first.stderr[-3000:]
    rerun = re.search(r"^Rerun: `(invoke matrix .*)`$", (tmp_path / "first" / "report.md").read_text(), re.M).group(1)
    assert "--wheelhouse" not in rerun
    offline = _offline_env()
    for run_id, argv in (("again", ["--only", cell]), ("rerun", shlex.split(rerun)[2:])):
        proc = _matrix(*argv, *runs, "--run-id", run_id, env=offline)
        assert proc.returncode == 0, (argv, proc.stderr[-3000:])
        assert f"[1/1] {stack}: cached ({cpu_image})" in proc.stderr, proc.stderr[-3000:]
        assert "building" not in proc.stderr and ": built in" not in proc.stderr
        (record,) = (tmp_path / run_id / "cells").glob("*/record.json")
        assert json.loads(record.read_text())["outcome"]["status"] == "pass"


def test_a_wheel_store_that_cannot_be_filled_names_the_proxy_not_the_version(engine, base_image, tmp_path,
                                                                              monkeypatch):
    """A real fetch failure: pip fills an empty wheel store on this host through a proxy nobody listens on.
    pip ends with "No matching distribution found for torch==2.13.0"; the build-error names the proxy,
    the log and the fix, and no image build started."""
    _offline_env(monkeypatch)
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.org/simple")
    wheelhouse.reachable.cache_clear()  # an index seen unreachable here is not unreachable for later tests
    selection = commands.Selection(matrix.DEFAULT_CPU_MATRIX, only=("stack=cpu-torch2.13.0-acc1.15.0",))
    try:
        code, record = _build(selection, tmp_path, "proxy", wheelhouse=tmp_path / "store")
    finally:
        wheelhouse.reachable.cache_clear()
    assert code == 1
    (image,) = record["images"].values()
    assert (image["status"], image["tag"]) == ("build-error", "")
    assert image["reason"].startswith("the proxy could not be reached or refused the connection: "), image["reason"]
    assert f"(log: {image['log']})" in image["reason"] and "Fix: check HTTP_PROXY/HTTPS_PROXY" in image["reason"]
    assert "Step 1/" not in Path(image["log"]).read_text()
