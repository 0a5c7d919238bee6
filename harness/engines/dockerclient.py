"""The one module that talks to the Docker engine (through the Docker SDK for Python): images (build,
import, inspect, remove) and containers (create, run once, remove, list by label), for the build stage
(images.py, baseimage.py), the docker engine (docker.py), the reaper and the commands. It knows nothing
of cells or engines; everything it creates carries the harness label, so leftovers can always be found
and removed. SDK errors stay here: callers see InfraError, BuildFailed or DockerFailure."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container as SdkContainer

from .. import owner
from ..errors import BuildFailed, InfraError
from ..escape import strip_colours

LABEL = "io.nccl-harness"
LABEL_RUN = f"{LABEL}.run"
LABEL_CELL = f"{LABEL}.cell"
LABEL_OWNER = f"{LABEL}.owner"  # the harness that started the container (owner.Owner.marker)
ENGINE = "docker"  # the watchdog's engine name for containers (owner.watch_over, reaper.reap)


class DockerFailure(Exception):
    """The engine refused or failed a call (the SDK's APIError), its text shortened."""


class ContainerGone(DockerFailure):
    """The container no longer exists (the SDK's NotFound)."""


def _owned(labels: dict[str, str]) -> dict[str, str]:
    """A container's labels with the harness's own, the owner included, and the watchdog that removes it
    if this harness dies before it does (started here, before the container exists)."""
    owner.watch_over(ENGINE)
    return {LABEL: "cell", **labels, LABEL_OWNER: owner.current().marker}


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    output: str
    timed_out: bool


class Container:
    """One container the client created; every call raises DockerFailure (ContainerGone once it is
    removed) instead of the SDK's errors."""

    def __init__(self, sdk: SdkContainer) -> None:
        self._sdk = sdk

    @property
    def name(self) -> str:
        return str(self._sdk.name)

    @property
    def labels(self) -> dict[str, str]:
        return dict(self._sdk.labels or {})

    def exit_code(self) -> int | None:
        """Its main process's exit code once it has exited (-1 once it is gone), else None."""
        try:
            self._sdk.reload()
        except docker.errors.NotFound:
            return -1
        if self._sdk.status in ("exited", "dead"):
            return int(self._sdk.attrs["State"]["ExitCode"])
        return None

    def exec_run(self, argv: list[str]) -> tuple[int, bytes]:
        """Run `argv` in the container: its exit code and merged output."""
        with _failures():
            code, output = self._sdk.exec_run(argv)
        return int(code) if code is not None else -1, output if isinstance(output, bytes) else b"".join(output)

    def top(self, ps_args: str) -> dict[str, Any]:
        """`docker top` with these ps arguments: {"Titles": [...], "Processes": [[...], ...]}."""
        with _failures():
            return dict(self._sdk.top(ps_args=ps_args))

    def logs(self, tail: int | None = None) -> str:
        with _failures():
            raw = self._sdk.logs(tail=tail) if tail is not None else self._sdk.logs()
        return (raw if isinstance(raw, bytes) else b"".join(raw)).decode(errors="replace")

    def cpu_quota(self, quota: int, period: int = 100_000) -> None:
        """docker update --cpus as a quota per period; -1 is no quota."""
        with _failures():
            self._sdk.update(cpu_period=period, cpu_quota=quota)

    def kill(self) -> None:
        with _failures():
            self._sdk.kill()


@contextmanager
def _failures() -> Iterator[None]:
    try:
        yield
    except docker.errors.NotFound as exc:
        raise ContainerGone(short(exc)) from None
    except docker.errors.APIError as exc:
        raise DockerFailure(short(exc)) from None


def product(version: Any) -> str:
    """Which engine answers the Docker API: podman's compatible service names its component "Podman
    Engine" in GET /version (podman 4.3, seen here), dockerd "Engine"."""
    components = version.get("Components") if isinstance(version, dict) else None
    names = [c.get("Name", "") for c in components or [] if isinstance(c, dict)]
    return "podman" if any("podman" in str(n).lower() for n in names) else "docker"


class DockerClient:
    """A connection to one Docker engine."""

    def __init__(self, sdk: docker.DockerClient) -> None:
        self._sdk = sdk

    @classmethod
    def connect(cls, timeout: int = 10) -> DockerClient:
        """Connect or raise InfraError with the way out."""
        try:
            sdk = docker.from_env(timeout=timeout)
            sdk.ping()
        except docker.errors.DockerException as exc:
            raise InfraError(
                f"the Docker engine is not reachable ({short(exc)}). Fix: start it (on Debian as root: "
                "scripts/setup.sh installs docker.io and starts dockerd), or set DOCKER_HOST to a running engine."
            ) from None
        return cls(sdk)

    # ------------------------------------------------------------------------------ the engine itself
    def version(self) -> dict[str, Any]:
        return dict(self._sdk.version())

    def info(self) -> dict[str, Any]:
        return dict(self._sdk.info())

    def facts(self) -> dict[str, Any] | None:
        """Product (docker or podman), version, API version and runtimes; None when the engine does not answer."""
        try:
            version, details = self._sdk.version(), self._sdk.info()
        except docker.errors.DockerException:
            return None
        return {"product": product(version), "version": version.get("Version"), "api": version.get("ApiVersion"),
                "runtimes": sorted(details.get("Runtimes", {}))}

    # ------------------------------------------------------------------------------------------ images
    def image_exists(self, ref: str) -> bool:
        try:
            self._sdk.images.get(ref)
            return True
        except docker.errors.ImageNotFound:
            return False

    def image_labels(self, ref: str) -> dict[str, str]:
        return dict(self._sdk.images.get(ref).labels or {})

    def image_id(self, ref: str) -> str:
        return str(self._sdk.images.get(ref).id)

    def repo_digest(self, ref: str) -> str:
        """The image's reference by registry digest (repo@sha256:...), "" for an image that came from no
        registry (built or imported here)."""
        digests = self._sdk.images.get(ref).attrs.get("RepoDigests") or []
        return str(digests[0]) if digests else ""

    def pull(self, ref: str) -> None:
        """Pull an image from its registry; DockerFailure (the engine's words) when it cannot."""
        try:
            self._sdk.images.pull(ref)
        except docker.errors.DockerException as exc:
            raise DockerFailure(explanation(exc)) from None

    def image_env(self, ref: str) -> dict[str, str]:
        """The image's ENV as a mapping; {} when it cannot be read."""
        try:
            pairs = self._sdk.images.get(ref).attrs.get("Config", {}).get("Env") or []
        except docker.errors.DockerException:
            return {}
        return dict(p.split("=", 1) for p in pairs if "=" in p)

    def remove_image(self, ref: str) -> None:
        try:
            self._sdk.images.remove(ref, force=True)
        except docker.errors.ImageNotFound:
            pass

    def built_images(self) -> list[str]:
        """The ids of every image the harness built (each carries its stack's label)."""
        return [str(image.id) for image in self._sdk.images.list(filters={"label": f"{LABEL}.stack"}) if image.id]

    def remove_built_images(self) -> int:
        """Remove every image the harness built (not the base images); returns how many."""
        built = self._sdk.images.list(filters={"label": f"{LABEL}.stack"})
        for image in built:
            if image.id:
                self.remove_image(image.id)
        return len(built)

    def build(
        self,
        context: Path,
        tag: str,
        *,
        labels: dict[str, str],
        buildargs: dict[str, str],
        log: Path,
        on_line: Callable[[str], None] = lambda _: None,
        timeout: int = 3600,
        nocache: bool = False,
    ) -> str:
        """Build `context` into `tag`, streaming the engine's log to `log`; returns the image id."""
        image_id = None
        last: list[str] = []
        with open(log, "a") as sink:
            try:
                stream = self._sdk.api.build(
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
                raise BuildFailed(short(exc)) from None
            except docker.errors.DockerException as exc:
                sink.write(f"\nERROR: {exc}\n")
                raise BuildFailed(short(exc)) from None
        if not self.image_exists(tag):
            raise BuildFailed("the engine finished without producing the image")
        return str(image_id or self._sdk.images.get(tag).id)

    def import_rootfs(self, tarball: Path, ref: str, labels: dict[str, str]) -> None:
        repo, _, tag = ref.partition(":")
        changes = [f'LABEL {k}="{v}"' for k, v in {LABEL: "base", **labels}.items()]
        answer = self._sdk.api.import_image_from_file(str(tarball), repository=repo, tag=tag or "latest", changes=changes)
        if not self.image_exists(ref):
            # podman's Docker-compatible API (4.3) takes the repository and drops the tag: name its image here
            found = re.search(r"sha256:[0-9a-f]{64}|\b[0-9a-f]{64}\b", str(answer))
            if found and self.image_exists(found.group(0)):
                self._sdk.images.get(found.group(0)).tag(repo, tag or "latest")
        if not self.image_exists(ref):
            raise InfraError(f"importing {tarball} as {ref} produced no image. Fix: see the engine's log; is the disk full?")

    # -------------------------------------------------------------------------------------- containers
    def start_container(self, image: str, command: list[str], *, name: str, labels: dict[str, str],
                        **kwargs: Any) -> Container:
        """Create and start a named container with the harness's labels (its owner's among them); one
        that could not start is removed, and its engine's reason raised as DockerFailure."""
        try:
            sdk = self._sdk.containers.create(image, command, name=name, labels=_owned(labels), **kwargs)
            sdk.start()
        except docker.errors.APIError as exc:
            self.remove_container(name)
            raise DockerFailure(explanation(exc)) from None
        return Container(sdk)

    @contextmanager
    def container(self, image: str, command: list[str], *, labels: dict[str, str], name: str | None = None,
                  **kwargs: Any) -> Iterator[SdkContainer]:
        """A named, labelled container that is removed on every path out, Ctrl-C included."""
        name = name or f"nccl-harness-{uuid.uuid4().hex[:12]}"
        container = self._sdk.containers.create(image, command, name=name, labels=_owned(labels), **kwargs)
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
            self._sdk.api.remove_container(name, force=True, v=True)
        except docker.errors.NotFound:
            pass

    def run_once(self, image: str, command: list[str], *, timeout: float = 120, labels: dict[str, str] | None = None,
                 **kwargs: Any) -> RunResult:
        """Run a short command to completion (or the timeout) and return its exit code and output; a
        container the engine will not create or start is DockerFailure with the engine's own words."""
        try:
            with self.container(image, command, labels=labels or {}, **kwargs) as container:
                container.start()
                return self._wait(container, timeout)
        except docker.errors.APIError as exc:
            raise DockerFailure(explanation(exc)) from None

    @staticmethod
    def _wait(container: SdkContainer, timeout: float) -> RunResult:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            container.reload()
            if container.status == "exited":
                code = container.attrs["State"]["ExitCode"]
                return RunResult(code, container.logs().decode(errors="replace"), False)
            time.sleep(0.2)
        container.kill()
        return RunResult(None, container.logs().decode(errors="replace"), True)

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
                for c in self._sdk.api.containers(all=True, filters={"label": label_filter})]


def explanation(exc: Exception) -> str:
    """What the engine itself said (the APIError's explanation, without the SDK's "500 Server Error for
    http+docker://..." around it), shortened."""
    said = getattr(exc, "explanation", None)
    return short(said if isinstance(said, str) and said else exc)


def short(exc: Exception | str) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if len(text) < 300 else text[:300] + "..."


def _key_line(error: str, last: list[str]) -> str:
    """The engine's error plus the most telling line of the failed step's output."""
    telling = [l for l in last if any(w in l for w in ("ERROR", "Error", "error:", "No matching", "Could not"))]
    detail = telling[-1].strip() if telling else ""
    error = strip_colours(error.strip())
    detail = strip_colours(detail)
    return f"{error} ({detail})" if detail and detail not in error else error
