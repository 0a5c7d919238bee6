"""From a stack to an image: render the Jinja2 template into a build context, name it by the hash of
its content, and build it through the Docker client only when no image has that name yet."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from . import CACHE_DIR, WORKLOAD_DIR, __version__, baseimage, compat, imagefacts, matrix, statefile, userimages, wheelhouse
from .engines.dockerclient import LABEL, DockerClient
from .errors import HarnessError
from .kinds import BuildStatus
from .matrix import Stack
from .progress import Progress

IMAGE_REPO = "nccl-harness"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
CA_NAME = "harness-ca.crt"


@dataclass(frozen=True)
class BuildOptions:
    rebuild: bool = False
    wheelhouse: Path | None = None  # the wheel store; None: wheelhouse.DEFAULT_STORE
    ca_bundle: Path | None = None
    # Proxy settings reach RUN steps as Docker's predefined build args; they are not part of the hash,
    # since they change how bytes are fetched, not which bytes end up in the image.
    proxy: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_env(cls, **kwargs: Any) -> BuildOptions:
        proxy = tuple((k, os.environ[k]) for k in PROXY_VARS if os.environ.get(k))
        return cls(proxy=proxy, **kwargs)

    @property
    def store(self) -> Path:
        return self.wheelhouse or wheelhouse.DEFAULT_STORE


@dataclass(frozen=True)
class BuildContext:
    """Everything that decides the image's content; `digest` names it."""

    stack: Stack
    dockerfile: str
    files: tuple[tuple[str, Path], ...]
    labels: tuple[tuple[str, str], ...]
    digest: str

    @property
    def tag(self) -> str:
        return f"{IMAGE_REPO}/{_repo_safe(self.stack.id)}:{self.digest[:16]}"


@dataclass(frozen=True)
class BuildResult:
    stack_id: str
    tag: str
    status: BuildStatus
    reason: str = ""
    seconds: float = 0.0
    log: str = ""
    image_id: str = ""  # the engine's id of the image, once it exists
    started_wall: float = 0.0  # time.time() when the build (or the lookup that found it cached) started

    @property
    def ok(self) -> bool:
        return self.status != "build-error"

    def to_json(self) -> dict:
        return asdict(self)


def _repo_safe(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]", "_", text.lower())


HASH_CACHE = CACHE_DIR / "file-hashes.json"
BIG_FILE = 1 << 20  # files above this (wheels) keep their hash across runs, keyed by size and mtime


@cache
def _file_sha(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


MAX_HASH_CACHE_BYTES = 16 << 20  # about 200 bytes an entry: 80,000 big files, where a store holds hundreds
_SHA = re.compile(r"[0-9a-f]{64}")


def _load_hash_cache() -> dict[str, list]:
    """The cache's entries, path -> [size, mtime_ns, sha256]. A cache: a damaged file (not JSON, the wrong
    shape, a FIFO, too big) counts as absent and an entry of the wrong shape as missing; both are hashed
    again and written back whole, which costs time only (issue 22: a list there was a traceback)."""
    try:
        data = statefile.read_json(HASH_CACHE, MAX_HASH_CACHE_BYTES)
    except (OSError, statefile.Damaged):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items()
            if isinstance(v, list) and len(v) == 3 and all(type(n) is int for n in v[:2])
            and isinstance(v[2], str) and _SHA.fullmatch(v[2])}


def file_sha(path: Path) -> str:
    """sha256 of a file; a 200 MB torch wheel is hashed once per (size, mtime), not once per command."""
    st = path.stat()
    if st.st_size < BIG_FILE:
        return _file_sha(path, st.st_size, st.st_mtime_ns)
    key, cache = str(path.resolve()), _load_hash_cache()
    hit = cache.get(key)
    if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
        return hit[2]
    sha = _file_sha(path, st.st_size, st.st_mtime_ns)
    cache[key] = [st.st_size, st.st_mtime_ns, sha]
    try:
        HASH_CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp = HASH_CACHE.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache))
        os.replace(tmp, HASH_CACHE)
    except OSError:
        pass  # a cache that cannot be written only costs time
    return sha


# What Accelerate needs besides torch, installed into a user's image only where it lacks them: pip takes
# the image's own torch as given (accelerate requires torch>=2.0.0) and never downloads one.
ACCELERATE_DEPS = ["numpy", "packaging", "psutil", "pyyaml", "huggingface_hub", "safetensors"]


def requirements(stack: Stack) -> list[str]:
    """What pip installs in the image: torch first (from its own index), then the rest (PyPI); into a
    user's image, Accelerate alone, when it must (userimages.installs_accelerate)."""
    if stack.is_image:
        return [f"accelerate=={stack.accelerate}"] if userimages.installs_accelerate(stack) else []
    reqs = [f"torch=={stack.torch}", f"accelerate=={stack.accelerate}"]
    if compat.needs_numpy_below_2(stack.torch):
        reqs.append("numpy<2")
    if compat.needs_setuptools_below_70(stack.accelerate):
        reqs.append("setuptools<70")
    return reqs


def nccl_package(stack: Stack) -> str | None:
    if stack.nccl_via != "pip":
        return None
    return f"nvidia-nccl-cu{stack.cuda.split('.')[0]}=={stack.nccl}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(matrix.IMAGES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shargs"] = lambda items: " ".join(shlex.quote(str(i)) for i in items)
    return env


def labels_of(stack: Stack) -> dict[str, str]:
    # a user's image by its content id, never by the reference that named it: a rerun that pins the image
    # (--image NAME=sha256:...) finds the same thin layer, and a re-pushed tag makes a new one
    base = stack.facts.image_id if stack.facts else stack.base
    return {
        f"{LABEL}.stack": stack.id,
        f"{LABEL}.cuda": stack.cuda,
        f"{LABEL}.torch": stack.torch,
        f"{LABEL}.accelerate": stack.accelerate,
        f"{LABEL}.nccl": stack.nccl,
        f"{LABEL}.nccl-via": stack.nccl_via,
        f"{LABEL}.python": stack.python,
        f"{LABEL}.base": base,
        f"{LABEL}.harness-version": __version__,
    }


def render(stack: Stack, options: BuildOptions, wheels: list[Path] | tuple[Path, ...] = ()) -> BuildContext:
    """Render the stack's template; reads the files it copies (to hash them) but changes nothing.

    The digest covers the Dockerfile and every copied file by its name in the context and its content,
    never a path on the host: the same wheels hash the same from whichever store they come."""
    labels = labels_of(stack)
    try:
        dockerfile = _env().get_template(f"{stack.template}.Dockerfile.j2").render(
            stack=stack,
            labels=labels,
            requirements=requirements(stack),
            nccl_package=nccl_package(stack),
            cuda_mm=".".join(stack.cuda.split(".")[:2]),
            ca_bundle=CA_NAME if options.ca_bundle else None,
            facts=stack.facts,
            python=[stack.facts.python_path] if stack.facts else [],
            launch_python=imagefacts.IMAGE_PYTHON,
        )
    except jinja2.TemplateError as exc:
        raise HarnessError(f"{matrix.template_path(stack.template)}: cannot render ({exc}). Fix: correct the template.") from None
    files: list[tuple[str, Path]] = [
        (f"workload/{p.relative_to(WORKLOAD_DIR)}", p)
        for p in sorted(WORKLOAD_DIR.rglob("*.py"))
        if "__pycache__" not in p.parts
    ]
    if options.ca_bundle and CA_NAME in dockerfile:  # only templates that fetch in the build (apt) copy it
        files.append((CA_NAME, options.ca_bundle))
    files += [(f"wheels/{wheel.name}", wheel) for wheel in sorted(wheels, key=lambda w: w.name)]
    digest = hashlib.sha256()
    digest.update(dockerfile.encode())
    for name, path in files:
        digest.update(f"\0{name}\0{file_sha(path)}".encode())
    return BuildContext(stack, dockerfile, tuple(files), tuple(labels.items()), digest.hexdigest())


def materialize(context: BuildContext, dest: Path) -> None:
    """Write the build context to `dest` (wheels hard-linked where the filesystem allows)."""
    (dest / "Dockerfile").write_text(context.dockerfile)
    for name, src in context.files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, target)
        except OSError:
            shutil.copy2(src, target)


def prepare(stack: Stack, options: BuildOptions, log: Path) -> BuildContext:
    """The stack's locked wheels from the store (resolved and downloaded on the host the first time
    only) and the rendered context: with the locks in place this needs neither pip nor the network."""
    if stack.is_image:
        if stack.facts is None:
            raise HarnessError(f"stack `{stack.id}`: its image was not read before the build. Fix: report this as a bug.")
        reqs = requirements(stack)
        if not reqs:
            return render(stack, options)
        # Accelerate itself without its dependencies (which name torch), then those but torch
        found = wheelhouse.collect(options.store, reqs, stack.python, "", log, no_deps=True)
        found += wheelhouse.collect(options.store, ACCELERATE_DEPS, stack.python, "", log)
        return render(stack, options, list(dict.fromkeys(found)))
    wheels = wheelhouse.collect(options.store, requirements(stack), stack.python, stack.torch_index, log)
    nccl = nccl_package(stack)
    if nccl:  # installed over torch's own pin with --no-deps, so resolved apart from it
        wheels += wheelhouse.collect(options.store, [nccl], stack.python, "", log, no_deps=True)
    return render(stack, options, list(dict.fromkeys(wheels)))


# Why fetching packages failed, from the lines pip (downloading into the wheel store on the host) and
# apt (in CUDA builds) print: pip's last line, "No matching distribution found for torch==2.13.0", reads
# as "that version does not exist" when the cause was a name that did not resolve. (what happened,
# pattern, fix); the first match in the log wins.
STORE_HINT = f"the wheel store ({wheelhouse.DEFAULT_STORE}, or --wheelhouse DIR)"
BUILD_CAUSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("the package index's name did not resolve (DNS)",
     re.compile(r"Name or service not known|Temporary failure in name resolution|Could not resolve host|"
                r"nodename nor servname|getaddrinfo failed", re.I),
     f"fill {STORE_HINT} on a host that reaches the index and copy it here, or give this host a resolver that "
     "knows the index"),
    ("the proxy could not be reached or refused the connection",
     re.compile(r"ProxyError|Cannot connect to proxy|Tunnel connection failed|407 Proxy Authentication", re.I),
     f"check HTTP_PROXY/HTTPS_PROXY/NO_PROXY (pip on this host reads them; builds get them as build arguments), "
     f"or fill {STORE_HINT} on a host that reaches the index"),
    ("TLS verification failed (a TLS-intercepting proxy?)",
     re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|SSLError|SSL: ", re.I),
     "give pip on this host the proxy's CA (PIP_CERT, or cert in pip.conf) and apt in CUDA builds --ca-bundle PEM"),
    ("the package index answered with an HTTP error",
     re.compile(r"HTTP error \d{3}|\b(?:403|404|429|500|502|503) (?:Client|Server) Error|status code (?:4|5)\d\d",
                re.I),
     "check the index URL (torch_index in matrix.yaml) and that the index serves this version"),
    ("the index has no such version for this Python and platform",
     re.compile(r"from versions: (?!none)|No matching distribution found", re.I),
     "check the version against the index (pip index versions NAME), or the stack's python"),
)


def failure_reason(error: str, log: Path) -> str:
    """The engine's error, with the cause line from the build log, where the log is, and the fix."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return error
    for what, pattern, fix in BUILD_CAUSES:
        line = next((l.strip() for l in lines if pattern.search(l)), None)
        if line:
            return f"{what}: {line[:240]} (log: {log}). Fix: {fix}."
    return f"{error} (log: {log})"


def plan(stacks: list[Stack], docker: DockerClient, options: BuildOptions) -> Iterator[tuple[Stack, str, bool]]:
    """(stack, tag, cached) for each stack, as build_all would decide it; builds nothing."""
    with tempfile.TemporaryDirectory(prefix="harness-dry-") as tmp:
        for stack in stacks:
            tag = prepare(stack, options, Path(tmp) / "pip.log").tag
            yield stack, tag, docker.image_exists(tag) and not options.rebuild


def ensure_bases(stacks: list[Stack], docker: DockerClient, log_dir: Path, progress: Progress) -> None:
    """The local base images the stacks build on, made when missing (debootstrap, a minute); a base that
    cannot be made is said, and the builds that need it fail and say why."""
    log_dir.mkdir(parents=True, exist_ok=True)
    for base in dict.fromkeys(s.base for s in stacks if not s.is_image and baseimage.is_local(s.base)):
        try:
            baseimage.ensure(docker, base, log_dir / f"base-{_repo_safe(base)}.log", progress)
        except HarnessError as exc:  # the builds that need it will fail and say why
            progress.say(f"base image {base}: {exc}")


def build_all(
    stacks: list[Stack], docker: DockerClient, options: BuildOptions, log_dir: Path, progress: Progress, jobs: int = 1,
    on_built: Callable[[BuildResult], None] = lambda result: None, beside_cells: bool = False,
) -> dict[str, BuildResult]:
    """Build every stack's image (`jobs` at a time, in the stacks' order); a failure is recorded and the rest
    go on. `on_built` gets each result as soon as it is known, in the thread that built it (the pipeline starts
    that image's cells then). `beside_cells`: cells run while the images build and hold the live status line,
    so each build is a line when it starts and one when it ends, as with jobs > 1."""
    ensure_bases(stacks, docker, log_dir, progress)
    status_line = jobs == 1 and not beside_cells
    # a build's steps go to the status line it holds, or (-v, plain output) to lines of their own; never onto a cell's
    steps = progress.detail if jobs == 1 and not (beside_cells and progress.live) else (lambda _: None)

    def one(n: int, stack: Stack) -> BuildResult:
        log = log_dir / f"{stack.id}.log"
        started, wall = time.monotonic(), time.time()
        tag = ""
        try:
            context = prepare(stack, options, log)
            tag = context.tag
            if not options.rebuild and docker.image_exists(tag):
                result = BuildResult(stack.id, tag, "cached", seconds=time.monotonic() - started, started_wall=wall)
            else:
                title = f"[{n}/{len(stacks)}] building {stack.id} -> {tag} (log: {log})"
                if not status_line:  # one line each, no live status to fight over
                    progress.say(title)
                with (progress.task(title) if status_line else nullcontext(),
                      tempfile.TemporaryDirectory(prefix="harness-ctx-") as tmp):
                    materialize(context, Path(tmp))
                    docker.build(Path(tmp), tag, labels={f"{LABEL}.content-hash": context.digest},
                                 buildargs=dict(options.proxy), log=log, nocache=options.rebuild, on_line=steps)
                result = BuildResult(stack.id, tag, "built", seconds=time.monotonic() - started, log=str(log),
                                     started_wall=wall)
        except HarnessError as exc:  # BuildFailed, a wheelhouse that pip could not fill, a bad template
            result = BuildResult(stack.id, tag, "build-error", failure_reason(str(exc), log),
                                 time.monotonic() - started, str(log), started_wall=wall)
        progress.say(f"[{n}/{len(stacks)}] {stack.id}: cached ({tag})" if result.status == "cached" else
                     f"[{n}/{len(stacks)}] {stack.id}: {result.status} in {result.seconds:.0f}s"
                     + (f" - {result.reason}" if result.reason else ""))
        on_built(result)  # outside the try: a failed write there stops the run, it is no build-error
        return result

    if jobs <= 1:
        return {stack.id: one(n, stack) for n, stack in enumerate(stacks, 1)}
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {stack.id: pool.submit(one, n, stack) for n, stack in enumerate(stacks, 1)}
        results = {k: f.result() for k, f in futures.items()}
    except BaseException:
        # Ctrl-C (or a failed write in on_built) reaches the caller now, which ends its running cells: waiting
        # for the running builds first would leave those cells running for minutes; builds not started never start
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results
