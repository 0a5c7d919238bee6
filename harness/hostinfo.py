"""Facts about the host a run happened on, so that runs months apart and on other machines can be
compared and a regression traced to the driver or the engine."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from . import REPO_ROOT, __version__, proc
from .escape import strip_colours, terminal


def _run(argv: list[str], timeout: float = 20) -> str | None:
    """A command's output as run.json keeps it, plain text: nvidia-smi's colour codes (seen in `topo -m`,
    issue 22) stripped, any other control character shown as its code (escape.terminal), lines kept."""
    if proc.which(argv[0]) is None:
        return None
    try:
        result = proc.run(argv, timeout=timeout)
    except Exception:  # noqa: BLE001 - a missing fact is recorded as missing, never fatal
        return None
    return terminal(strip_colours(result.output), lines=True).strip() if result.returncode == 0 else None


def os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def driver_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return None


def facts(engine: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything run.json says about the host, with the engine's own facts (Engine.facts); each fact
    None where it cannot be read."""
    gpus = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "os": os_name(),
        "kernel": platform.release(),
        "driver": driver_version(),
        "gpus": gpus.splitlines() if gpus else [],
        "topo": _run(["nvidia-smi", "topo", "-m"]),
        "topo_p2p_read": _run(["nvidia-smi", "topo", "-p2p", "r"]),
        "harness_version": __version__,
        "git_commit": _run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"]),
    }
    if engine is not None:
        info["engine"] = engine
    return info
