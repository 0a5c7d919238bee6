"""What each command does, shared by `invoke` (tasks.py) and `python -m harness` (cli.py). Each takes
frozen options, prints for people, and returns an exit code; problems arrive as HarnessError."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import time
from collections import Counter

from . import __version__, baseimage, hostinfo, images, launch, matrix, results, runner
from .engines.docker import DockerEngine
from .engines.host import HostEngine
from .errors import EXIT_CELLS_FAILED, EXIT_INFRA, EXIT_NOTHING_SELECTED, EXIT_OK, HarnessError, InfraError
from .matrix import Cell, Matrix
from .outcome import Outcome
from .progress import Progress


@dataclass(frozen=True)
class Selection:
    matrix: Path | None = None
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


def gpus_visible() -> bool:
    """NVIDIA GPUs on this host, as the driver exposes them (no nvidia-smi needed)."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def default_matrix(progress: Progress) -> Path:
    if gpus_visible():
        return matrix.DEFAULT_GPU_MATRIX
    progress.say(
        f"No NVIDIA GPU on this host: using {matrix.DEFAULT_CPU_MATRIX.name} "
        f"(pass --matrix {matrix.DEFAULT_GPU_MATRIX.name} for the GPU matrix)."
    )
    return matrix.DEFAULT_CPU_MATRIX


def resolve(selection: Selection, progress: Progress) -> tuple[Matrix, list[Cell]]:
    """Load the matrix and apply --only/--exclude; both flags are checked before the file is read."""
    only = [matrix.parse_filter(t, "--only") for t in selection.only]
    exclude = [matrix.parse_filter(t, "--exclude") for t in selection.exclude]
    m = matrix.load(selection.matrix or default_matrix(progress))
    return m, matrix.select(m.cells, only, exclude)


def list_cells(selection: Selection, as_json: bool = False) -> int:
    progress = Progress()
    m, cells = resolve(selection, progress)
    if not cells:
        progress.say(f"{m.path.name}: no cell matches the --only/--exclude filters.")
        return EXIT_NOTHING_SELECTED
    runnable = [c for c in cells if c.na_reason is None]
    na = [c for c in cells if c.na_reason is not None]
    if as_json:
        json.dump(
            [c.fields() | {"na_reason": c.na_reason, "env": c.variant.env_dict} for c in cells], sys.stdout, indent=1
        )
        print()
        return EXIT_OK
    stacks = {c.stack.id for c in runnable}
    print(f"{m.path.name}: {len(cells)} cells, {len(runnable)} to run on {len(stacks)} images, {len(na)} n/a")
    width = max(len(c.id) for c in cells)
    for cell in runnable:
        env = " ".join(f"{k}={v}" for k, v in cell.variant.env) or "-"
        print(f"  {cell.id:<{width}}  {env}")
    if na:
        print("n/a (these combinations do not exist; listed, never run):")
        for cell in na:
            print(f"  {cell.id:<{width}}  {cell.na_reason}")
    return EXIT_OK


def checked_build_options(options: images.BuildOptions, jobs: int) -> images.BuildOptions:
    """The build flags of `build` and `matrix`, checked (bad ones name the flag) and made absolute."""
    if jobs < 1:
        raise HarnessError(f"--jobs {jobs}: must be at least 1. Fix: e.g. --jobs 2.")
    if options.ca_bundle and not options.ca_bundle.is_file():
        raise HarnessError(f"--ca-bundle {options.ca_bundle}: no such file. Fix: pass a PEM file of CA certificates.")
    return replace(options, wheelhouse=options.wheelhouse.resolve()) if options.wheelhouse else options


def build(
    selection: Selection,
    options: images.BuildOptions,
    results_dir: Path = results.DEFAULT_RESULTS,
    run_id: str | None = None,
    jobs: int = 1,
) -> int:
    """Build the images of the selected cells; cells of an image that fails become build-error."""
    progress = Progress()
    m, cells = resolve(selection, progress)
    runnable = [c for c in cells if c.na_reason is None]
    options = checked_build_options(options, jobs)
    if not runnable:
        progress.say(f"{m.path.name}: nothing to build (no runnable cell selected).")
        return EXIT_NOTHING_SELECTED
    run = results.run_dir(results_dir, run_id or results.new_run_id())
    engine = DockerEngine.connect()
    stacks = list({c.stack.id: c.stack for c in runnable}.values())
    progress.say(f"Building {len(stacks)} image(s) for {len(runnable)} cell(s); logs in {run / 'builds'}")
    built = images.build_all(stacks, engine, options, run / "builds", progress, jobs=jobs)
    outcomes = {
        c.id: Outcome("build-error", built[c.stack.id].reason).to_json()
        for c in runnable
        if not built[c.stack.id].ok
    }
    results.write_json(
        run / "builds.json",
        {"matrix": str(m.path), "images": {k: v.to_json() for k, v in built.items()}, "cells": outcomes},
    )
    failed = [r for r in built.values() if not r.ok]
    progress.say(
        f"{len(built) - len(failed)} image(s) ready, {len(failed)} build-error"
        + (f" ({len(outcomes)} cell(s) will be build-error)" if failed else "")
        + f"; record: {run / 'builds.json'}"
    )
    return EXIT_CELLS_FAILED if failed else EXIT_OK


def base_image(ref: str = "harness-base:bookworm", mirror: str | None = None) -> int:
    """Make the local base image unless the engine already has it."""
    progress = Progress()
    if not baseimage.is_local(ref):
        raise HarnessError(f"{ref}: not a base image the harness makes. Fix: use one of {', '.join(baseimage.LOCAL_BASES)}.")
    engine = DockerEngine.connect()
    log = Path(results.DEFAULT_RESULTS) / "base-images.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    made = baseimage.ensure(engine, ref, log, progress, mirror)
    progress.say(f"{ref}: {'made' if made else 'already present'}")
    return EXIT_OK


@dataclass(frozen=True)
class MatrixOptions:
    engine: str | None = None  # docker | host | None = docker when reachable, else host
    gpus: str | None = None  # "all", "0,1", None = all GPUs for GPU cells
    ranks: int | None = None  # CPU cells; default from the matrix file
    retries: int = 0
    results: Path = results.DEFAULT_RESULTS
    run_id: str | None = None
    resume: bool = False
    timeouts: tuple[str, ...] = ()  # "phase=seconds" overrides
    jobs: int = 1  # parallel image builds
    dry_run: bool = False
    as_json: bool = False
    build: images.BuildOptions = images.BuildOptions()
    extra_args: tuple[str, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()


def _engine(choice: str | None, progress: Progress):
    if choice not in (None, "docker", "host"):
        raise HarnessError(f"--engine {choice}: unknown engine. Fix: use --engine docker or --engine host.")
    if choice == "host":
        return HostEngine()
    try:
        return DockerEngine.connect()
    except InfraError:
        if choice == "docker":
            raise
    progress.say(
        "No Docker engine reachable: running the host engine on the stack installed in this Python "
        "(NCCL variants still apply). For the full matrix in containers: scripts/setup.sh, then run again."
    )
    return HostEngine()


def parse_timeouts(overrides: tuple[str, ...], base: matrix.Timeouts) -> matrix.Timeouts:
    """--timeout prepare=300 --timeout cell=3600 over the matrix file's values."""
    values = base.model_dump()
    for item in overrides:
        key, _, seconds = item.partition("=")
        try:
            number = float(seconds)
        except ValueError:
            number = -1.0
        if key not in values or number <= 0:
            raise HarnessError(f"--timeout {item}: expected PHASE=SECONDS with PHASE one of {', '.join(values)} and "
                               "SECONDS > 0. Fix: e.g. --timeout prepare=300.")
        values[key] = number
    return matrix.Timeouts(**values)


def _check_options(opts: MatrixOptions) -> tuple[MatrixOptions, tuple[str, ...]]:
    """Every flag checked before anything starts; returns the options made absolute and the GPU ids."""
    gpus = runner.check_gpus(opts.gpus)
    if opts.ranks is not None and opts.ranks < 1:
        raise HarnessError(f"--ranks {opts.ranks}: must be at least 1. Fix: e.g. --ranks 2.")
    if opts.retries < 0:
        raise HarnessError(f"--retries {opts.retries}: must be 0 or more. Fix: e.g. --retries 1.")
    return replace(opts, build=checked_build_options(opts.build, opts.jobs)), gpus


def _already_done(run: Path) -> set[str]:
    """Cells of an earlier attempt at this run that need no rerun (--resume)."""
    data = results.load_run(run)
    return {cell_id for cell_id, record in data.records.items()
            if record.get("outcome", {}).get("status") not in ("interrupted", None)}


def run_matrix(selection: Selection, opts: MatrixOptions) -> int:
    """Build what is missing, run the selected cells one at a time, record each as it ends."""
    progress = Progress()
    opts, gpus = _check_options(opts)
    m, cells = resolve(selection, progress)
    m = replace(m, timeouts=parse_timeouts(opts.timeouts, m.timeouts))
    engine = _engine(opts.engine, progress)
    if isinstance(engine, DockerEngine):  # the fast part of `invoke doctor`
        disk = _disk(engine.client.info())
        if not disk.ok:
            if disk.blocking:
                raise InfraError(f"disk for images: {disk.detail}. Fix: {disk.fix}.")
            progress.say(f"warning: disk for images: {disk.detail} ({disk.fix})")
    if isinstance(engine, HostEngine):
        stack = runner.host_stack()
        progress.say(f"Host stack: {stack.id} (python {stack.python})")
        cells = [c for c in runner.host_cells(m, stack)
                 if any(c.variant == s.variant and c.launcher == s.launcher for s in cells)]
    runnable = [c for c in cells if c.na_reason is None]
    if not runnable:
        progress.say("Nothing to run: no runnable cell selected.")
        return EXIT_NOTHING_SELECTED
    if not gpus and any(not c.stack.is_cpu for c in runnable):
        gpus = runner.check_gpus("all")
    if opts.dry_run:
        return _dry_run(m, runnable, engine, gpus, opts, progress)
    if opts.resume:
        run_id = opts.run_id or (results.runs(opts.results) or [None])[-1]
        if run_id is None:
            raise HarnessError(f"--resume: no earlier run in {opts.results}. Fix: run without --resume first.")
    else:
        run_id = opts.run_id or results.new_run_id()
    run = results.run_dir(opts.results, run_id)
    done = _already_done(run) if opts.resume else set()
    if done:
        progress.say(f"Resuming {run_id}: {len(done)} cell(s) already recorded are skipped.")
    if not (opts.resume and (run / "run.json").exists()):
        results.write_json(run / "run.json", {
            "run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": hostinfo.facts(engine),
            "engine": engine.name, "gpus": list(gpus), "harness_version": __version__,
            "matrix": {"path": str(m.path), "sha256": m.sha256, "timeouts": m.timeouts.model_dump(),
                       "bandwidth_sizes": list(m.bandwidth_sizes)},
            "cells": [c.id for c in cells],
        })
    for cell in cells:
        if cell.na_reason is not None:
            runner.CellResult(cell, Outcome("n/a", cell.na_reason)).save(opts.results, run_id)
    todo = [c for c in runnable if c.id not in done]
    tags: dict[str, str] = {}
    image_ids: dict[str, str] = {}
    counts: Counter[str] = Counter()
    if isinstance(engine, DockerEngine) and todo:
        stacks = list({c.stack.id: c.stack for c in todo}.values())
        built = images.build_all(stacks, engine, opts.build, run / "builds", progress, jobs=opts.jobs)
        tags = {k: v.tag for k, v in built.items() if v.ok}
        image_ids = {k: engine.client.images.get(tag).id for k, tag in tags.items()}
        for cell in todo:
            if not built[cell.stack.id].ok:
                failed = Outcome("build-error", built[cell.stack.id].reason, detail={"log": built[cell.stack.id].log})
                runner.CellResult(cell, failed).save(opts.results, run_id)
                counts["build-error"] += 1
        todo = [c for c in todo if c.stack.id in tags]
    ropts = runner.RunOptions(run_id, opts.results, gpus, opts.ranks or m.ranks, opts.retries, opts.extra_args,
                              opts.extra_env)
    progress.say(f"Running {len(todo)} cell(s) on the {engine.name} engine; results in {run}")
    interrupted = False
    for n, cell in enumerate(todo, 1):
        cell_opts = replace(ropts, gpus=()) if cell.stack.is_cpu else ropts

        def show(rank: int, event: dict) -> None:
            if event.get("event") in ("phase_start", "error"):
                task.detail(f"rank {rank} {event['event']} {event.get('phase', '')}")

        tally = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none yet"
        with progress.task(f"[{n}/{len(todo)}] {cell.id} (so far: {tally})") as task:
            tag = tags.get(cell.stack.id, "")
            result = runner.run_cell(engine, cell, m, cell_opts, tag, on_event=show,
                                     image_info={"tag": tag, "id": image_ids[cell.stack.id]} if tag else None)
        counts[result.outcome.status] += 1
        progress.say(f"[{n}/{len(todo)}] {cell.id}: {result.outcome.status.upper()} - {result.outcome.reason} "
                     f"({result.outcome.seconds:.0f}s)")
        if result.outcome.status == "interrupted":
            interrupted = True
            break
    return _finish(run, counts, interrupted, opts, progress)


def _finish(run: Path, counts: Counter, interrupted: bool, opts: MatrixOptions, progress: Progress) -> int:
    """The report beside the results, a summary for people (or JSON), and the exit code."""
    from . import report as report_mod

    data = results.load_run(run)
    (run / "report.md").write_text(report_mod.render(data))
    if interrupted:
        progress.say(f"Interrupted: results so far are kept in {run}; continue with --resume --run-id {run.name}.")
    progress.say("Summary: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing ran")
                 + f"; report: {run / 'report.md'}")
    if opts.as_json:
        json.dump({"run_id": run.name, "results": str(run), "report": str(run / "report.md"), "counts": dict(counts),
                   "cells": [{"id": k, **{f: r.get("outcome", {}).get(f) for f in ("status", "reason", "phase", "error_class")}}
                             for k, r in sorted(data.records.items())]}, sys.stdout, indent=1)
        print()
    if interrupted:
        return 130
    if counts.get("infra-error"):
        return EXIT_INFRA
    bad = sum(counts[s] for s in ("fail", "hang", "wrong", "build-error", "slow"))
    return EXIT_CELLS_FAILED if bad else EXIT_OK


def _dry_run(m: Matrix, cells: list[Cell], engine, gpus: tuple[str, ...], opts: MatrixOptions, progress: Progress) -> int:
    """What would be built, and each cell's equivalent command line, copy-pasteable; nothing runs."""
    from .engines.docker import cli_equivalent

    ranks = opts.ranks or m.ranks
    run_id = opts.run_id or results.new_run_id()
    if isinstance(engine, DockerEngine):
        stacks = list({c.stack.id: c.stack for c in cells}.values())
        tags = {}
        print(f"# {len(stacks)} image(s):")
        with tempfile.TemporaryDirectory(prefix="harness-dry-") as tmp:
            for stack in stacks:
                context = images.prepare(stack, opts.build, Path(tmp) / "pip.log")
                tags[stack.id] = context.tag
                state = "cached" if engine.image_exists(context.tag) and not opts.build.rebuild else "would build"
                print(f"# {state}: {context.tag} from images/{stack.template}.Dockerfile.j2")
    print(f"# {len(cells)} cell(s):")
    for cell in cells:
        cell_gpus = () if cell.stack.is_cpu else gpus
        n = len(cell_gpus) if cell_gpus else ranks
        out = Path(opts.results).resolve() / run_id / "cells" / cell.id / "attempt-1"
        if isinstance(engine, DockerEngine):
            spec_launch = launch.launch(cell, m, ranks=n)
            print(f"# {cell.id}\n{cli_equivalent(tags[cell.stack.id], spec_launch, out, cell_gpus)}")
        else:
            spec_launch = launch.launch(cell, m, ranks=n, python=engine.python, workload=engine.workload, out=str(out))
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec_launch.env)
            visible = f"CUDA_VISIBLE_DEVICES={','.join(cell_gpus)} " if cell_gpus else ""
            print(f"# {cell.id}\n{visible}{env + ' ' if env else ''}{shlex.join(spec_launch.argv)}")
    return EXIT_OK


def report(run: str | None, results_dir: Path = results.DEFAULT_RESULTS, out: Path | None = None) -> int:
    """Render a recorded run (default: the latest) as markdown, to stdout or a file."""
    from . import report as report_mod

    data = results.load_run(results.resolve_run(results_dir, run))
    text = report_mod.render(data)
    if out:
        out.write_text(text)
        Progress().say(f"report of {data.run_id} written to {out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def compare(base: str, new: str, results_dir: Path = results.DEFAULT_RESULTS, threshold: float = 0.10,
            out: Path | None = None) -> int:
    """Markdown diff of two runs; exit 1 when something regressed, 0 otherwise."""
    from . import compare as compare_mod

    if not 0 < threshold < 10:
        raise HarnessError(f"--threshold {threshold}: expected a fraction like 0.1 (10%). Fix: e.g. --threshold 0.1.")
    a = results.load_run(results.resolve_run(results_dir, base))
    b = results.load_run(results.resolve_run(results_dir, new))
    d = compare_mod.diff(a, b, threshold)
    text = compare_mod.render(a, b, d, threshold)
    if out:
        out.write_text(text)
    sys.stdout.write(text)
    return EXIT_CELLS_FAILED if d.regressed else EXIT_OK


def publish(run: str | None, to: Path, results_dir: Path = results.DEFAULT_RESULTS) -> int:
    """Write the report and its plot into a docs tree and refresh the index."""
    from . import publish as publish_mod

    data = results.load_run(results.resolve_run(results_dir, run))
    page = publish_mod.publish(data, to)
    Progress().say(f"published {data.run_id} to {page} (index: {to / publish_mod.INDEX})")
    return EXIT_OK


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    blocking: bool = True


def _container_view(engine: DockerEngine, gpus: tuple[str, ...]) -> list[Check]:
    """/dev/shm and memlock (and GPUs) as a cell's container sees them, from a throwaway container."""
    from docker.types import DeviceRequest, Ulimit

    image = next((ref for ref in baseimage.LOCAL_BASES if engine.image_exists(ref)), None)
    if image is None:
        return [Check("container view", False, "no local image to start a test container from",
                      "run `invoke base-image` (or scripts/setup.sh)", blocking=False)]
    kwargs: dict = {"ipc_mode": "host", "cap_add": ["SYS_NICE"]}
    script = "df -B1 /dev/shm | tail -1; ulimit -l"
    if gpus:
        kwargs["device_requests"] = [DeviceRequest(device_ids=list(gpus), capabilities=[["gpu", "utility"]])]
        kwargs["ulimits"] = [Ulimit(name="memlock", soft=-1, hard=-1)]
        script += "; nvidia-smi -L"
    try:
        result = engine.run_once(image, ["sh", "-c", script], timeout=60, labels={"io.nccl-harness.doctor": "1"}, **kwargs)
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
        checks.append(Check("memlock in a container", memlock == "unlimited" or not gpus, memlock,
                            "raise dockerd's LimitMEMLOCK to infinity", blocking=bool(gpus)))
    except (IndexError, ValueError):
        checks.append(Check("test container", result.exit_code == 0, result.output.strip()[-300:]))
    if gpus:
        seen = [l for l in lines if l.startswith("GPU ")]
        checks.append(Check("GPUs inside a container", len(seen) == len(gpus), f"{len(seen)} of {len(gpus)} visible",
                            "install the NVIDIA Container Toolkit (nvidia-ctk runtime configure --runtime=docker)"))
    return checks


def doctor(gpus_flag: str | None = None, engine_choice: str | None = None) -> int:
    """Everything a run needs, each problem with its fix; exit 4 when something blocks a run."""
    checks: list[Check] = []
    try:
        gpus = runner.check_gpus(gpus_flag)
        checks.append(Check("GPU ids", True, ",".join(gpus) if gpus else "none asked for"))
    except HarnessError as exc:
        gpus = ()
        checks.append(Check("GPU ids", False, str(exc)))
    driver = hostinfo.driver_version()
    has_gpus = gpus_visible()
    checks.append(Check("NVIDIA driver", bool(driver) or not has_gpus, driver or "none (CPU cells only)",
                        "install the NVIDIA driver", blocking=bool(gpus)))
    if engine_choice == "host":
        try:
            stack = runner.host_stack()
            checks.append(Check("host stack", True, f"{stack.id} (python {stack.python})"))
        except HarnessError as exc:
            checks.append(Check("host stack", False, str(exc)))
    else:
        try:
            engine = DockerEngine.connect()
            version, info = engine.client.version(), engine.client.info()
            checks.append(Check("Docker engine", True, f"{version.get('Version')} (API {version.get('ApiVersion')})"))
            runtimes = sorted(info.get("Runtimes", {}))
            checks.append(Check("NVIDIA runtime", "nvidia" in runtimes or not (has_gpus or gpus), ", ".join(runtimes)
                                + ("" if "nvidia" in runtimes else " (no nvidia: GPU cells cannot run in containers)"),
                                "install the NVIDIA Container Toolkit and run nvidia-ctk runtime configure --runtime=docker",
                                blocking=bool(gpus)))
            checks.append(_disk(info))
            checks += _container_view(engine, gpus)
        except InfraError as exc:
            checks.append(Check("Docker engine", False, str(exc)))
    width = max(len(c.name) for c in checks)
    for check in checks:
        mark = "ok  " if check.ok else ("FAIL" if check.blocking else "warn")
        print(f"{mark} {check.name:<{width}}  {check.detail}" + (f"\n     {'':<{width}}  fix: {check.fix}" if not check.ok and check.fix else ""))
    return EXIT_INFRA if any(not c.ok and c.blocking for c in checks) else EXIT_OK


def _disk(info: dict) -> Check:
    import shutil

    root = info.get("DockerRootDir", "/var/lib/docker")
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        return Check("disk for images", False, f"cannot read {root}", blocking=False)
    return Check("disk for images", free >= 20 << 30, f"{free / (1 << 30):.0f} GiB free in {root}",
                 "free space: a CUDA stack's image takes 5 to 10 GB (invoke clean --images removes the harness's)",
                 blocking=free < 5 << 30)


def clean(remove_images: bool = False) -> int:
    """Remove every container carrying the harness label (and, on request, the images it built)."""
    from .engines.docker import LABEL

    engine = DockerEngine.connect()
    names = engine.leftovers()
    for name in names:
        engine.remove_container(name)
    print(f"removed {len(names)} container(s)" + (f": {', '.join(names)}" if names else ""))
    if remove_images:
        built = engine.client.images.list(filters={"label": f"{LABEL}.stack"})
        for image in built:
            engine.remove_image(image.id)
        print(f"removed {len(built)} image(s) (the base images stay; `docker rmi harness-base:bookworm` removes that)")
    return EXIT_OK
