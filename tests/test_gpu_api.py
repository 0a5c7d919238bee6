"""How a cell's container gets its GPUs: through CDI (`--device nvidia.com/gpu=0`, the SDK's DeviceRequest
with driver "cdi") or through the NVIDIA runtime (`--gpus "device=0,1"`), declared once in ContainerConfig
and read the same by the SDK call and the pasteable line; chosen once per run (a probe container, CDI
first, or --gpu-api), recorded in run.json and shown in the report's header and Rerun lines. On this
project's CPU machines no way works, and the probe and the doctor say so with each way's fix."""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from docker.types import DeviceRequest, HostConfig

from harness import cli, launch, matrix, pipeline, report, results, selection
from harness.engines.base import CellSpec
from harness.engines.container import GPU_API_NAMES, ContainerConfig, container_config
from harness.engines.docker import GPU_API_FIXES, DockerEngine
from harness.errors import InfraError
from harness.kinds import GPU_APIS
from harness.runfacts import RunFacts, RunJson

GOLDEN_RUN = Path(__file__).parent / "fixtures" / "golden-run"
UUID = "GPU-6f1c2d3e-0a1b-4c5d-8e9f-0123456789ab"


def _spec(gpus: tuple[str, ...], gpu_api=None) -> CellSpec:
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    cell = m.runnable[0]
    return CellSpec("run", cell.id, launch.launch(cell, m, ranks=len(gpus)), Path("/r/out"), image="img:tag",
                    gpus=gpus, gpu_api=gpu_api)


def _flag_values(argv: list[str], flag: str, image: str = "img:tag") -> list[str]:
    """A `docker run` flag's values, before the image (the workload's own --device cuda comes after it)."""
    before = argv[:argv.index(image)]
    return [before[i + 1] for i, word in enumerate(before) if word == flag]


# ------------------------------------------------------------------------------------- the declaration
def test_the_way_is_one_typed_choice_cdi_first():
    assert GPU_APIS == ("cdi", "nvidia")  # the probe's order: NVIDIA's recommended way first


@pytest.mark.parametrize("gpus, names", [
    (("0", "1"), ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]),
    ((UUID,), [f"nvidia.com/gpu={UUID}"]),
])
def test_cdi_names_one_device_per_gpu_in_the_sdk_call_and_the_docker_run_line(gpus, names):
    config = container_config(_spec(gpus, "cdi"))
    kwargs = config.sdk_kwargs()
    assert kwargs["device_requests"] == [{"driver": "cdi", "device_ids": names}]
    argv = config.run_argv()
    assert _flag_values(argv, "--device") == names and "--gpus" not in argv
    # the SDK turns the plain data into the very request the CLI's --device sends
    built = HostConfig(version="1.44", device_requests=kwargs["device_requests"])
    assert built == HostConfig(version="1.44", device_requests=[DeviceRequest(driver="cdi", device_ids=names)])
    # what NCCL needs in a container does not depend on the way
    assert "memlock=-1:-1" in argv and kwargs["ulimits"][0]["soft"] == -1 and "--ipc=host" in argv


@pytest.mark.parametrize("gpu_api", ["nvidia", None])  # None: a spec made without the run's choice
def test_the_nvidia_runtime_request_is_the_one_the_harness_always_made(gpu_api):
    config = container_config(_spec(("0", "1"), gpu_api))
    assert config.sdk_kwargs()["device_requests"] == [{"device_ids": ["0", "1"], "capabilities": [["gpu"]]}]
    argv = config.run_argv()
    assert _flag_values(argv, "--gpus") == ['"device=0,1"'] and _flag_values(argv, "--device") == []


@pytest.mark.parametrize("gpu_api", GPU_APIS)
def test_the_dry_run_line_is_the_container_start_makes(gpu_api):
    """DockerEngine.equivalent (the dry run's line) and start() read one ContainerConfig: the line's GPU
    words name exactly the devices of the SDK's request."""
    spec = _spec(("0", "1"), gpu_api)
    config = container_config(spec)
    line = DockerEngine.__new__(DockerEngine).equivalent(spec)
    assert line == config.docker_run()
    argv = shlex.split(line)
    request = config.sdk_kwargs()["device_requests"][0]
    if gpu_api == "cdi":
        assert _flag_values(argv, "--device") == request["device_ids"]
    else:
        # the inner quotes reach the docker CLI: without them --gpus device=0,1 silently gives one GPU
        assert _flag_values(argv, "--gpus") == ['"device=' + ",".join(request["device_ids"]) + '"']


def test_a_cpu_cell_gets_no_gpu_words_either_way():
    for api in GPU_APIS:
        config = ContainerConfig("img", ("true",), gpu_api=api)
        assert "device_requests" not in config.sdk_kwargs()
        assert _flag_values(config.run_argv(), "--device", "img") == _flag_values(config.run_argv(), "--gpus", "img") == []


def test_a_slurm_nodes_podman_gets_every_gpu_through_cdi_and_docker_through_the_runtime():
    from harness.engines.noderuntime import GPU_DEVICES

    assert GPU_DEVICES == {"docker": ("--gpus", "all"), "podman": ("--device", "nvidia.com/gpu=all")}


# ------------------------------------------------------------------------------------- the choice
class _Probed:
    """An engine whose probe answers `found`, counting the calls."""

    def __init__(self, found):
        self.found, self.asked = found, []

    def gpu_api(self, gpus, image, given=None):
        self.asked.append((gpus, image, given))
        return given or self.found


def test_the_run_chooses_once_from_the_first_gpu_cells_image_or_takes_the_flag():
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    cpu = matrix.load(matrix.DEFAULT_CPU_MATRIX).runnable[:1]
    engine = _Probed("cdi")
    assert pipeline.choose_gpu_api(engine, cpu + m.runnable, ("0",), None, lambda c: f"tag-of-{c.id}") == ("cdi", "probed")
    assert engine.asked == [(("0",), f"tag-of-{m.runnable[0].id}", None)]
    assert pipeline.choose_gpu_api(engine, m.runnable, ("0",), "nvidia", lambda c: "") == ("nvidia", "--gpu-api")
    # a CPU-only run (or one without GPU ids) needs no probe
    engine.asked.clear()
    assert pipeline.choose_gpu_api(engine, cpu, ("0",), None, lambda c: "") == (None, "")
    assert pipeline.choose_gpu_api(engine, m.runnable, (), None, lambda c: "") == (None, "")
    assert engine.asked == []


def test_the_run_says_which_way_and_why():
    assert pipeline.gpu_api_line("cdi", "probed", ("0",)) == "# GPUs to containers through CDI (--device nvidia.com/gpu=0) (probed)"
    assert (pipeline.gpu_api_line("nvidia", "--gpu-api", ("0", "1"))
            == '# GPUs to containers through the NVIDIA runtime (--gpus "device=0,1") (--gpu-api)')


# ------------------------------------------------------------------------------------- the record
@pytest.mark.parametrize("gpu_api", GPU_APIS)
def test_run_json_keeps_the_way_and_reads_it_back(gpu_api):
    written = RunJson(run_id="r", gpus=("0", "1"), gpu_api=gpu_api).to_json()
    assert written["gpu_api"] == gpu_api
    assert RunJson.read(written).gpu_api == gpu_api and RunFacts.from_json(written).gpu_api == gpu_api


def test_a_run_without_container_gpus_writes_no_gpu_api_and_older_runs_read_as_none():
    assert "gpu_api" not in RunJson(run_id="r").to_json()  # run.json of CPU-only runs as before
    old = json.loads((GOLDEN_RUN / "run.json").read_text())
    assert "gpu_api" not in old and RunFacts.from_json(old).gpu_api is None
    problems: list[str] = []
    assert RunFacts.from_json({**old, "gpu_api": "vulkan"}, problems).gpu_api is None and problems  # said, not a crash


def _golden_with(tmp_path: Path, **changes) -> results.RunData:
    run = tmp_path / GOLDEN_RUN.name
    shutil.copytree(GOLDEN_RUN, run)
    facts = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**facts, **changes}))
    return results.load_run(run)


def test_the_report_header_says_how_containers_got_the_gpus(tmp_path):
    text = report.render(_golden_with(tmp_path, gpu_api="cdi"))
    assert "| GPUs to containers | CDI (--device nvidia.com/gpu=0 --device nvidia.com/gpu=1) |" in text
    rerun = [line for line in text.splitlines() if line.startswith("Rerun:")]
    assert rerun and all("--gpus 0,1 --gpu-api cdi" in line or "--matrix" in line for line in rerun)
    assert any("--gpu-api cdi" in line for line in rerun)


def test_a_run_from_before_the_way_was_recorded_has_no_such_row(tmp_path):
    text = report.render(_golden_with(tmp_path))
    assert "GPUs to containers" not in text and "--gpu-api" not in text


# ------------------------------------------------------------------------------------- the real engine
@pytest.mark.engine
def test_the_probe_names_both_refusals_with_their_fixes_when_neither_way_works(engine, base_image):
    """This machine's dockerd (Debian's docker.io 20.10) has neither CDI nor the NVIDIA runtime."""
    with pytest.raises(InfraError) as caught:
        engine.gpu_api(("0",), "no-such-image:anywhere")  # an image that does not exist: a local base instead
    text = str(caught.value)
    assert "through CDI (--device nvidia.com/gpu=0)" in text and 'through the NVIDIA runtime (--gpus "device=0")' in text
    assert 'could not select device driver "" with capabilities: [[gpu]]' in text  # the engine's own words
    assert "could not select device driver \"cdi\"" in text or "unresolvable CDI devices" in text
    assert GPU_API_FIXES["cdi"] in text and GPU_API_FIXES["nvidia"] in text
    assert text.index("CDI") < text.index("NVIDIA runtime")  # CDI first, as it is tried
    assert engine.client.leftovers("io.nccl-harness.gpu-probe") == []
    # a way given by --gpu-api is taken as given: no probe
    assert engine.gpu_api(("0",), "", "cdi") == "cdi" and engine.gpu_api((), "") is None


@pytest.mark.engine
def test_doctor_with_gpus_says_both_ways_refused_with_each_fix_exit_4(engine, base_image, monkeypatch, capsys):
    monkeypatch.setattr(selection, "present_gpus", lambda: ["0"])  # --gpus 0 passes its check on a CPU machine
    with pytest.raises(SystemExit) as ended:  # the task's code, as invoke exits with it
        cli.main(["doctor", "--gpus", "0"])
    out = capsys.readouterr().out
    assert ended.value.code == 4, out
    row = next(line for line in out.splitlines() if "GPUs to containers" in line)
    assert row.startswith("FAIL") and "CDI" in row and "NVIDIA runtime" in row
    assert GPU_API_FIXES["cdi"] in out and GPU_API_FIXES["nvidia"] in out


@pytest.mark.engine
def test_doctor_without_gpus_needs_no_way(engine, base_image):
    found = {c.name: c for c in DockerEngine(engine.client).checks(())}
    assert found["GPUs to containers"].ok and "no --gpus" in found["GPUs to containers"].detail
    assert [c.name for c in found.values() if not c.ok and c.blocking] == []


@pytest.mark.engine
def test_the_dry_run_probes_as_the_real_run_would_or_takes_the_flag(engine, base_image, monkeypatch, capsys):
    monkeypatch.setattr(selection, "present_gpus", lambda: ["0"])
    gpu_cell = matrix.load(matrix.DEFAULT_GPU_MATRIX).runnable[0].id
    opts = pipeline.MatrixOptions(engine="docker", gpus="0", dry_run=True, gpu_api="cdi")
    assert pipeline.run(selection.Selection(matrix.DEFAULT_GPU_MATRIX, (gpu_cell,)), opts) == 0
    out = capsys.readouterr().out
    assert "# GPUs to containers through CDI (--device nvidia.com/gpu=0) (--gpu-api)" in out
    line = next(line for line in out.splitlines() if line.startswith("docker run"))
    assert " --device nvidia.com/gpu=0 " in line and "--gpus" not in line
    # without the flag the dry run probes, as the real run does: here neither way works
    with pytest.raises(InfraError, match="neither way"):
        pipeline.run(selection.Selection(matrix.DEFAULT_GPU_MATRIX, (gpu_cell,)),
                     pipeline.MatrixOptions(engine="docker", gpus="0", dry_run=True))


@pytest.mark.engine
@pytest.mark.parametrize("used, other", [("cdi", "nvidia"), ("nvidia", "cdi")])
def test_a_cell_whose_gpus_the_engine_refuses_names_the_way_used_and_the_others_fix(engine, base_image, tmp_path, used,
                                                                                   other):
    spec = replace(_spec(("0",), used), image=base_image, out_dir=tmp_path / "out", run_id="gpu-way-test")
    with pytest.raises(InfraError) as caught, DockerEngine(engine.client).start(spec):
        pass
    text = str(caught.value)
    assert text.startswith(f"this Docker engine refused the cell's GPUs through {GPU_API_NAMES[used]} (")
    assert "could not select device driver" in text  # the engine's own words
    assert f"--gpu-api {other}" in text and GPU_API_FIXES[other] in text and GPU_API_FIXES[used] in text
    assert engine.client.leftovers() == []


@pytest.mark.parametrize("text, words", [
    ("error setting rlimit type 8: operation not permitted", ["unlimited memlock, which NCCL needs", "LimitMEMLOCK=infinity"]),
    # podman 4.3's compatible API on a VM whose hard limits are lower than podman's default ulimits (seen here)
    ("runc create failed: error setting rlimits for ready process: error setting rlimit type 7: operation not permitted",
     ["nofile (open files) limit", "default_ulimits in containers.conf"]),
    ("error setting rlimit type 6: operation not permitted", ["nproc (processes) limit", "LimitNPROC="]),
    # crun, podman's default runtime, names the limit (podman 4.3 on the same VM, seen here)
    ("OCI runtime error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied",
     ["nofile (open files) limit", "default_ulimits in containers.conf"]),
    ("crun: setrlimit `RLIMIT_NPROC`: Operation not permitted", ["nproc (processes) limit"]),
])
def test_a_refused_resource_limit_is_named_by_its_kind_with_its_fix(text, words):
    from harness.engines.docker import rlimit_refused

    what, fix = rlimit_refused(text)
    for word in words:
        assert word in what + fix, (what, fix)
    assert rlimit_refused("no such image") is None


# ------------------------------------------------------------------------------ podman's Docker API
PODMAN_VERSION = {"Version": "4.3.1", "ApiVersion": "1.41", "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}]}
DOCKER_VERSION = {"Version": "20.10.24", "ApiVersion": "1.41", "Components": [{"Name": "Engine", "Version": "20.10.24"}]}


def test_the_engine_behind_the_docker_api_is_told_by_its_version_answer():
    from harness.engines.dockerclient import product

    assert product(PODMAN_VERSION) == "podman" and product(DOCKER_VERSION) == "docker"
    assert product({}) == "docker" and product({"Components": None}) == "docker"


def test_podmans_gpu_fixes_are_its_own_and_dockers_name_the_version_cdi_came_in():
    from harness.engines.docker import PODMAN_GPU_API_FIXES, gpu_api_fix

    assert gpu_api_fix("cdi", PODMAN_VERSION) == PODMAN_GPU_API_FIXES["cdi"]  # not "upgrade Docker to 25"
    assert gpu_api_fix("nvidia", PODMAN_VERSION) == PODMAN_GPU_API_FIXES["nvidia"]
    assert gpu_api_fix("cdi", DOCKER_VERSION).startswith("upgrade Docker to 25 or later (this engine is 20.10.24")
    assert gpu_api_fix("cdi", {"Version": "28.2.2"}) == GPU_API_FIXES["cdi"]


def test_the_report_says_podman_answered_and_older_runs_read_as_before():
    from harness.report import engine_text as _engine
    from harness.runfacts import RunFacts

    def engine_row(engine: dict) -> str:
        return _engine(RunFacts.from_json({"run_id": "r", "host": {"engine": engine}}))

    assert engine_row({"name": "docker", "product": "podman", "version": "4.3.1", "runtimes": ["runc"]}) == \
        "podman 4.3.1 through its Docker-compatible API (runtimes: runc)"
    assert engine_row({"name": "docker", "version": "28.2.2", "runtimes": ["runc"]}) == "docker 28.2.2 (runtimes: runc)"
    assert engine_row({"name": "docker", "product": "docker", "version": "28.2.2"}) == "docker 28.2.2"
