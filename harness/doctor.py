"""`invoke doctor`: everything a run needs on this host, each problem with its fix. The engine says
what it needs (engines/*.checks); the host facts are read here."""

from __future__ import annotations

from pathlib import Path

from . import engines, hostinfo, reaper, results
from .engines.base import Check
from .engines.slurm import SlurmOptions
from .errors import EXIT_INFRA, EXIT_OK, InfraError
from .escape import terminal
from .progress import Progress
from .selection import check_gpu_api, check_gpus, gpus_visible


def checks(gpus_flag: str | None = None, engine_choice: str | None = None, slurm: SlurmOptions | None = None,
           results_dir: Path = results.DEFAULT_RESULTS, gpu_api_flag: str | None = None) -> list[Check]:
    # a bad --gpus (--gpu-api) is bad input, as it is for `invoke matrix` (exit 2 with the same message), not a check
    gpus = check_gpus(gpus_flag)
    gpu_api = check_gpu_api(gpu_api_flag)
    # none asked for: the host's own, as `invoke matrix` takes them for the GPU cells (issue 22: the doctor
    # checked no GPU on a GPU host)
    ids = ",".join(gpus) if gpus else "none asked for"
    if not gpus and gpus_flag is None and slurm is None and gpus_visible():
        gpus = check_gpus("all")
        ids = f"{','.join(gpus)} (none asked for: this host's, as `invoke matrix` takes them)"
    found = [Check("GPU ids", True, ids)]
    driver = hostinfo.driver_version()
    found.append(Check("NVIDIA driver", bool(driver) or not gpus_visible(), driver or "none (CPU cells only)",
                       "install the NVIDIA driver", blocking=bool(gpus)))
    try:
        engine = engines.choose(engine_choice or "docker", Progress(), slurm)
    except InfraError as exc:
        if engine_choice is not None:
            return found + [Check("Docker engine", False, str(exc))]
        # what `invoke matrix` does here (engines.choose without --engine): the host engine, said so, not a FAIL
        # (issue 22: the doctor said FAIL, exit 4, where the matrix ran and passed)
        found.append(Check("engine", False, f"host: {str(exc).split('. Fix:')[0]}, so `invoke matrix` runs the host "
                           "engine on the stack installed in this Python (NCCL variants still apply)",
                           "for the matrix in containers, start a Docker engine (scripts/setup.sh)", blocking=False))
        engine = engines.choose("host", Progress())
    return found + engine.checks(gpus, results_dir, gpu_api)


def render(found: list[Check]) -> str:
    width = max(len(c.name) for c in found)
    lines = []
    for check in found:
        mark = "ok  " if check.ok else ("FAIL" if check.blocking else "warn")
        lines.append(f"{mark} {check.name:<{width}}  {check.detail}")
        if not check.ok and check.fix:
            lines.append(f"     {'':<{width}}  fix: {check.fix.removeprefix('Fix: ')}")
    return "\n".join(lines)


def doctor(gpus_flag: str | None = None, engine_choice: str | None = None, slurm: SlurmOptions | None = None,
           results_dir: Path = results.DEFAULT_RESULTS, gpu_api_flag: str | None = None) -> int:
    """Print every check; exit 4 when something blocks a run."""
    reaper.sweep(Progress())  # what a dead harness left would skew what is checked
    found = checks(gpus_flag, engine_choice, slurm, results_dir, gpu_api_flag)
    print(terminal(render(found), lines=True))  # the details quote what engines and nvidia-smi answered
    return EXIT_INFRA if any(not c.ok and c.blocking for c in found) else EXIT_OK
