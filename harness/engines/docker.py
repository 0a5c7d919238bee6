"""The one place that talks to the Docker engine (through the Docker SDK for Python). Everything it
creates carries the harness label, so leftovers can always be found and removed."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import docker
import docker.errors

from .. import launch as launch_mod
from .. import owner, proc
from ..baseimage import LOCAL_BASES
from ..errors import BuildFailed, InfraError
from ..workload.fingerprint import relevant_env
from .base import CellSpec, Check
from .container import ContainerConfig, container_config

if TYPE_CHECKING:
    from ..matrix import Cell, Matrix
    from ..progress import Progress

LABEL = "io.nccl-harness"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
LABEL_RUN = f"{LABEL}.run"
LABEL_CELL = f"{LABEL}.cell"
LABEL_OWNER = f"{LABEL}.owner"  # the harness that started the container (owner.Owner.marker)


def _owned(labels: dict[str, str]) -> dict[str, str]:
    """A container's labels with the harness's own, the owner included, and the watchdog that removes it
    if this harness dies before it does (started here, before the container exists)."""
    owner.watch_over(DockerEngine.name)
    return {LABEL: "cell", **labels, LABEL_OWNER: owner.current().marker}


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    output: str
    timed_out: bool


class DockerEngine:
    name = "docker"

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client

    @classmethod
    def connect(cls, timeout: float = 10) -> "DockerEngine":
        """Connect or raise InfraError with the way out."""
        try:
            client = docker.from_env(timeout=timeout)
            client.ping()
        except docker.errors.DockerException as exc:
            raise InfraError(
                f"the Docker engine is not reachable ({_short(exc)}). Fix: start it (on Debian as root: "
                "scripts/setup.sh installs docker.io and starts dockerd), or set DOCKER_HOST to a running engine."
            ) from None
        return cls(client)

    def version(self) -> dict:
        return self.client.version()

    def image_exists(self, ref: str) -> bool:
        try:
            self.client.images.get(ref)
            return True
        except docker.errors.ImageNotFound:
            return False

    def image_labels(self, ref: str) -> dict[str, str]:
        return self.client.images.get(ref).labels or {}

    def remove_image(self, ref: str) -> None:
        try:
            self.client.images.remove(ref, force=True)
        except docker.errors.ImageNotFound:
            pass

    def build(
        self,
        context: Path,
        tag: str,
        *,
        labels: dict[str, str],
        buildargs: dict[str, str],
        log: Path,
        on_line: Callable[[str], None] = lambda _: None,
        timeout: float = 3600,
        nocache: bool = False,
    ) -> str:
        """Build `context` into `tag`, streaming the engine's log to `log`; returns the image id."""
        image_id = None
        last: list[str] = []
        with open(log, "a") as sink:
            try:
                stream = self.client.api.build(
                    path=str(context),
                    tag=tag,
                    labels={LABEL: "image", **labels},
                    buildargs=buildargs,
                    rm=True,
                    forcerm=True,
                    decode=True,
                    timeout=timeout,
                    pull=False,
                    nocache=nocache,
                )
                for chunk in stream:
                    if "stream" in chunk:
                        text = chunk["stream"]
                        sink.write(text)
                        sink.flush()
                        for line in text.splitlines():
                            if line.strip():
                                last = (last + [line])[-20:]
                                if line.startswith("Step "):
                                    on_line(line.strip())
                    if "error" in chunk:
                        sink.write(f"\nERROR: {chunk['error']}\n")
                        raise BuildFailed(_key_line(chunk["error"], last))
                    if "aux" in chunk and "ID" in chunk["aux"]:
                        image_id = chunk["aux"]["ID"]
            except docker.errors.APIError as exc:
                sink.write(f"\nERROR: {exc}\n")
                raise BuildFailed(_short(exc)) from None
            except docker.errors.DockerException as exc:
                sink.write(f"\nERROR: {exc}\n")
                raise BuildFailed(_short(exc)) from None
        if not self.image_exists(tag):
            raise BuildFailed("the engine finished without producing the image")
        return image_id or self.client.images.get(tag).id

    def import_rootfs(self, tarball: Path, ref: str, labels: dict[str, str]) -> None:
        repo, _, tag = ref.partition(":")
        changes = [f'LABEL {k}="{v}"' for k, v in {LABEL: "base", **labels}.items()]
        self.client.api.import_image_from_file(str(tarball), repository=repo, tag=tag or "latest", changes=changes)
        if not self.image_exists(ref):
            raise InfraError(f"importing {tarball} as {ref} produced no image. Fix: see the engine's log; is the disk full?")

    @contextmanager
    def container(self, image: str, command: list[str], *, labels: dict[str, str], name: str | None = None,
                  **kwargs) -> Iterator["docker.models.containers.Container"]:
        """A named, labelled container that is removed on every path out, Ctrl-C included."""
        name = name or f"nccl-harness-{uuid.uuid4().hex[:12]}"
        container = self.client.containers.create(image, command, name=name, labels=_owned(labels), **kwargs)
        try:
            yield container
        finally:
            self.remove_container(name)

    def remove_for_sure(self, name: str) -> None:
        """Remove a container even while the user keeps pressing Ctrl-C: a second Ctrl-C stops the
        harness at once, but never before its container is gone."""
        while True:
            try:
                self.remove_container(name)
                return
            except KeyboardInterrupt:
                continue

    def remove_container(self, name: str) -> None:
        try:
            self.client.api.remove_container(name, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def run_once(self, image: str, command: list[str], *, timeout: float = 120, labels: dict[str, str] | None = None,
                 **kwargs) -> RunResult:
        """Run a short command to completion (or the timeout) and return its exit code and output."""
        with self.container(image, command, labels=labels or {}, **kwargs) as container:
            container.start()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                container.reload()
                if container.status == "exited":
                    code = container.attrs["State"]["ExitCode"]
                    return RunResult(code, container.logs().decode(errors="replace"), False)
                time.sleep(0.2)
            container.kill()
            return RunResult(None, container.logs().decode(errors="replace"), True)

    @contextmanager
    def start(self, spec: "CellSpec") -> Iterator[DockerRunning]:
        """Start the cell's container with what NCCL needs in containers; removed on every path out."""
        config = container_config(spec)
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        name = f"nccl-harness-{spec.run_id}-{uuid.uuid4().hex[:8]}"
        labels = {LABEL_RUN: spec.run_id, LABEL_CELL: spec.cell_id, f"{LABEL}.attempt": str(spec.attempt)}
        try:
            container = self.client.containers.create(
                config.image, list(config.command), name=name, labels=_owned(labels), **config.sdk_kwargs()
            )
            container.start()
        except docker.errors.APIError as exc:
            self.remove_container(name)
            text = _short(exc)
            if spec.gpus and ("could not select device driver" in text or "nvidia" in text.lower()):
                raise InfraError(f"this Docker engine cannot give containers GPUs ({text}). {NVIDIA_HINT}") from None
            if "rlimit" in text:
                raise InfraError(
                    f"the engine may not grant the container unlimited memlock, which NCCL needs ({text}). "
                    "Fix: raise dockerd's own limit (systemd: LimitMEMLOCK=infinity in docker.service, then restart it)."
                ) from None
            raise InfraError(f"the engine could not start the cell's container ({text}).") from None
        try:
            yield DockerRunning(self, container)
        finally:
            self.remove_for_sure(name)

    # ------------------------------------------------------------ the engine interface (engines/base.py)
    builds_images = True

    @property
    def builder(self) -> "DockerEngine":
        """The engine that builds the cells' images (the slurm engine's with a container node runtime too)."""
        return self

    def facts(self) -> dict:
        try:
            version, details = self.client.version(), self.client.info()
        except docker.errors.DockerException:
            return {"name": self.name}
        return {"name": self.name, "version": version.get("Version"), "api": version.get("ApiVersion"),
                "runtimes": sorted(details.get("Runtimes", {}))}

    def check_results(self, run: Path, progress: "Progress") -> None:
        return None  # the containers run on this machine, the run folder mounted into them

    def preflight(self, progress: "Progress") -> None:
        disk = self.disk_check()
        if not disk.ok:
            if disk.blocking:
                raise InfraError(f"disk for images: {disk.detail}. Fix: {disk.fix}.")
            progress.say(f"warning: disk for images: {disk.detail} ({disk.fix})")

    def cells(self, m: "Matrix", selected: list["Cell"], progress: "Progress") -> list["Cell"]:
        return selected

    def image_id(self, tag: str) -> str:
        return self.client.images.get(tag).id

    def inherited_env(self, image: str) -> dict[str, str]:
        """The image's own ENV (NCCL_VERSION, CUDA_VERSION, a base image's NCCL_* settings...); {} before
        there is an image."""
        if not image:
            return {}
        try:
            pairs = self.client.images.get(image).attrs.get("Config", {}).get("Env") or []
        except docker.errors.DockerException:
            return {}
        return relevant_env(dict(p.split("=", 1) for p in pairs if "=" in p))

    def launch(self, cell: "Cell", m: "Matrix", *, ranks: int, out: Path, extra_args: tuple[str, ...] = (),
               inherited_env: dict[str, str] | None = None, control: bool = False) -> launch_mod.Launch:
        # inside the container: the image's workload (and control, beside it: images/_install.j2 copies the
        # folder), the results folder mounted at /out, its own network
        if control:
            return launch_mod.control_launch(cell, m, ranks=ranks)
        return launch_mod.launch(cell, m, ranks=ranks, extra_args=extra_args, inherited_env=inherited_env)

    def equivalent(self, spec: CellSpec) -> str:
        return container_config(spec).docker_run()

    def checks(self, gpus: tuple[str, ...], results_dir: Path | None = None) -> list[Check]:
        version, info = self.client.version(), self.client.info()
        runtimes = sorted(info.get("Runtimes", {}))
        has_nvidia = "nvidia" in runtimes
        checks = [
            Check("Docker engine", True, f"{version.get('Version')} (API {version.get('ApiVersion')})"),
            Check("NVIDIA runtime", has_nvidia or not gpus,
                  ", ".join(runtimes) + ("" if has_nvidia else " (no nvidia: GPU cells cannot run in containers"
                                         + ("" if gpus else "; not needed for CPU cells") + ")"),
                  "install the NVIDIA Container Toolkit and run nvidia-ctk runtime configure --runtime=docker",
                  blocking=bool(gpus)),
            self.disk_check(info),
        ]
        return checks + self._container_view(gpus)

    def disk_check(self, info: dict | None = None) -> Check:
        root = (info or self.client.info()).get("DockerRootDir", "/var/lib/docker")
        try:
            free = shutil.disk_usage(root).free
        except OSError:
            return Check("disk for images", False, f"cannot read {root}", blocking=False)
        return Check("disk for images", free >= 20 << 30, f"{free / (1 << 30):.0f} GiB free in {root}",
                     "free space: a CUDA stack's image takes 5 to 10 GB (invoke clean --images removes the harness's)",
                     blocking=free < 5 << 30)

    def _container_view(self, gpus: tuple[str, ...]) -> list[Check]:
        """/dev/shm and memlock (and GPUs) as a cell's container sees them, from a probe container with
        the cell's own settings (container_config)."""
        image = next((ref for ref in LOCAL_BASES if self.image_exists(ref)), None)
        if image is None:
            return [Check("container view", False, "no local image to start a test container from",
                          "run `invoke base-image` (or scripts/setup.sh)", blocking=False)]
        script = "df -B1 /dev/shm | tail -1; ulimit -l" + ("; nvidia-smi -L" if gpus else "")
        # nvidia-smi needs the utility capability besides the cells' compute one
        probe = ContainerConfig(image, ("sh", "-c", script), gpus=gpus, gpu_capabilities=("gpu", "utility"))
        try:
            result = self.run_once(probe.image, list(probe.command), timeout=60,
                                   labels={f"{LABEL}.doctor": "1"}, **probe.sdk_kwargs())
        except Exception as exc:  # noqa: BLE001 - the doctor reports, never crashes
            return [Check("test container", False, str(exc)[:300],
                          "for GPUs: install the NVIDIA Container Toolkit and restart dockerd" if gpus else "check the engine")]
        lines = result.output.strip().splitlines()
        checks = []
        try:
            shm = int(lines[0].split()[1])
            checks.append(Check("/dev/shm in a container", shm >= 1 << 30, f"{shm / (1 << 30):.1f} GiB (ipc=host)",
                                "give the host a larger /dev/shm (NCCL's SHM transport needs it)", blocking=False))
            memlock = lines[1].strip()
            shown = memlock if memlock == "unlimited" else f"{memlock} KiB"  # what `ulimit -l` counts in
            checks.append(Check("memlock in a container", memlock == "unlimited" or not gpus, shown,
                                "raise dockerd's LimitMEMLOCK to infinity", blocking=bool(gpus)))
        except (IndexError, ValueError):
            checks.append(Check("test container", result.exit_code == 0, result.output.strip()[-300:]))
        if gpus:
            seen = [line for line in lines if line.startswith("GPU ")]
            checks.append(Check("GPUs inside a container", len(seen) == len(gpus), f"{len(seen)} of {len(gpus)} visible",
                                "install the NVIDIA Container Toolkit (nvidia-ctk runtime configure --runtime=docker)"))
        return checks

    def remove_built_images(self) -> int:
        """Remove every image the harness built (not the base images); returns how many."""
        built = self.client.images.list(filters={"label": f"{LABEL}.stack"})
        for image in built:
            self.remove_image(image.id)
        return len(built)

    def leftovers(self, label_filter: str = f"{LABEL}=cell") -> list[str]:
        """Names of the harness's cell containers (running or not), or of those `label_filter` selects.
        Cells only by default: containers inherit their image's labels, so the two-node Slurm's containers
        (scripts/slurm-cluster.sh, built on the base image: io.nccl-harness=base) matched the bare key
        and read as cells a test had left behind."""
        return [name for name, _ in self.labelled(label_filter)]

    def labelled(self, label_filter: str = LABEL) -> list[tuple[str, dict[str, str]]]:
        """(name, labels) of every container (running or not) that carries the harness label, from one
        list call: the SDK's containers.list() inspects each one after listing, and a container removed
        in between (another harness's cell ending) was a NotFound traceback in `invoke list` (seen in CI)."""
        return [((c.get("Names") or ["/" + c["Id"][:12]])[0].lstrip("/"), c.get("Labels") or {})
                for c in self.client.api.containers(all=True, filters={"label": label_filter})]


NVIDIA_HINT = (
    "Fix: install the NVIDIA Container Toolkit and configure Docker for it "
    "(nvidia-ctk runtime configure --runtime=docker, then restart dockerd), or run with --engine host."
)


class DockerRunning:
    """A started cell container; every call is safe after the container has gone."""

    def __init__(self, engine: "DockerEngine", container) -> None:
        self.engine, self.container = engine, container

    def poll(self) -> int | None:
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return -1
        if self.container.status in ("exited", "dead"):
            return int(self.container.attrs["State"]["ExitCode"])
        return None

    def signal(self, pid: int, signame: str) -> None:
        # The pid is the rank's own (container namespace); dash's builtin kill needs no procps.
        self.container.exec_run(["sh", "-c", f"kill -{signame} {int(pid)}"])

    def native_dump(self, pid: int) -> str:
        try:
            code, output = self.container.exec_run(["py-spy", "dump", "--nonblocking", "--pid", str(int(pid))])
        except docker.errors.APIError:
            return ""
        if code in (126, 127) or b"executable file not found" in output:
            return ""  # the image has no py-spy
        return output.decode(errors="replace")

    def process_list(self) -> str:
        try:
            top = self.container.top(ps_args="-o pid,stat,etime,args")
        except docker.errors.APIError as exc:
            return f"(docker top failed: {_short(exc)})"
        return "\n".join(" ".join(row) for row in [top.get("Titles", [])] + top.get("Processes", []))

    def dump_ranks(self, pids: dict[int, int]) -> dict[str, str] | None:
        return None  # every rank is in this container: signal() and native_dump() reach it

    def gone(self, pids: dict[int, int]) -> set[int]:
        """Ranks whose /proc entry in the container is missing or a zombie; none while the container
        cannot be asked (it has exited: poll() says so), and none for an answer that is not /proc's (an
        image without cat)."""
        found = set()
        for rank, pid in pids.items():
            try:
                code, output = self.container.exec_run(["cat", f"/proc/{int(pid)}/stat"])
            except docker.errors.APIError:
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
            return self.container.logs(tail=lines).decode(errors="replace")
        except docker.errors.APIError:
            return ""

    def limit_cpus(self, cpus: float) -> None:
        """Cap the running container's CPU time (docker update --cpus): a real slowdown, for tests and
        benchmarks that must tell a real drop from noise."""
        self.container.update(cpu_period=100_000, cpu_quota=int(cpus * 100_000))

    def lift_cpu_limit(self) -> None:
        """Undo limit_cpus (a quota of -1 is no quota)."""
        self.container.update(cpu_period=100_000, cpu_quota=-1)

    def kill(self) -> None:
        try:
            self.container.kill()
        except docker.errors.APIError:
            pass

    def leftovers(self) -> list[str]:
        return self.engine.leftovers(f"{LABEL_CELL}={self.container.labels.get(LABEL_CELL, '')}")


def _short(exc: Exception) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if len(text) < 300 else text[:300] + "..."


def _key_line(error: str, last: list[str]) -> str:
    """The engine's error plus the most telling line of the failed step's output."""
    telling = [l for l in last if any(w in l for w in ("ERROR", "Error", "error:", "No matching", "Could not"))]
    detail = telling[-1].strip() if telling else ""
    error = _ANSI.sub("", error.strip())
    detail = _ANSI.sub("", detail)
    return f"{error} ({detail})" if detail and detail not in error else error
