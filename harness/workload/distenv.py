"""Where this rank sits in the world, and the NCCL/torch variables set before init.

Launchers (accelerate launch --multi_gpu, torchrun) export RANK/LOCAL_RANK/WORLD_SIZE/MASTER_*;
a plain ``python run.py`` or a single-process ``accelerate launch`` does not, and then this rank
is a world of one that still builds a real process group over 127.0.0.1.
"""
from __future__ import annotations

import os
import re
import socket
from typing import Dict, MutableMapping, Optional, Tuple


class DistEnv:
    """Rank facts read from (or defaulted into) the environment."""

    def __init__(self, rank: int, local_rank: int, world: int, master_addr: str,
                 master_port: str, from_launcher: bool) -> None:
        self.rank = rank
        self.local_rank = local_rank
        self.world = world
        self.master_addr = master_addr
        self.master_port = master_port
        self.from_launcher = from_launcher

    def as_dict(self) -> Dict[str, object]:
        return dict(self.__dict__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (good enough for a world of one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _int(environ: MutableMapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "")
    try:
        return int(value)
    except ValueError:
        return default


def resolve_dist_env(environ: MutableMapping[str, str]) -> DistEnv:
    """Read RANK/LOCAL_RANK/WORLD_SIZE/MASTER_*; default to a world of one.

    For a world of one, MASTER_ADDR/MASTER_PORT are written into ``environ`` (env:// init needs
    them). RANK/WORLD_SIZE are deliberately not, so Accelerate sees a plain single process, as a
    user's own single-process script would.
    """
    from_launcher = "RANK" in environ and "WORLD_SIZE" in environ
    if from_launcher:
        rank = _int(environ, "RANK", 0)
        world = _int(environ, "WORLD_SIZE", 1)
        local_rank = _int(environ, "LOCAL_RANK", rank)
    else:
        rank, world, local_rank = 0, 1, 0
    if not environ.get("MASTER_ADDR"):
        environ["MASTER_ADDR"] = "127.0.0.1"
    if not environ.get("MASTER_PORT"):
        environ["MASTER_PORT"] = str(free_port())
    return DistEnv(rank, local_rank, world, environ["MASTER_ADDR"], environ["MASTER_PORT"],
                   from_launcher)


def parse_version(text: str) -> Tuple[int, ...]:
    """Leading numeric release of a version string: '2.7.1+cu126' -> (2, 7, 1)."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    if not match:
        return ()
    return tuple(int(x) for x in match.group(1).split("."))


def async_error_var(torch_version: str) -> str:
    """Name of the async-error-handling variable: renamed with a TORCH_ prefix in torch 2.2."""
    return "TORCH_NCCL_ASYNC_ERROR_HANDLING" if parse_version(torch_version) >= (2, 2) \
        else "NCCL_ASYNC_ERROR_HANDLING"


def set_init_env(environ: MutableMapping[str, str], out_dir: str, rank: int,
                 torch_version: str) -> Dict[str, Optional[str]]:
    """Set NCCL debug logging and async error handling unless the host already chose.

    Returns the variables this function set (name -> value), for the record.
    """
    wanted = {
        "NCCL_DEBUG_FILE": os.path.join(out_dir, "nccl-rank%d.log" % rank),
        async_error_var(torch_version): "1",
    }
    if "NCCL_DEBUG" not in environ:  # host may set NCCL_DEBUG=WARN to ask for less
        wanted["NCCL_DEBUG"] = "INFO"
        wanted["NCCL_DEBUG_SUBSYS"] = "INIT,P2P,SHM,NET,GRAPH,ENV"
    changed: Dict[str, Optional[str]] = {}
    for name, value in wanted.items():
        if name not in environ:
            environ[name] = value
            changed[name] = value
    return changed
