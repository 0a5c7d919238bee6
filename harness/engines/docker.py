"""The docker engine: one container per attempt of a cell, started through this host's Docker engine
(dockerclient.py makes every SDK call), with the settings NCCL needs in containers (container.py)."""

from __future__ import annotations

import re
import shlex
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import launch as launch_mod
from .. import proc
from ..baseimage import LOCAL_BASES
from ..errors import InfraError
from ..imagefacts import IMAGE_PYTHON
from ..kinds import GPU_APIS, GpuApi
from ..workload.fingerprint import relevant_env
from .base import CellSpec, Check, RemoteDumps, Stop
from .collector import NATIVE_TOOLS, native_argv
from .container import GPU_API_NAMES, ContainerConfig, cdi_device, container_config, gpu_text
from .dockerclient import LABEL, LABEL_CELL, LABEL_OWNER, LABEL_RUN, Container, DockerClient, DockerFailure, product

if TYPE_CHECKING:
    from ..matrix import Cell, Matrix
    from ..progress import Progress

__all__ = ["DockerEngine", "DockerRunning", "GpuProbe", "GPU_API_FIXES", "PODMAN_GPU_API_FIXES", "gpu_api_fix", "image_env",
           "LABEL", "LABEL_CELL", "LABEL_OWNER", "LABEL_RUN"]

# What makes each way a container gets GPUs (kinds.GpuApi) work.
GPU_API_FIXES: dict[GpuApi, str] = {
    # CDI is opt-in from Docker 25 (moby#45134) and on by default from 28.2 (moby#49963)
    "cdi": ("`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` and, for Docker 25 to 28.1, enable CDI in "
            '/etc/docker/daemon.json (`{"features": {"cdi": true}}`), then restart dockerd'),
    "nvidia": ("install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker`, then "
               "restart dockerd"),
}
CDI_SINCE = 25  # Docker's first major version with CDI: an older engine answers `could not select device driver "cdi"`
# What an engine answers for GPUs it cannot give: `could not select device driver "" with capabilities: [[gpu]]` (no
# NVIDIA runtime; Docker 20.10 here, and the GPU machines' 26.1) and `... driver "cdi" ...` (Docker 20.10 here, which
# has no CDI); `unresolvable CDI devices nvidia.com/gpu=0` (CDI on, no spec for the device).
GPU_REFUSALS = ("could not select device driver", "cdi", "nvidia")
# Counts the GPUs' device nodes inside with sh alone (a glob that matches nothing stays itself: -e is false).
COUNT_GPU_NODES = 'n=0; for f in /dev/nvidia[0-9]*; do [ -e "$f" ] && n=$((n+1)); done; echo "gpu-nodes $n"'


# podman reads CDI specs itself (4.1 and later; NVIDIA's container toolkit guide: "For Podman, NVIDIA
# recommends using CDI"), and has no NVIDIA runtime of Docker's kind to configure.
PODMAN_GPU_API_FIXES: dict[GpuApi, str] = {
    "cdi": "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (podman reads CDI specs itself: nothing to enable)",
    "nvidia": "podman has no NVIDIA runtime to configure: give the GPUs through CDI (--gpu-api cdi)",
}


def gpu_api_fix(api: GpuApi, version: Mapping[str, Any] | None = None) -> str:
    """What makes `api` work on the engine whose GET /version answered `version`: podman's own way; for
    CDI on a Docker older than 25, first a newer one."""
    version = version or {}
    if product(version) == "podman":
        return PODMAN_GPU_API_FIXES[api]
    engine_version = str(version.get("Version") or "")
    major = re.match(r"(\d+)\.", engine_version)
    if api == "cdi" and major and int(major.group(1)) < CDI_SINCE:
        return f"upgrade Docker to 25 or later (this engine is {engine_version}: CDI came in 25), then " + GPU_API_FIXES[api]
    return GPU_API_FIXES[api]


# runc's "error setting rlimit type N": the resource numbers of Linux's setrlimit(2) (asm-generic/resource.h).
# Seen: type 8 where the engine may not grant the unlimited memlock a GPU cell asks for; types 7 and 6 from
# podman 4.3's Docker-compatible API, whose default ulimits for containers (nofile 1048576, nproc) exceeded
# the service's own hard limits on a VM that may not raise them (a CPU cell, which asks for no limit at all).
# crun (podman's default runtime) names the limit instead: "crun: setrlimit `RLIMIT_NOFILE`: Operation not
# permitted" (podman 4.3 here, the same VM).
RLIMITS = {6: "nproc (processes)", 7: "nofile (open files)", 8: "memlock (locked memory)"}
_RLIMIT_NAMES = {"NPROC": 6, "NOFILE": 7, "MEMLOCK": 8}


def rlimit_refused(text: str) -> tuple[str, str] | None:
    """(what happened, fix) when the engine could not set one of the container's resource limits."""
    if "rlimit" not in text.lower():
        return None
    number = re.search(r"rlimit type (\d+)", text)
    named = re.search(r"RLIMIT_([A-Z]+)", text)
    kind = int(number.group(1)) if number else _RLIMIT_NAMES.get(named.group(1), 8) if named else 8
    if kind == 8:
        return ("the engine may not grant the container unlimited memlock, which NCCL needs",
                "raise the engine's own limit (systemd: LimitMEMLOCK=infinity in docker.service, then restart it)")
    name = RLIMITS.get(kind, f"resource {kind}")
    return (f"the engine may not set the container's {name} limit it asks for: more than the engine's own hard limit",
            "raise the engine's own limit (systemd: LimitNOFILE=/LimitNPROC= in its service, then restart it), or lower "
            "the engine's default ulimits for containers (podman: default_ulimits in containers.conf; dockerd: "
            "default-ulimits in daemon.json)")


@dataclass(frozen=True)
class GpuProbe:
    """One way of giving a container the GPUs, tried: whether the container started and showed every GPU's
    device node, and what was seen (the engine's own refusal, or how many nodes)."""

    api: GpuApi
    ok: bool
    detail: str


class DockerEngine:
    """Runs each attempt in a container of the cell's image, on this host's Docker engine."""

    name = "docker"
    builds_images = True
    shares_gpus = True  # the containers run on this machine and are given its GPUs

    def __init__(self, client: DockerClient) -> None:
        self.client = client
        self._stop = Stop()

    @classmethod
    def connect(cls, timeout: int = 10) -> DockerEngine:
        """Connect or raise InfraError with the way out."""
        return cls(DockerClient.connect(timeout=timeout))

    @property
    def builder(self) -> DockerClient:
        """The client that builds the cells' images: this engine's own."""
        return self.client

    def concurrent_cells(self, jobs: int) -> int:
        return 1  # the cells share this machine's GPUs: together they would measure each other

    def interrupt(self) -> None:
        self._stop.set()

    def facts(self) -> dict[str, Any]:
        found = self.client.facts()
        return {"name": self.name} if found is None else {"name": self.name, **found}

    def check_results(self, run: Path, progress: Progress) -> None:
        return None  # the containers run on this machine, the run folder mounted into them

    def preflight(self, progress: Progress) -> None:
        disk = self.disk_check()
        if not disk.ok:
            if disk.blocking:
                raise InfraError(f"disk for images: {disk.detail}. Fix: {disk.fix}.")
            progress.say(f"warning: disk for images: {disk.detail} ({disk.fix})")

    def cells(self, m: Matrix, selected: list[Cell], progress: Progress) -> list[Cell]:
        return selected

    def image_id(self, tag: str) -> str:
        return self.client.image_id(tag)

    def inherited_env(self, image: str) -> dict[str, str]:
        return image_env(self.client, image)

    def launch(self, cell: Cell, m: Matrix, *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> launch_mod.Launch:
        # inside the container: the image's workload (and control, beside it: images/_install.j2 copies the
        # folder), the results folder mounted at /out, its own network
        python = launch_mod.container_python(cell)
        if control:
            return launch_mod.control_launch(cell, m, ranks=ranks, python=python)
        return launch_mod.launch(cell, m, ranks=ranks, python=python, extra_args=extra_args, inherited_env=inherited_env)

    def equivalent(self, spec: CellSpec) -> str:
        return container_config(spec).docker_run()

    @contextmanager
    def start(self, spec: CellSpec) -> Iterator[DockerRunning]:
        """Start the cell's container with what NCCL needs in containers; removed on every path out."""
        config = container_config(spec)
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        name = f"nccl-harness-{spec.run_id}-{uuid.uuid4().hex[:8]}"
        labels = {LABEL_RUN: spec.run_id, LABEL_CELL: spec.cell_id, f"{LABEL}.attempt": str(spec.attempt)}
        try:
            container = self.client.start_container(config.image, list(config.command), name=name, labels=labels,
                                                    **config.sdk_kwargs())
        except DockerFailure as exc:
            text = str(exc)
            if spec.gpus and any(word in text.lower() for word in GPU_REFUSALS):
                used, version = config.gpu_api, self.client.version()
                other = next(api for api in GPU_APIS if api != used)
                raise InfraError(
                    f"this Docker engine refused the cell's GPUs through {gpu_text(used, spec.gpus)}: {text}. "
                    f"Fix: {gpu_api_fix(used, version)}; or give them through {GPU_API_NAMES[other]} with --gpu-api "
                    f"{other} ({gpu_api_fix(other, version)}); or run with --engine host."
                ) from None
            refused = rlimit_refused(text)
            if refused:
                raise InfraError(f"{refused[0]} ({text}). Fix: {refused[1]}.") from None
            raise InfraError(f"the engine could not start the cell's container ({text}).") from None
        try:
            yield DockerRunning(self.client, container, self._stop)
        finally:
            self.client.remove_for_sure(name)

    # ------------------------------------------------------------------------------- invoke doctor
    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None, gpu_api: GpuApi | None = None) -> list[Check]:
        version, info = self.client.version(), self.client.info()
        runtimes = ", ".join(sorted(info.get("Runtimes", {})))
        podman = product(version) == "podman"
        said = f"podman {version.get('Version')} through its Docker-compatible API" if podman else version.get("Version")
        checks = [Check("Docker engine", True, f"{said} (API {version.get('ApiVersion')}; runtimes: {runtimes})")]
        works: GpuApi | None = None
        if gpus:
            probes = self.probe_gpus(gpus, None, (gpu_api,) if gpu_api else GPU_APIS, first=False)
            works = next((p.api for p in probes if p.ok), None)
            checks.append(self._gpu_check(gpus, probes, version))
        else:
            checks.append(Check("GPUs to containers", True, "not probed (no --gpus; CPU cells need none)"))
        return checks + [self.disk_check(info)] + self._container_view(gpus, works)

    def _gpu_check(self, gpus: tuple[str, ...], probes: list[GpuProbe], version: Mapping[str, Any]) -> Check:
        """Which way gives a container the GPUs; when none does, each way's refusal and its fix."""
        said = "; ".join(f"{gpu_text(p.api, gpus)}: {p.detail}" for p in probes)
        if any(p.ok for p in probes):
            first = next(p for p in probes if p.ok)
            return Check("GPUs to containers", True, f"through {GPU_API_NAMES[first.api]}; {said}")
        fix = "; or ".join(f"for {GPU_API_NAMES[p.api]}: {gpu_api_fix(p.api, version)}" for p in probes)
        return Check("GPUs to containers", False, f"neither way works: {said}", fix + "; or run with --engine host")

    def gpu_api(self, gpus: tuple[str, ...], image: str, given: GpuApi | None = None) -> GpuApi | None:
        """How this run's containers get `gpus`: `given` (--gpu-api), else the first way that a probe container
        (the cell container's own settings, in `image` when it exists, else a local base image) starts with and
        shows every GPU's device node in: CDI first (NVIDIA's recommended way), then the NVIDIA runtime. None
        for a CPU-only run; InfraError naming each way's refusal and its fix when none works."""
        if not gpus:
            return None
        if given is not None:
            return given
        probes = self.probe_gpus(gpus, image, GPU_APIS, first=True)
        found = next((p.api for p in probes if p.ok), None)
        if found is not None:
            return found
        version = self.client.version()
        said = "; ".join(f"through {gpu_text(p.api, gpus)}: {p.detail}" for p in probes)
        fixes = "; or ".join(f"for {GPU_API_NAMES[p.api]}, {gpu_api_fix(p.api, version)}" for p in probes)
        raise InfraError(f"a probe container on this Docker engine got GPU(s) {','.join(gpus)} neither way: {said}. "
                         f"Fix: {fixes}; or run with --engine host.")

    def probe_gpus(self, gpus: tuple[str, ...], image: str | None, apis: tuple[GpuApi, ...], first: bool) -> list[GpuProbe]:
        """Start a short container with the GPUs through each of `apis` in turn (until one works, with
        `first`) and count the GPUs' device nodes it sees."""
        ref = self.probe_image(image)
        if ref is None:
            raise InfraError("no local image to start the GPU probe container from. Fix: run `invoke base-image` "
                             "(or scripts/setup.sh), or pass --gpu-api cdi|nvidia.")
        found: list[GpuProbe] = []
        for api in apis:
            found.append(self._probe(ContainerConfig(ref, ("sh", "-c", COUNT_GPU_NODES), gpus=gpus, gpu_api=api)))
            if first and found[-1].ok:
                break
        return found

    def probe_image(self, image: str | None = None) -> str | None:
        """An image to start a probe container from: the run's, else a local base, else any image the harness
        built (a GPU host that has no base image, only the user's own and its thin layer); None when none exists."""
        found = next((ref for ref in (*((image,) if image else ()), *LOCAL_BASES) if self.client.image_exists(ref)), None)
        return found or next(iter(self.client.built_images()), None)

    def _probe(self, config: ContainerConfig) -> GpuProbe:
        try:
            result = self.client.run_once(config.image, list(config.command), timeout=60,
                                          labels={f"{LABEL}.gpu-probe": config.gpu_api}, **config.sdk_kwargs())
        except DockerFailure as exc:
            return GpuProbe(config.gpu_api, False, f"refused: {exc}")
        seen = re.search(r"gpu-nodes (\d+)", result.output)
        count = int(seen.group(1)) if seen else 0
        if result.exit_code != 0 or seen is None:
            return GpuProbe(config.gpu_api, False, f"the probe container ended with {result.exit_code}: "
                                                   f"{result.output.strip()[-200:]}")
        shown = ", ".join(cdi_device(g) for g in config.gpus) if config.gpu_api == "cdi" else ",".join(config.gpus)
        return GpuProbe(config.gpu_api, count >= len(config.gpus),
                        f"{'works' if count >= len(config.gpus) else 'started, but'} ({count} of {len(config.gpus)} "
                        f"GPU device nodes inside for {shown})")

    def disk_check(self, info: dict[str, Any] | None = None) -> Check:
        root = (info or self.client.info()).get("DockerRootDir", "/var/lib/docker")
        try:
            free = shutil.disk_usage(root).free
        except OSError:
            return Check("disk for images", False, f"cannot read {root}", blocking=False)
        return Check("disk for images", free >= 20 << 30, f"{free / (1 << 30):.0f} GiB free in {root}",
                     "free space: a CUDA stack's image takes 5 to 10 GB (invoke clean --images removes the harness's)",
                     blocking=free < 5 << 30)

    def _container_view(self, gpus: tuple[str, ...], gpu_api: GpuApi | None) -> list[Check]:
        """/dev/shm and memlock (and GPUs) as a cell's container sees them, from a probe container with
        the cell's own settings (container_config); the GPUs through the way that works (`gpu_api`), none
        when no way does (the GPU check has said why)."""
        image = self.probe_image()
        if image is None:
            return [Check("container view", False, "no local image to start a test container from",
                          "run `invoke base-image` (or scripts/setup.sh)", blocking=False)]
        inside = gpus if gpu_api else ()
        script = "df -B1 /dev/shm | tail -1; ulimit -l" + ("; nvidia-smi -L" if inside else "")
        # nvidia-smi needs the utility capability besides the cells' compute one (the NVIDIA runtime's; a CDI
        # device brings what its spec mounts)
        probe = ContainerConfig(image, ("sh", "-c", script), gpus=inside, gpu_api=gpu_api or "nvidia",
                                gpu_capabilities=("gpu", "utility"))
        try:
            result = self.client.run_once(probe.image, list(probe.command), timeout=60,
                                          labels={f"{LABEL}.doctor": "1"}, **probe.sdk_kwargs())
        except Exception as exc:  # noqa: BLE001 - the doctor reports, never crashes
            refused = rlimit_refused(str(exc))
            return [Check("test container", False, str(exc)[:300],
                          refused[1] if refused else f"for GPUs: {gpu_api_fix(gpu_api)}" if gpu_api else
                          "check the engine: `docker run --rm IMAGE true` should work")]
        lines = result.output.strip().splitlines()
        checks = []
        try:
            shm = int(lines[0].split()[1])
            checks.append(Check("/dev/shm in a container", shm >= 1 << 30, f"{shm / (1 << 30):.1f} GiB (ipc=host)",
                                "give the host a larger /dev/shm (NCCL's SHM transport needs it)", blocking=False))
            memlock = lines[1].strip()
            shown = memlock if memlock == "unlimited" else f"{memlock} KiB"  # what `ulimit -l` counts in
            checks.append(Check("memlock in a container", memlock == "unlimited" or not inside, shown,
                                "raise dockerd's LimitMEMLOCK to infinity", blocking=bool(inside)))
        except (IndexError, ValueError):
            checks.append(Check("test container", result.exit_code == 0, result.output.strip()[-300:]))
        if inside and gpu_api:
            seen = [line for line in lines if line.startswith("GPU ")]
            checks.append(Check("GPUs inside a container", len(seen) == len(gpus),
                                f"{len(seen)} of {len(gpus)} visible to nvidia-smi -L (through {GPU_API_NAMES[gpu_api]})",
                                gpu_api_fix(gpu_api)))
        return checks


def image_env(client: DockerClient, image: str) -> dict[str, str]:
    """The image's own ENV that a cell starts with (NCCL_VERSION, CUDA_VERSION, a base image's NCCL_*
    settings...), secrets masked; {} before there is an image. The docker engine's, and the slurm
    engine's with a node runtime."""
    return relevant_env(client.image_env(image)) if image else {}


COLLECTOR_SOURCE = Path(__file__).with_name("collector.py")  # as slurmjob.py runs it on the nodes


class DockerRunning:
    """A started cell container; every call is safe after the container has gone."""

    def __init__(self, client: DockerClient, container: Container, stop: Stop | None = None) -> None:
        self.client, self.container = client, container
        self.stop = stop or Stop()

    def poll(self) -> int | None:
        self.stop.check()  # DockerEngine.interrupt: the supervisor takes it as Ctrl-C
        return self.container.exit_code()

    def signal(self, pid: int, signame: str) -> None:
        # The pid is the rank's own (container namespace); dash's builtin kill needs no procps.
        self.container.exec_run(["sh", "-c", f"kill -{signame} {int(pid)}"])

    def native_dump(self, pid: int) -> str:
        try:
            code, output = self.container.exec_run(["py-spy", "dump", "--nonblocking", "--pid", str(int(pid))])
        except DockerFailure:
            return ""
        if code in (126, 127) or b"executable file not found" in output:
            return ""  # the image has no py-spy
        return output.decode(errors="replace")

    def process_list(self) -> str:
        try:
            top = self.container.top(ps_args="-o pid,stat,etime,args")
        except DockerFailure as exc:
            return f"(docker top failed: {exc})"
        return "\n".join(" ".join(row) for row in [top.get("Titles", [])] + top.get("Processes", []))

    def native_stacks(self, pid: int) -> str:
        # the image's own tool, run in the container: it reads the rank's libraries as the rank maps them
        # (from the host, eu-stack names none of a container's frames but libc's; seen here)
        tries = "; ".join(f"if command -v {t} >/dev/null 2>&1; then exec {shlex.join(native_argv(t, int(pid)))}; fi"
                          for t in NATIVE_TOOLS)
        try:
            code, output = self.container.exec_run(["sh", "-c", f"{tries}; exit 127"])
        except DockerFailure:
            return ""
        return "" if code == 127 else output.decode(errors="replace")

    def nccl_ras(self) -> str:
        # in the container's network namespace, with the image's Python: the collector's own client
        run = ("import sys; g = {'__name__': 'collector'}; exec(sys.argv[1], g); "
               "sys.stdout.write(g['nccl_ras']())")
        try:
            code, output = self.container.exec_run([IMAGE_PYTHON, "-c", run, COLLECTOR_SOURCE.read_text()])
        except (DockerFailure, OSError):
            return ""
        return output.decode(errors="replace") if code == 0 else ""

    def dump_ranks(self, pids: dict[int, int]) -> RemoteDumps | None:
        return None  # every rank is in this container: signal(), native_dump() and native_stacks() reach it

    def gone(self, pids: dict[int, int]) -> set[int]:
        """Ranks whose /proc entry in the container is missing or a zombie; none while the container
        cannot be asked (it has exited: poll() says so), and none for an answer that is not /proc's (an
        image without cat)."""
        found = set()
        for rank, pid in pids.items():
            try:
                code, output = self.container.exec_run(["cat", f"/proc/{int(pid)}/stat"])
            except DockerFailure:
                return set()
            text = output.decode(errors="replace")
            if code != 0:
                if "No such file or directory" in text:
                    found.add(rank)
            elif ")" in text and proc.stat_after_command(text)[:1] == ["Z"]:
                found.add(rank)
        return found

    def output_tail(self, lines: int = 80) -> str:
        try:
            return self.container.logs(tail=lines)
        except DockerFailure:
            return ""

    def limit_cpus(self, cpus: float) -> None:
        """Cap the running container's CPU time (docker update --cpus): a real slowdown, for tests and
        benchmarks that must tell a real drop from noise."""
        self.container.cpu_quota(int(cpus * 100_000))

    def lift_cpu_limit(self) -> None:
        """Undo limit_cpus (a quota of -1 is no quota)."""
        self.container.cpu_quota(-1)

    def kill(self) -> None:
        try:
            self.container.kill()
        except DockerFailure:
            pass

    def leftovers(self) -> list[str]:
        return self.client.leftovers(f"{LABEL_CELL}={self.container.labels.get(LABEL_CELL, '')}")
