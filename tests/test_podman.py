"""The docker engine through podman (issue 21 item 3): the same engine, its API answered by podman's
Docker-compatible service (Debian's podman 4.3, `podman system service`; scripts/podman-local.sh), for
real on CPU. CPU cells build and pass there with the record saying podman ran them, the doctor says
which engine answers, the GPU probe names podman's own fixes (CDI, which podman reads itself), and a
harness killed mid-cell leaves no container in podman either."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.engines.docker import LABEL_RUN, PODMAN_GPU_API_FIXES
from harness.errors import InfraError

from .conftest import REPO, WHEELHOUSE
from .test_lifecycle import LONG, _all_json_parses, _in_phase, _matrix

pytestmark = [pytest.mark.engine, pytest.mark.slow]

# one stack, two cells: the image is the default CPU stack's, so a later test finds it built
ONLY = "cpu-torch2.13.0-acc1.15.0+default*"


def _env(host: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": host}


def _harness(host: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, env=_env(host), capture_output=True,
                          text=True, timeout=900)


def test_cpu_cells_build_and_pass_through_podman_and_the_record_says_podman(podman, tmp_path):
    host, eng = podman
    done = _harness(host, "matrix", "--only", ONLY, "--wheelhouse", str(WHEELHOUSE), "--results", str(tmp_path),
                    "--run-id", "pod")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "pod"
    records = [json.loads(p.read_text()) for p in sorted(run.glob("cells/*/record.json"))]
    assert len(records) == 2 and {r["outcome"]["status"] for r in records} == {"pass"}
    engine = json.loads((run / "run.json").read_text())["host"]["engine"]
    assert engine["name"] == "docker" and engine["product"] == "podman" and engine["version"].startswith("4.")
    row = next(line for line in (run / "report.md").read_text().splitlines() if line.startswith("| Engine |"))
    assert f"podman {engine['version']} through its Docker-compatible API" in row
    assert eng.client.leftovers() == []


def test_doctor_says_podman_answers_the_docker_api(podman):
    host, _ = podman
    done = _harness(host, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if "Docker engine" in line)
    assert line.startswith("ok") and "podman 4." in line and "through its Docker-compatible API" in line
    assert any(line.startswith("ok") and "/dev/shm in a container" in line for line in done.stdout.splitlines())


def test_the_gpu_probe_on_podman_names_both_refusals_with_podmans_own_fixes(podman):
    """No GPU here: both ways are refused, and the fixes are podman's (a CDI spec podman reads itself),
    not Docker's daemon.json or `nvidia-ctk runtime configure --runtime=docker`."""
    _, eng = podman
    with pytest.raises(InfraError) as caught:
        eng.gpu_api(("0",), "no-such-image:anywhere")
    text = str(caught.value)
    assert "through CDI (--device nvidia.com/gpu=0)" in text and 'through the NVIDIA runtime (--gpus "device=0")' in text
    assert PODMAN_GPU_API_FIXES["cdi"] in text and PODMAN_GPU_API_FIXES["nvidia"] in text
    assert "daemon.json" not in text and "--runtime=docker" not in text
    assert eng.client.leftovers("io.nccl-harness.gpu-probe") == []


def test_a_killed_harness_leaves_no_container_in_podman(podman, tmp_path):
    host, eng = podman
    matrix = _matrix(tmp_path, "long", **LONG)
    run_id = f"podkill-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-m", "harness", "matrix", "--engine", "docker", "--matrix", str(matrix),
                             "--wheelhouse", str(WHEELHOUSE), "--results", str(tmp_path), "--run-id", run_id],
                            cwd=REPO, env=_env(host), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not eng.client.leftovers(f"{LABEL_RUN}={run_id}"):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the cell's container did not start"
            time.sleep(0.5)
        while not _in_phase(tmp_path / run_id, "init"):  # the ranks run inside the container
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the cell's ranks did not start"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 30
        while eng.client.leftovers(f"{LABEL_RUN}={run_id}") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert eng.client.leftovers(f"{LABEL_RUN}={run_id}") == [], "the cell's container outlived its harness"
    finally:
        proc.kill()
    assert _all_json_parses(tmp_path / run_id) == []
