"""What differs between engines lives behind one interface: the container's settings are declared once
(container_config) and read the same by the SDK call and the pasteable `docker run` line; the host
engine's pasteable line carries what its start() sets; the doctor asks the engine what it needs."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from docker.types import DeviceRequest, HostConfig, Ulimit

from harness import launch, matrix
from harness.engines.base import CellSpec
from harness.engines.container import CELL_ENV, container_config
from harness.engines.host import PYCACHE, HostEngine, host_env

from .conftest import REPO


def _spec(gpus=(), shm_size=None, variant="p2p-off") -> CellSpec:
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX if gpus else matrix.DEFAULT_CPU_MATRIX)
    cell = next(c for c in m.runnable if c.variant.name == variant)
    return CellSpec("run", cell.id, launch.launch(cell, m, ranks=len(gpus) or 2), Path("/r/out"), image="img:tag",
                    gpus=gpus, shm_size=shm_size)


@pytest.mark.parametrize("gpus, shm_size", [((), None), (("0", "1"), None), (("3",), "8g")])
def test_sdk_settings_and_docker_run_line_are_the_same_container(gpus, shm_size):
    config = container_config(_spec(gpus, shm_size))
    kwargs = config.sdk_kwargs()
    argv = shlex.split(config.docker_run())
    image_at = argv.index("img:tag")
    assert tuple(argv[image_at + 1:]) == config.command
    flags = argv[:image_at]
    env = {flags[i + 1].split("=", 1)[0]: flags[i + 1].split("=", 1)[1] for i, f in enumerate(flags) if f == "-e"}
    assert env == kwargs["environment"] and set(dict(CELL_ENV)) <= set(env) and env["NCCL_P2P_DISABLE"] == "1"
    mounts = [flags[i + 1] for i, f in enumerate(flags) if f == "-v"]
    assert mounts == [f"{host}:{bind['bind']}" for host, bind in kwargs["volumes"].items()] == ["/r/out:/out"]
    assert [flags[i + 1] for i, f in enumerate(flags) if f == "--cap-add"] == kwargs["cap_add"] == ["SYS_NICE"]
    assert flags[flags.index("-w") + 1] == kwargs["working_dir"]
    if shm_size:
        assert f"--shm-size={shm_size}" in flags and kwargs["shm_size"] == shm_size and "ipc_mode" not in kwargs
    else:
        assert "--ipc=host" in flags and kwargs["ipc_mode"] == "host"
    if gpus:
        assert flags[flags.index("--gpus") + 1] == f'"device={",".join(gpus)}"'
        assert kwargs["device_requests"][0]["device_ids"] == list(gpus)
        assert "memlock=-1:-1" in flags and kwargs["ulimits"][0]["soft"] == -1
        # plain data, which the SDK turns into the very request and limit it would be given typed
        host_config = HostConfig(version="1.44", device_requests=kwargs["device_requests"], ulimits=kwargs["ulimits"])
        assert host_config == HostConfig(version="1.44", ulimits=[Ulimit(name="memlock", soft=-1, hard=-1)],
                                         device_requests=[DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])])
        assert host_config["DeviceRequests"][0]["DeviceIDs"] == list(gpus) and host_config["Ulimits"][0]["Soft"] == -1
    else:
        assert "--gpus" not in flags and "device_requests" not in kwargs
        assert "--ulimit" not in flags and "ulimits" not in kwargs


def test_host_line_sets_what_start_sets():
    spec = _spec(("0", "1"))
    line = HostEngine().equivalent(spec)
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in words[: len(host_env(spec))])
    assert env == host_env(spec)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["NCCL_P2P_DISABLE"] == "1"
    assert tuple(words[len(env):]) == spec.launch.argv


def test_host_ranks_cache_their_bytecode_where_the_harness_says_unless_the_user_chose():
    spec = _spec(())
    assert host_env(spec, {})["PYTHONPYCACHEPREFIX"] == str(PYCACHE)
    assert "PYTHONDONTWRITEBYTECODE" not in host_env(spec, {})
    # a site that forbids writing bytecode beside the sources still gets the harness's own cache
    assert host_env(spec, {"PYTHONDONTWRITEBYTECODE": "1"})["PYTHONDONTWRITEBYTECODE"] == ""
    mine = host_env(spec, {"PYTHONPYCACHEPREFIX": "/mine", "PYTHONDONTWRITEBYTECODE": "1"})
    assert "PYTHONPYCACHEPREFIX" not in mine and "PYTHONDONTWRITEBYTECODE" not in mine


def test_doctor_on_the_host_engine_names_the_host_stack():
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-m", "harness", "doctor", "--engine", "host"], cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "host stack" in done.stdout and "torch" in done.stdout


def test_doctor_without_docker_says_what_the_matrix_will_do_there(tmp_path):
    """Issue 22, on the one-H200 host without Docker: the doctor said FAIL (exit 4) for the missing engine
    while `invoke matrix` ran the host engine and passed. Without --engine it now says what the matrix
    does, and checks that engine."""
    pytest.importorskip("torch")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}  # a socket nothing listens on
    done = subprocess.run([sys.executable, "-m", "harness", "doctor"], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    row = next(line for line in done.stdout.splitlines() if " engine " in line)
    assert row.startswith("warn") and "`invoke matrix` runs the host engine" in row
    assert "fix: for the matrix in containers, start a Docker engine (scripts/setup.sh)" in done.stdout
    assert "ok   host stack" in done.stdout
    asked = subprocess.run([sys.executable, "-m", "harness", "doctor", "--engine", "docker"], cwd=REPO,
                           capture_output=True, text=True, timeout=180, env=env)
    assert asked.returncode == 4 and "FAIL Docker engine" in asked.stdout  # asked for by name: it blocks


@pytest.mark.engine
def test_doctor_looks_through_a_container_with_the_cells_settings(engine, base_image):
    done = subprocess.run([sys.executable, "-m", "harness", "doctor"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   Docker engine" in done.stdout
    shm = next(l for l in done.stdout.splitlines() if "/dev/shm in a container" in l)
    assert "GiB (ipc=host)" in shm
    assert "memlock in a container" in done.stdout
    assert engine.client.leftovers() == []
