"""`python -m harness`: the same commands as `invoke`, for hosts without invoke."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from . import commands, images
from .errors import HarnessError


def _selection(args: argparse.Namespace) -> commands.Selection:
    return commands.Selection(args.matrix, tuple(args.only), tuple(args.exclude))


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--matrix", type=Path, help="matrix file (default: matrix.yaml with GPUs, matrix-cpu.yaml without)")
    p.add_argument("--only", action="append", default=[], help="glob on the cell id, or key=glob; repeatable")
    p.add_argument("--exclude", action="append", default=[], help="glob on the cell id, or key=glob; repeatable")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    mx = sub.add_parser("matrix", help="build what is missing and run the selected cells (--list: only print them)")
    _add_selection(mx)
    mx.add_argument("--list", action="store_true", help="print the expanded cells, n/a ones with their reason, and stop")
    mx.add_argument("--json", action="store_true", help="with --list: machine-readable")
    mx.add_argument("--gpus", help="`all` or GPU indexes like 0,1 (default: all GPUs for GPU cells)")
    mx.add_argument("--engine", choices=("docker", "host"), help="default: docker when reachable, else host")
    mx.add_argument("--ranks", type=int, help="ranks of a CPU cell (default: the matrix file's)")
    mx.add_argument("--retries", type=int, default=0, help="re-run hang and infra-error cells up to N times")
    mx.add_argument("--resume", action="store_true", help="continue a run (--run-id, default the latest)")
    mx.add_argument("--timeout", action="append", default=[], help="PHASE=SECONDS stall threshold override; repeatable")
    mx.add_argument("--jobs", type=int, default=1, help="images built in parallel")
    mx.add_argument("--dry-run", action="store_true", help="print what would be built and run; run nothing")
    ls = sub.add_parser("list", help="print the expanded cells, n/a ones with their reason")
    _add_selection(ls)
    ls.add_argument("--json", action="store_true")
    dr = sub.add_parser("doctor", help="check the engine, NVIDIA runtime, GPUs, disk, /dev/shm and memlock")
    dr.add_argument("--gpus")
    dr.add_argument("--engine", choices=("docker", "host"))
    cl = sub.add_parser("clean", help="remove the harness's containers (and, with --images, its images)")
    cl.add_argument("--images", action="store_true")
    b = sub.add_parser("build", help="build the images of the selected cells (cached by content hash)")
    _add_selection(b)
    b.add_argument("--jobs", type=int, default=1, help="images built in parallel")
    for p_ in (mx, b):
        p_.add_argument("--rebuild", action="store_true", help="build even when an image with the same content exists")
        p_.add_argument("--wheelhouse", type=Path, help="download wheels on the host into DIR and install them offline")
        p_.add_argument("--ca-bundle", type=Path, help="PEM CA bundle for pip/apt inside builds (TLS-intercepting proxies)")
        p_.add_argument("--results", type=Path, default=commands.results.DEFAULT_RESULTS, help="results folder")
        p_.add_argument("--run-id", help="name of the run folder (default: a new timestamped one)")
    rp = sub.add_parser("report", help="markdown report of a run (default: the latest)")
    rp.add_argument("run", nargs="?", help="run id or folder")
    rp.add_argument("--results", type=Path, default=commands.results.DEFAULT_RESULTS)
    rp.add_argument("--out", type=Path, help="write to this file instead of stdout")
    cp = sub.add_parser("compare", help="regression diff of two runs (exit 1 when something regressed)")
    cp.add_argument("base")
    cp.add_argument("new")
    cp.add_argument("--results", type=Path, default=commands.results.DEFAULT_RESULTS)
    cp.add_argument("--threshold", type=float, default=0.10, help="busbw change that counts (fraction, default 0.1)")
    cp.add_argument("--out", type=Path)
    pb = sub.add_parser("publish", help="write a run's report and plot into a docs tree, with an index")
    pb.add_argument("run", nargs="?")
    pb.add_argument("--to", type=Path, required=True)
    pb.add_argument("--results", type=Path, default=commands.results.DEFAULT_RESULTS)
    bi = sub.add_parser("base-image", help="make the local Debian base image with debootstrap (no registry)")
    bi.add_argument("--ref", default="harness-base:bookworm")
    bi.add_argument("--mirror", help="Debian mirror URL for debootstrap")
    return p


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "list" or (args.command == "matrix" and args.list):
        return commands.list_cells(_selection(args), as_json=args.json)
    if args.command == "doctor":
        return commands.doctor(args.gpus, args.engine)
    if args.command == "clean":
        return commands.clean(args.images)
    options = images.BuildOptions.from_env(rebuild=args.rebuild, wheelhouse=args.wheelhouse, ca_bundle=args.ca_bundle) \
        if args.command in ("matrix", "build") else None
    if args.command == "matrix":
        return commands.run_matrix(_selection(args), commands.MatrixOptions(
            engine=args.engine, gpus=args.gpus, ranks=args.ranks, retries=args.retries, results=args.results,
            run_id=args.run_id, resume=args.resume, timeouts=tuple(args.timeout), jobs=args.jobs, dry_run=args.dry_run,
            as_json=args.json, build=options))
    if args.command == "build":
        return commands.build(_selection(args), options, args.results, args.run_id, args.jobs)
    if args.command == "report":
        return commands.report(args.run, args.results, args.out)
    if args.command == "compare":
        return commands.compare(args.base, args.new, args.results, args.threshold, args.out)
    if args.command == "publish":
        return commands.publish(args.run, args.to, args.results)
    if args.command == "base-image":
        return commands.base_image(args.ref, args.mirror)
    raise AssertionError(args.command)


def guarded(fn: Callable[[], int]) -> int:
    """Run a command: a HarnessError becomes its message and exit code, Ctrl-C exit 130, no traceback."""
    try:
        return fn()
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return guarded(lambda: dispatch(args))
