"""Command line of the workload (stdlib only, so bad flags fail before torch is imported)."""
from __future__ import annotations

import argparse
import json
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .bandwidth import COLLECTIVES

PHASES = ("fingerprint", "init", "prepare", "step", "check", "bandwidth", "teardown")
FAULT_ENV = "HARNESS_TEST_FAULTS"
# TEST ONLY (needs FAULT_ENV=1): "VAR=value" makes every rank hang in HANG_PHASE unless VAR has that
# value, a fault an NCCL variable cures, for the rescue search's tests on CPU: no real fault there is
# cured by an NCCL variable (gloo ignores them all). Set through a matrix variant's env.
HANG_UNLESS_ENV = "HARNESS_TEST_HANG_UNLESS"
HANG_PHASE = "prepare"  # where the seed hang is (DDP's first broadcast)

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

_UNITS = {"": 1, "B": 1, "K": KIB, "KB": KIB, "KIB": KIB, "M": MIB, "MB": MIB, "MIB": MIB,
          "G": GIB, "GB": GIB, "GIB": GIB}


def parse_size(text: str) -> int:
    """'4096', '8K', '1M', '1GiB' -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError("not a size: %r" % text)
    value = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if value <= 0:
        raise ValueError("size must be positive: %r" % text)
    return value


def parse_sizes(text: str) -> List[int]:
    return [parse_size(part) for part in text.split(",") if part.strip()]


def default_sizes(device: str) -> List[int]:
    """GPU: 8 KiB..512 MiB by 4x plus 1 GiB (the plateau needs >= 1 GiB); CPU: 4 KiB..16 MiB."""
    if device == "cuda":
        sizes = [8 * KIB * 4 ** k for k in range(10) if 8 * KIB * 4 ** k < GIB]
        return sizes + [GIB]
    return [4 * KIB * 4 ** k for k in range(7)]


def _expect_env(text: str) -> Dict[str, Optional[str]]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("--expect-env is not JSON: %s" % exc) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--expect-env must be a JSON object")
    return {str(k): (None if v is None else str(v)) for k, v in value.items()}


def _sizes(text: str) -> List[int]:
    try:
        sizes = parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not sizes:
        raise argparse.ArgumentTypeError("--sizes is empty")
    return sizes


def _collectives(text: str) -> Tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in COLLECTIVES]
    if unknown or "all_reduce" not in names:
        raise argparse.ArgumentTypeError("--collectives %r: name all_reduce and any of %s"
                                         % (text, ", ".join(COLLECTIVES)))
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run.py",
        description="NCCL/Accelerate compatibility workload: one rank, events to --out.")
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--sizes", type=_sizes, default=None,
                   help="bandwidth sweep sizes in bytes, comma-separated (K/M/G suffixes ok)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--trials", type=int, default=5,
                   help="timed trials per size; rows hold the median and the spread")
    p.add_argument("--init-timeout", type=float, default=60.0,
                   help="process group timeout in seconds")
    p.add_argument("--heartbeat", type=float, default=2.0, help="heartbeat interval in seconds")
    p.add_argument("--expect-env", type=_expect_env, default=None,
                   help="JSON object of the NCCL_* variables the host asked for")
    p.add_argument("--collectives", type=_collectives, default=("all_reduce",),
                   help="the sweep's collectives, comma-separated, all_reduce first (%s)" % ", ".join(COLLECTIVES))
    p.add_argument("--skip-bandwidth", action="store_true")
    p.add_argument("--fail-in", choices=PHASES, default=None,
                   help="TEST ONLY: raise at the start of PHASE (needs %s=1)" % FAULT_ENV)
    p.add_argument("--hold-at", choices=PHASES, default=None,
                   help="TEST ONLY: after phase_start of PHASE, wait until the file <out>/release "
                        "exists (a sync point for tests that signal a rank in that phase; needs %s=1)"
                   % FAULT_ENV)
    return p


def _hang_unless(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """HANG_UNLESS_ENV as (VAR, value), None when unset; refused (exit 2) without FAULT_ENV=1 or malformed."""
    text = env.get(HANG_UNLESS_ENV)
    if text is None:
        return None
    if env.get(FAULT_ENV) != "1":
        parser.error("%s is a test-only switch and acts only with %s=1 in the environment; refusing to run"
                     % (HANG_UNLESS_ENV, FAULT_ENV))
    var, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
        parser.error("%s=%r: expected VAR=value" % (HANG_UNLESS_ENV, text))
    return var, value


def parse_args(argv: Optional[Sequence[str]] = None,
               environ: Optional[Dict[str, str]] = None) -> argparse.Namespace:
    """Parse and validate; errors exit 2 through argparse, before anything else happens."""
    parser = build_parser()
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    for flag, value in (("--fail-in", args.fail_in), ("--hold-at", args.hold_at)):
        if value is not None and env.get(FAULT_ENV) != "1":
            parser.error("%s is a test-only switch and acts only with %s=1 in the "
                         "environment; refusing to run" % (flag, FAULT_ENV))
    args.hang_unless = _hang_unless(parser, env)
    if args.iters < 1:
        parser.error("--iters must be >= 1")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.trials < 1:
        parser.error("--trials must be >= 1")
    if args.init_timeout <= 0 or args.heartbeat <= 0:
        parser.error("--init-timeout and --heartbeat must be > 0")
    return args
