"""The harness's commands, declared once: the invoke tasks behind `invoke`, `python -m harness` and the
`nccl-harness` script (harness/cli.py runs an invoke Program over them; the repo root's tasks.py hands
`invoke`'s command line to that Program). Each task parses its flags, calls harness.commands and exits
with its code; no logic here."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import ClassVar

import invoke
from invoke import Exit

from .errors import HarnessError, guarded


class Task(invoke.Task):
    """A task whose short flags are declared, not guessed: invoke's automatic short flags gave `-j` to
    --json while --jobs got `-b`, and a stray `--` to --run-id; a short flag that does not match its long
    name is a trap. Only the flags in SHORT have one."""

    SHORT: ClassVar[dict[str, str]] = {"jobs": "j", "verbose": "v"}

    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        if name in self.SHORT:
            opts["names"] = [*opts["names"], self.SHORT[name]]
        return opts


task = partial(invoke.task, auto_shortflags=False, klass=Task)


def _commands():
    """harness.commands, imported when a task runs: it brings the Docker SDK and the whole pipeline (0.8 s
    of imports), which `--help`, `--list` and a mistyped flag do not need."""
    from . import commands

    return commands


def _exit(code: int) -> None:
    if code:
        raise Exit(code=code)


def _number(flag: str, value, kind: type, example: str):
    """A numeric flag's value. invoke would cast an int default's flag with int() itself and print a
    traceback for `--retries two`, so numeric flags are declared with string defaults and converted
    here, where a bad value is a HarnessError naming the flag (exit 2, through guarded)."""
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        raise HarnessError(f"{flag} {value!r}: expected {what}. Fix: e.g. {flag} {example}.") from None


def _results(results) -> Path:
    return Path(results) if results else _commands().results.DEFAULT_RESULTS


def _selection(matrix, only, exclude, image=None):
    return _commands().Selection(Path(matrix) if matrix else None, tuple(only or ()), tuple(exclude or ()),
                                 tuple(image or ()))


SELECT_HELP = {
    "matrix": "matrix file (default: matrix.yaml with GPUs, matrix-cpu.yaml without)",
    "only": "glob on the cell id, or key=glob (cuda, torch, accelerate, nccl, variant, launcher, ...); repeatable",
    "exclude": "like --only, removes cells; repeatable",
    "image": "NAME=REF: run image stack NAME from image REF instead of the matrix file's (a tag, or the sha256:... "
             "a report's Rerun line pins); repeatable",
}


VERBOSE_HELP = "plain (non-terminal) output: also each phase of each cell and each build step"

BUILD_HELP = {
    "rebuild": "build again from scratch (no layer cache) even when an image with the same content hash exists",
    "wheelhouse": "the wheel store: wheels resolved, locked and downloaded on the host, installed offline in every "
                  "build (default: ~/.cache/nccl-harness/wheels, or $XDG_CACHE_HOME/nccl-harness/wheels)",
    "ca_bundle": "PEM CA bundle for pip/apt inside builds (TLS-intercepting proxies)",
    "results": "results folder (default: results/)",
    "run_id": "run folder name (default: a new timestamped one)",
}


def _build_options(rebuild, wheelhouse, ca_bundle):
    return _commands().images.BuildOptions.from_env(
        rebuild=rebuild, wheelhouse=Path(wheelhouse) if wheelhouse else None, ca_bundle=Path(ca_bundle) if ca_bundle else None
    )


SLURM_HELP = {
    "nodes": "slurm engine: nodes per cell, one launcher on each (default 1)",
    "partition": "slurm engine: the partition (default: the cluster's default)",
    "account": "slurm engine: the account to charge",
    "time": "slurm engine: each job's time limit (sbatch --time, e.g. 10 or 0:30:00)",
    "slurm_arg": "slurm engine: one more sbatch option, e.g. --slurm-arg=--exclusive; repeatable",
    "gpus_per_node": "slurm engine, GPU cells: GPUs Slurm gives each node (sbatch --gpus-per-node), one rank on each; "
                     "ranks = nodes x G (instead of --gpus)",
    "node_runtime": "slurm engine: what the ranks run in on the nodes: host (their own Python, default), docker or "
                    "podman (the cell's image, run by the node's engine), pyxis (srun --container-image)",
}


def _slurm(nodes, partition, account, time, slurm_arg, gpus_per_node, node_runtime):
    """The slurm engine's flags as its options, or None when none was given."""
    if (nodes is None and partition is None and account is None and time is None and not slurm_arg
            and gpus_per_node is None and node_runtime is None):
        return None
    from .engines.slurm import SlurmOptions

    count = _number("--nodes", nodes, int, "2")
    return SlurmOptions(1 if count is None else count, partition, account, time, tuple(slurm_arg or ()),
                        _number("--gpus-per-node", gpus_per_node, int, "8"), node_runtime or "host")


GPU_API_HELP = ("docker engine, GPU cells: how containers get the GPUs, `cdi` (--device nvidia.com/gpu=N) or `nvidia` (the "
                "NVIDIA runtime, --gpus); default: a probe container tries CDI, then the NVIDIA runtime")

RUN_HELP = {
    **BUILD_HELP,
    "json": "machine-readable output (with --list: the cells; else a summary on stdout)",
    "gpus": "`all` or GPU indexes like 0,1 (default: all GPUs for GPU cells)",
    "engine": "docker, host or slurm (default: docker when reachable, else host)",
    **SLURM_HELP,
    "ranks": "ranks of a CPU cell (default: the matrix file's)",
    "retries": "re-run hang and infra-error cells up to N times (default 0)",
    "control": "run the NCCL-only control (a torch-free all-reduce through the cell's libnccl) as an extra attempt: "
               "`failing` (default) after an NCCL cell hangs or fails, `always` after every cell (gloo ones too: "
               "there it reports nccl-not-found or cuda-not-found, it needs libnccl and a GPU), `never`",
    "gpu_api": GPU_API_HELP,
    "timeout": "PHASE=SECONDS stall threshold override (phases, or cell for the hard cap); repeatable",
    "jobs": "images built in parallel (default 1); on the slurm engine also up to N cells at the same time, each "
            "its own job with sbatch --exclusive (no node shared); docker and host cells always run one at a time "
            "(they share this machine's GPUs)",
    "dry_run": "print what would be built and each cell's docker run line (slurm: batch script and sbatch line), and "
               "with --rescue the ladder the search would try; run nothing",
    "verbose": VERBOSE_HELP,
}
RESCUE_HELP = ("after a cell hangs or fails, try the rescue ladder (matrix.yaml `rescue:`, default harness/ladder.py): "
               "NCCL changes least costly first, singles then pairs, each a supervised attempt, until one passes or "
               "the budget is spent")


def _run_matrix(selection, *, engine, nodes, partition, account, time, slurm_arg, gpus_per_node, node_runtime, gpus,
                gpu_api, ranks, retries, control, rescue, resume, timeout, jobs, dry_run, json, rebuild, wheelhouse,
                ca_bundle, results, run_id, verbose, cell=None):
    """`matrix` and `rescue`: their flags as MatrixOptions, then the run (`rescue`: of one cell by its id)."""
    def run() -> int:
        options = _commands().MatrixOptions(
            engine=engine, slurm=_slurm(nodes, partition, account, time, slurm_arg, gpus_per_node, node_runtime),
            gpus=gpus, gpu_api=gpu_api, ranks=_number("--ranks", ranks, int, "2"),
            retries=_number("--retries", retries, int, "1"), control=control, rescue=rescue, resume=resume,
            timeouts=tuple(timeout or ()), jobs=_number("--jobs", jobs, int, "2"), dry_run=dry_run, as_json=json,
            results=_results(results), run_id=run_id,
            build=_build_options(rebuild, wheelhouse, ca_bundle), verbose=verbose,
        )
        if cell is not None:
            return _commands().rescue(cell, selection, options)
        return _commands().run_matrix(selection, options)

    _exit(guarded(run))


@task(
    iterable=["only", "exclude", "image", "timeout", "slurm_arg"],
    help={
        **SELECT_HELP,
        **RUN_HELP,
        "list": "print the expanded cells (n/a ones with their reason) and stop",
        "resume": "continue a run (--run-id, default the latest): skip cells already recorded",
        "rescue": RESCUE_HELP,
    },
)
def matrix(c, list=False, matrix=None, only=None, exclude=None, image=None, json=False, gpus=None, gpu_api=None, engine=None,
           ranks=None,
           retries="0", control="failing", rescue=False, resume=False, timeout=None, jobs="1", dry_run=False, rebuild=False,
           wheelhouse=None, ca_bundle=None, results=None, run_id=None, verbose=False, nodes=None, partition=None,
           account=None, time=None, slurm_arg=None, gpus_per_node=None, node_runtime=None):
    """Build what is missing, run the selected cells under supervision, record and report the outcomes."""
    selection = _selection(matrix, only, exclude, image)
    if list:
        _exit(guarded(lambda: _commands().list_cells(selection, as_json=json)))
        return
    _run_matrix(selection, engine=engine, nodes=nodes, partition=partition, account=account, time=time,
                slurm_arg=slurm_arg, gpus_per_node=gpus_per_node, node_runtime=node_runtime, gpus=gpus, gpu_api=gpu_api,
                ranks=ranks, retries=retries, control=control, rescue=rescue,
                resume=resume, timeout=timeout, jobs=jobs, dry_run=dry_run, json=json, rebuild=rebuild,
                wheelhouse=wheelhouse, ca_bundle=ca_bundle, results=results, run_id=run_id, verbose=verbose)


@task(
    iterable=["image", "timeout", "slurm_arg"],
    help={"cell": "the cell id, as `invoke list` prints it and --only takes it", "matrix": SELECT_HELP["matrix"],
          "image": SELECT_HELP["image"], **RUN_HELP},
)
def rescue(c, cell, matrix=None, image=None, json=False, gpus=None, gpu_api=None, engine=None, ranks=None, retries="0",
           control="failing",
           timeout=None, jobs="1", dry_run=False, rebuild=False, wheelhouse=None, ca_bundle=None, results=None,
           run_id=None, verbose=False, nodes=None, partition=None, account=None, time=None, slurm_arg=None,
           gpus_per_node=None, node_runtime=None):
    """Run one cell and, when it hangs or fails, the rescue search: the smallest NCCL change that makes it pass."""
    _run_matrix(_selection(matrix, (), (), image), engine=engine, nodes=nodes, partition=partition, account=account,
                time=time, slurm_arg=slurm_arg, gpus_per_node=gpus_per_node, node_runtime=node_runtime, gpus=gpus,
                gpu_api=gpu_api, ranks=ranks, retries=retries, control=control, rescue=True,
                resume=False, timeout=timeout, jobs=jobs, dry_run=dry_run, json=json, rebuild=rebuild,
                wheelhouse=wheelhouse, ca_bundle=ca_bundle, results=results, run_id=run_id, verbose=verbose, cell=cell)


@task(
    help={"cell": "the cell id, as `invoke list` prints it",
          "axis": "the axis to walk: accelerate, torch, nccl, cuda or image (an image stack's tags)",
          "good": "the last release (or image tag) known to work for this cell", "bad": "the first one known not to",
          "versions": "the releases to walk, comma-separated (default: the index's, through pip on this host; "
                      "cuda and image: required, image tags in the order they were made)",
          "metric": "what makes a step bad: outcome (default: it ends as the bad end did) or busbw (its bandwidth "
                    "regressed against the good end's, compare's rule)",
          "threshold": "--metric busbw: the relative drop that counts, beyond the noise (default 0.10)",
          "matrix": SELECT_HELP["matrix"], "engine": RUN_HELP["engine"], "gpus": RUN_HELP["gpus"],
          "ranks": RUN_HELP["ranks"], "results": "results folder (default results/)",
          "bisect_id": "the name the step runs start with (default from the cell, the axis and the ends)",
          "max_steps": "steps to run before stopping (default 20); the same command goes on from there",
          "seconds": "time for the whole search in seconds (default 21600); a step under way is finished",
          "dry_run": "print the releases the search walks, the n/a ones with why, and the worst-case steps; run nothing",
          "verbose": VERBOSE_HELP},
)
def bisect(c, cell, axis, good, bad, versions=None, matrix=None, engine=None, gpus=None, ranks=None, results=None,
           bisect_id=None, max_steps="20", seconds="21600", metric="outcome", threshold="0.10", dry_run=False,
           verbose=False):
    """Find the release of one axis that broke a cell: each step an ordinary supervised run, images and wheels reused."""
    def run() -> int:
        commands = _commands()
        options = commands.MatrixOptions(engine=engine, gpus=gpus, ranks=_number("--ranks", ranks, int, "2"),
                                         results=_results(results), dry_run=dry_run, verbose=verbose)
        listed = tuple(v.strip() for v in (versions or "").split(",") if v.strip())
        return commands.bisect(_selection(matrix, (), ()), options, commands.BisectOptions(
            cell, axis, good, bad, listed, _number("--max-steps", max_steps, int, "20"),
            _number("--seconds", seconds, float, "21600"), bisect_id, metric,
            _number("--threshold", threshold, float, "0.10")))

    _exit(guarded(run))


@task(
    iterable=["slurm_arg"],
    help={"nodes": "the nodes to test: all (default: every node of the partition) or a Slurm node list (n1,n2 or "
                   "'n[1-4]'); down and drained ones are reported, not tried",
          "cell": "the cell to run (default: the matrix's first cell of the default variant)",
          "matrix": SELECT_HELP["matrix"], "partition": SLURM_HELP["partition"], "account": SLURM_HELP["account"],
          "time": SLURM_HELP["time"], "slurm_arg": SLURM_HELP["slurm_arg"],
          "gpus_per_node": "GPU cells: GPUs of each node, one rank on each (sbatch --gpus-per-node)",
          "node_runtime": SLURM_HELP["node_runtime"],
          "ranks_per_node": "CPU cells: ranks on each node (default 2; a pair runs twice as many)",
          "all_pairs": "every pair of nodes (default: every pair up to 4 nodes, else a ring of pairs)",
          "baseline": "an earlier fleet run's id: each node also against itself there (the canary after its upgrade)",
          "drain": "run the printed `scontrol update ... State=DRAIN` line of each suspect node",
          "fleet_id": "the run's id (default fleet-<time>); the same id goes on after Ctrl-C",
          "threshold": "the relative drop that counts against the fleet, beyond its noise (default 0.10)",
          "wait": "seconds a job may wait for a busy node before that node is reported (default 600)",
          "results": "results folder (default results/)", "json": "the fleet's summary as JSON on stdout",
          "dry_run": "print each node's and pair's batch script and sbatch line; run nothing",
          "verbose": VERBOSE_HELP},
)
def fleet(c, nodes="all", cell=None, matrix=None, partition=None, account=None, time=None, slurm_arg=None,
          gpus_per_node=None, node_runtime=None, ranks_per_node="2", all_pairs=False, baseline=None, drain=False,
          fleet_id=None, threshold="0.10", wait="600", results=None, json=False, dry_run=False, verbose=False):
    """The canonical cell on every node of a partition at once, then between nodes in pairs: outliers and bad links named."""
    def run() -> int:
        from .engines.slurm import SlurmOptions
        from .fleetrun import FleetOptions, fleet_run

        slurm = SlurmOptions(1, partition, account, time, tuple(slurm_arg or ()),
                             _number("--gpus-per-node", gpus_per_node, int, "8"), node_runtime or "host")
        options = _commands().MatrixOptions(results=_results(results), dry_run=dry_run, verbose=verbose)
        return fleet_run(_selection(matrix, (), ()), options, slurm, FleetOptions(
            nodes, cell, _number("--ranks-per-node", ranks_per_node, int, "2"), all_pairs, baseline, drain, fleet_id,
            _number("--threshold", threshold, float, "0.10"), _number("--wait", wait, float, "600"), json))

    _exit(guarded(run))


@task(name="list", iterable=["only", "exclude", "image"], help={**SELECT_HELP, "json": "machine-readable"})
def list_(c, matrix=None, only=None, exclude=None, image=None, json=False):
    """Print the expanded cells of the matrix, n/a ones with the reason they cannot exist."""
    _exit(guarded(lambda: _commands().list_cells(_selection(matrix, only, exclude, image), as_json=json)))


@task(
    iterable=["only", "exclude", "image"],
    help={**SELECT_HELP, **BUILD_HELP, "jobs": "images built in parallel (default 1)", "verbose": VERBOSE_HELP},
)
def build(c, matrix=None, only=None, exclude=None, image=None, rebuild=False, wheelhouse=None, ca_bundle=None, results=None,
          run_id=None, jobs="1", verbose=False):
    """Build the images of the selected cells, cached by content hash; logs under results/<run>/builds/."""
    res = _results(results)
    _exit(guarded(lambda: _commands().build(_selection(matrix, only, exclude, image),
                                         _build_options(rebuild, wheelhouse, ca_bundle), res, run_id,
                                         _number("--jobs", jobs, int, "2"), verbose)))


@task(name="base-image", help={"ref": "image to make (default harness-base:bookworm)", "mirror": "Debian mirror URL",
                               "verbose": VERBOSE_HELP})
def base_image(c, ref="harness-base:bookworm", mirror=None, verbose=False):
    """Make the local Debian base image with debootstrap + docker import (no registry needed)."""
    _exit(guarded(lambda: _commands().base_image(ref, mirror, verbose)))


@task(help={"run": "run id or folder (default: the latest)", "results": "results folder", "out": "write to a file"})
def report(c, run=None, results=None, out=None):
    """Render a run's compatibility report as markdown (default: the latest run)."""
    res = _results(results)
    _exit(guarded(lambda: _commands().report(run, res, Path(out) if out else None)))


@task(name="bugreport", help={"cell": "the cell id (as in the report)", "run": "run id or folder (default: the latest)",
                              "results": "results folder", "out": "write to a file",
                              "for": "the tracker whose template order to follow: nccl (default), pytorch, accelerate"})
def bugreport(c, cell, run=None, results=None, out=None, for_="nccl"):
    """Write the body of an upstream bug report for one cell: what failed, versions, variables, key lines, stacks."""
    res = _results(results)
    _exit(guarded(lambda: _commands().bugreport(cell, run, res, for_, Path(out) if out else None)))


@task(help={"base": "the run before", "new": "the run after (may be the same run, with --stacks)",
            "threshold": "busbw change that counts (default 0.1)", "results": "results folder",
            "out": "also write the diff to a file",
            "stacks": "OLD=NEW: stack OLD's cells in BASE against stack NEW's in NEW, by variant and launcher "
                      "(last month's image against this month's)"})
def compare(c, base, new, threshold="0.1", results=None, out=None, stacks=None):
    """Diff two runs by cell id; exit 1 when something regressed (the driver-upgrade check)."""
    res = _results(results)
    _exit(guarded(lambda: _commands().compare(base, new, res, _number("--threshold", threshold, float, "0.1"),
                                           Path(out) if out else None, stacks)))


@task(help={"run": "run id or folder (default: the latest)", "to": "docs folder to publish into",
            "results": "results folder"})
def publish(c, run=None, to=None, results=None):
    """Publish a run's report and bandwidth plot into a docs tree, with an index of hosts and runs."""
    if not to:
        raise Exit("error: `publish` needs --to DOCS_FOLDER. Fix: e.g. --to docs/compat.", code=2)
    res = _results(results)
    _exit(guarded(lambda: _commands().publish(run, Path(to), res)))


@task(iterable=["slurm_arg"], help={
    "gpus": "GPU ids the run will ask for (checked to exist)", "engine": "docker (default), host or slurm", **SLURM_HELP,
    "gpu_api": GPU_API_HELP + " (here: check that one way only; default: check both)",
    "results": "results folder (slurm: checked to be seen by every node; default: results/)"})
def doctor(c, gpus=None, gpu_api=None, engine=None, nodes=None, partition=None, account=None, time=None, slurm_arg=None,
           gpus_per_node=None, node_runtime=None, results=None):
    """Check the engine, how containers get GPUs (CDI or the NVIDIA runtime), disk, /dev/shm and memlock as a
    container sees them (slurm: the controller, the partition, the shared results folder and the runtime on the nodes)."""
    _exit(guarded(lambda: _commands().doctor(gpus, engine, _slurm(nodes, partition, account, time, slurm_arg,
                                                                               gpus_per_node, node_runtime),
                                             _results(results), gpu_api)))


@task(help={"images": "also remove the harness's images (not the base image)"})
def clean(c, images=False):
    """Remove every container the harness left (and, with --images, its images)."""
    _exit(guarded(lambda: _commands().clean(images)))
