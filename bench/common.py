"""Shared by the benchmarks: timing of whole commands, medians, and the CPU cell they measure."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CPU_STACK = "cpu-torch2.13.0-acc1.15.0"
CPU_CELL = f"{CPU_STACK}+default"


def timed(argv: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of a whole command, which must succeed."""
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=1800, **kwargs)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc


def invoke(*args: str) -> list[str]:
    return [sys.executable, "-m", "invoke", *args]


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> int:
    print("TARGETS MET" if ok else "TARGET MISSED")
    return 0 if ok else 1
