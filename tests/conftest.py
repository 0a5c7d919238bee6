"""Shared fixtures. Engine tests use the real Docker engine, slurm tests a real Slurm on this machine;
under CI=true they fail, not skip, when none can be had, so a CI run can never pass without having
built and run an image, and run a cell as a Slurm job."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import wheelhouse

REPO = Path(__file__).resolve().parent.parent
WHEELHOUSE = wheelhouse.DEFAULT_STORE  # the store `invoke matrix` uses without flags (scripts/setup.sh's run fills it)
TEST_REPO = "nccl-harness-test"  # images made only for tests: never tagged like a real stack
TEST_LABEL = "io.nccl-harness.test"


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {why}: engine tests must run in CI (scripts/setup.sh starts an engine).")
    pytest.skip(why)


@pytest.fixture(scope="session")
def engine():
    from harness.engines.docker import DockerEngine
    from harness.errors import InfraError

    try:
        eng = DockerEngine.connect()
    except InfraError as exc:
        _unavailable(f"no Docker engine ({exc})")
    yield eng
    left = eng.client.leftovers()
    assert not left, f"the tests left harness containers behind: {left}"


@contextmanager
def mounted_tmpfs(mnt: Path, options: str = "size=32m"):
    """A real small file system of its own at `mnt` (root only: mount), unmounted afterwards."""
    import subprocess

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    mnt.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="session")
def podman(base_image, tmp_path_factory):
    """The docker engine through podman's Docker-compatible service (scripts/podman-local.sh: installs
    Debian's podman when missing, starts `podman system service` on a socket of its own, loads the local
    base image into podman's store): (DOCKER_HOST, the DockerEngine on it). The service is stopped after."""
    import signal
    import subprocess

    import docker

    from harness.engines.docker import DockerEngine
    from harness.engines.dockerclient import DockerClient

    folder = tmp_path_factory.mktemp("podman")
    started = subprocess.run(["bash", str(REPO / "scripts" / "podman-local.sh"), str(folder)], capture_output=True,
                             text=True, timeout=600)
    if started.returncode != 0:
        _unavailable(f"scripts/podman-local.sh could not start podman (exit {started.returncode}): {started.stderr[-1500:]}")
    host = started.stdout.strip().splitlines()[-1]
    eng = DockerEngine(DockerClient(docker.DockerClient(base_url=host, timeout=600)))
    yield host, eng
    left = eng.client.leftovers()
    pid = folder / "service.pid"
    if pid.exists():
        os.kill(int(pid.read_text()), signal.SIGTERM)
    assert not left, f"the tests left harness containers behind in podman: {left}"


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """A Slurm controller that answers: the one configured here, else the one-node Slurm of
    scripts/slurm-local.sh (which installs slurm-wlm and munge when missing; root only)."""
    import subprocess

    def answers() -> bool:
        if shutil.which("scontrol") is None or shutil.which("sbatch") is None:
            return False
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=60)
        return ping.returncode == 0 and "UP" in ping.stdout

    if not answers():
        if os.geteuid() != 0:
            _unavailable("no Slurm controller answers, and scripts/slurm-local.sh needs root to start one")
        started = subprocess.run(["bash", str(REPO / "scripts" / "slurm-local.sh")], capture_output=True, text=True,
                                 timeout=600)
        if started.returncode != 0 or not answers():
            _unavailable(f"scripts/slurm-local.sh could not start Slurm (exit {started.returncode}): "
                         f"{started.stderr[-1500:]}")
    yield
    from harness.engines import slurm

    left = slurm.queued()
    assert not left, f"the tests left harness jobs in squeue: {left}"


class SlurmNodes:
    """A Slurm of two nodes or more in containers (scripts/slurm-cluster.sh): its name, nodes, the SLURM_CONF
    that reaches it from this host, and the folder every node sees at the same path."""

    def __init__(self, name: str, conf: str, shared: Path, count: int = 2) -> None:
        self.name, self.conf, self.shared = name, conf, shared
        self.nodes = tuple(f"{name}-n{i}" for i in range(1, count + 1))

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf, "PYTHONPATH": str(REPO)}

    def processes(self, node: str, needle: str) -> list[str]:
        """The command lines of the node's processes that mention `needle` (a run id, a token)."""
        import subprocess

        listing = subprocess.run(["docker", "exec", node, "sh", "-c",
                                  'for p in /proc/[0-9]*; do echo "$(cat $p/stat 2>/dev/null | cut -d" " -f1,3) '
                                  '$(tr "\\0" " " <$p/cmdline 2>/dev/null)"; done'],
                                 capture_output=True, text=True, timeout=60, check=True).stdout
        return [line for line in listing.splitlines() if needle in line and " Z " not in line]

    def signal(self, node: str, pid: int, sig: str) -> None:
        """`kill -SIG pid` on the node, as its administrator would (pid as the node sees it)."""
        import subprocess

        subprocess.run(["docker", "exec", node, "sh", "-c", f"kill -{sig} {pid}"], check=True, timeout=60)


def _cluster(tmp_path_factory, *extra: str):
    """scripts/slurm-cluster.sh up under a unique name (`extra`: its node count and bare node), or fail."""
    import subprocess
    import uuid

    if os.geteuid() != 0:
        _unavailable("scripts/slurm-cluster.sh needs root (Docker, munged)")
    name = f"hx{uuid.uuid4().hex[:8]}"
    shared = tmp_path_factory.mktemp("cluster-shared")
    up = subprocess.run(["bash", str(REPO / "scripts" / "slurm-cluster.sh"), "up", name, str(shared), *extra],
                        capture_output=True, text=True, timeout=900)
    conf = [line.split("=", 1)[1] for line in up.stdout.splitlines() if line.startswith("SLURM_CONF=")]
    if up.returncode != 0 or not conf:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-cluster.sh"), "down", name], timeout=300)
        _unavailable(f"scripts/slurm-cluster.sh up could not start the Slurm nodes (exit {up.returncode}): "
                     f"{up.stderr[-1500:]}")
    return SlurmNodes(name, conf[0], shared, int(extra[0]) if extra else 2)


@pytest.fixture(scope="module")
def slurm_fleet(base_image, slurm_cluster, tmp_path_factory):
    """A four-node Slurm (scripts/slurm-cluster.sh up NAME DIR 4 n4) whose fourth node has no Python tree (its
    software mount missing: a node broken for real), for `invoke fleet`; removed afterwards. After slurm_cluster,
    which installs munge and Slurm's commands where missing: slurm-cluster.sh needs them on this host."""
    import subprocess

    cluster = _cluster(tmp_path_factory, "4", "n4")
    try:
        yield cluster
        left = subprocess.run(["squeue", "-h"], env=cluster.env, capture_output=True, text=True, timeout=60).stdout
        assert not left.strip(), f"the tests left jobs in the cluster's squeue: {left}"
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-cluster.sh"), "down", cluster.name], timeout=300)


@pytest.fixture(scope="session")
def slurm_nodes(base_image, slurm_cluster, tmp_path_factory):
    """scripts/slurm-cluster.sh's two-node Slurm, started once per session under a unique name and
    removed afterwards; its nodes share a folder of this session at the same path (after slurm_cluster, as
    slurm_fleet)."""
    import subprocess

    cluster = _cluster(tmp_path_factory)
    name = cluster.name
    try:
        yield cluster
        left = subprocess.run(["squeue", "-h"], env=cluster.env, capture_output=True, text=True, timeout=60).stdout
        assert not left.strip(), f"the tests left jobs in the cluster's squeue: {left}"
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-cluster.sh"), "down", name], timeout=300)


@pytest.fixture(scope="session")
def base_image(engine, tmp_path_factory) -> str:
    """The local Debian base image, made with debootstrap when missing."""
    from harness import baseimage
    from harness.progress import Progress

    ref = "harness-base:bookworm"
    if not engine.client.image_exists(ref) and shutil.which("debootstrap") is None:
        _unavailable("no base image and no debootstrap to make it")
    baseimage.ensure(engine.client, ref, tmp_path_factory.mktemp("base") / "base.log", Progress())
    return ref


@pytest.fixture(scope="session")
def cpu_image(engine, base_image, tmp_path_factory) -> str:
    """The real CPU stack of matrix-cpu.yaml (torch 2.13.0 CPU + Accelerate 1.15.0), built exactly as
    `invoke matrix` builds it (default wheel store, default options); returns its tag. It is the same
    image the README's first command makes, so it stays in the image cache (`invoke clean --images`)."""
    from harness import images, matrix
    from harness.progress import Progress

    stack = next(s for s in matrix.load(matrix.DEFAULT_CPU_MATRIX).stacks if s.accelerate == "1.15.0")
    built = images.build_all([stack], engine.client, images.BuildOptions(), tmp_path_factory.mktemp("cpu-image"),
                             Progress())[stack.id]
    assert built.ok, built.reason
    return built.tag


@pytest.fixture
def test_images(engine, monkeypatch):
    """Images built during the test are tagged nccl-harness-test/... and labelled with a token of
    this test (through the stack labels every template sets right after FROM, so a failed build's
    intermediate layers carry it too); afterwards every image with that token is removed, and only
    those: other builds on the same engine are left alone."""
    import uuid

    import docker

    from harness import images

    token = uuid.uuid4().hex[:12]
    labels_of = images.labels_of
    monkeypatch.setattr(images, "IMAGE_REPO", TEST_REPO)
    monkeypatch.setattr(images, "labels_of", lambda stack: labels_of(stack) | {TEST_LABEL: token})
    yield token
    client = docker.from_env(timeout=600)  # removing a 10 GB image takes longer than the engine's 10 s
    mine = {"label": f"{TEST_LABEL}={token}"}
    for _ in range(20):  # children before their parents: a parent with a child cannot be removed yet
        made = client.images.list(all=True, filters=mine)
        if not made:
            break
        for image in made:
            try:
                client.images.remove(image.id, force=True)
            except docker.errors.APIError:
                pass
    assert not client.images.list(all=True, filters=mine), \
        "images made by this test are left in the engine"


@pytest.fixture
def write_matrix(tmp_path):
    """Write a matrix file into the test's folder and return its path."""

    def write(text: str, name: str = "matrix.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


class Fault:
    """A real fault at a known point: when rank `rank` starts `phase` (the ranks hold there through the
    workload's test-only --hold-at), send it `sig` through the engine's own Running handle (the first
    `times` times only), then release the ranks of that attempt. Pass it as on_event, and its `start`
    as on_start."""

    def __init__(self, root: Path, rank: int, phase: str, sig: str | None, times: int = 1) -> None:
        self.root, self.rank, self.phase, self.sig, self.times = root, rank, phase, sig, times
        self.running = None
        self.fired = 0

    def start(self, running) -> None:
        self.running = running

    def __call__(self, rank: int, event: dict) -> None:
        if rank != self.rank or event.get("event") != "phase_start" or event.get("phase") != self.phase:
            return
        if self.sig and self.fired < self.times:
            self.running.signal(event["pid"], self.sig)
        self.fired += 1
        for pid_file in self.root.rglob(f"pid-rank{rank}"):  # the attempt this rank writes into
            if pid_file.read_text().strip() == str(event["pid"]):
                (pid_file.parent / "release").touch()


# A terminal starts its foreground job with SIGINT at its default. A suite started from a background job
# (`./scripts/test.sh &`, nohup, some CI runners) inherits SIGINT ignored, and so would every child: a
# Python started with SIGINT ignored never installs its KeyboardInterrupt handler, so the Ctrl-C of
# interrupt_when did nothing and 3 Ctrl-C tests failed that way on a fresh clone (issue 22). Popen's
# restore_signals resets SIGPIPE, SIGXFZ and SIGXFSZ only, and preexec_fn is unsafe with threads, so the
# child goes through this exec: dispositions set here (default, or ignored) survive execvp.
_SIGNALS_THEN_EXEC = ("import os, signal, sys\n"
                      "for name in sys.argv[1].split(','):\n"
                      "    signal.signal(signal.Signals[name], signal.SIG_DFL)\n"
                      "for name in filter(None, sys.argv[2].split(',')):\n"
                      "    signal.signal(signal.Signals[name], signal.SIG_IGN)\n"
                      "os.execvp(sys.argv[3], sys.argv[3:])\n")


def foreground(argv: list[str], ignored: tuple[str, ...] = ()) -> list[str]:
    """`argv` started as a terminal's foreground job: SIGINT (and SIGTERM, SIGHUP) at their defaults
    whatever this process inherited, except the signals `ignored` (as `nohup` ignores SIGHUP)."""
    import sys

    reset = ",".join(s for s in ("SIGINT", "SIGTERM", "SIGHUP") if s not in ignored)
    return [sys.executable, "-c", _SIGNALS_THEN_EXEC, reset, ",".join(ignored), *argv]


def interrupt_when(argv: list[str], ready, settle: float, what: str, timeout: float = 300, sig: int | None = None,
                   env: dict[str, str] | None = None) -> tuple[int, str]:
    """Start a command as a terminal's foreground job, wait until `ready()` (asserting it still runs), let it
    settle, send one SIGINT as a terminal's Ctrl-C would (or `sig`), and return its exit code and output."""
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(foreground(argv), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, what
            time.sleep(0.1)
        time.sleep(settle)
        proc.send_signal(signal.SIGINT if sig is None else sig)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, output


def pytest_collection_modifyitems(config, items):
    """Fast tests first: anything that needs an engine (Docker or Slurm) runs after the pure ones."""
    items.sort(key=lambda item: any(item.get_closest_marker(m) is not None for m in ("engine", "slurm")))
