"""Offline and proxied sites: wheels are downloaded on the host (which has the proxy, the CA bundle and
the pip configuration) and installed in the build with --no-index. The set of files chosen for a
requirement list is locked on first download, so later builds are reproducible and decide fast."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path

from . import proc
from .errors import InfraError

_SAVED = re.compile(r"^\s*(?:Saved|File was already downloaded)\s+(\S+\.whl)\s*$")
# Every manylinux tag a glibc-2.35 image can install (Ubuntu 22.04; Debian 12 has 2.36), newest first:
# pip's --platform takes exact tags, so a wheel tagged manylinux_2_18 needs that very tag listed.
PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)) + (
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any")


@lru_cache(maxsize=None)
def reachable(url: str, timeout: float = 5.0) -> bool:
    """Whether an index answers at all: an unreachable extra index costs pip retries on every package."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def lock_key(requirements: list[str], python: str, extra_index: str, no_deps: bool = False) -> str:
    blob = json.dumps({"req": requirements, "python": python, "index": extra_index, **({"no_deps": True} if no_deps else {})},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def collect(wheelhouse: Path, requirements: list[str], python: str, extra_index: str, log: Path,
            no_deps: bool = False) -> list[Path]:
    """The wheels (closure of `requirements` for CPython `python` on Linux x86_64) in `wheelhouse`.

    pip runs with the host's own configuration (index, find-links, proxy, CA); a fully offline host
    sets PIP_NO_INDEX=1 and PIP_FIND_LINKS=<wheelhouse> after filling the folder by hand."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    lock = wheelhouse / ".locks" / f"{lock_key(requirements, python, extra_index, no_deps)}.json"
    if lock.is_file():
        names = json.loads(lock.read_text())["wheels"]
        files = [wheelhouse / n for n in names]
        if all(f.is_file() for f in files):
            return files
    argv = [sys.executable, "-m", "pip", "download", "--dest", str(wheelhouse), "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp"]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    if extra_index and reachable(extra_index):
        argv += ["--extra-index-url", extra_index]
    if no_deps:
        argv.append("--no-deps")
    result = proc.run(argv + requirements, timeout=1800, log=log)
    if result.returncode != 0 or result.timed_out:
        tail = [l for l in result.output.splitlines() if l.startswith("ERROR")][-2:]
        raise InfraError(
            f"--wheelhouse {wheelhouse}: pip could not download {' '.join(requirements)} for Python {python} "
            f"({' '.join(tail) or 'see ' + str(log)}). Fix: check the versions and the host's pip index/proxy "
            "settings, or put the wheels into that folder by hand."
        )
    names = sorted({Path(m.group(1)).name for m in map(_SAVED.match, result.output.splitlines()) if m})
    if not names:
        raise InfraError(f"--wheelhouse {wheelhouse}: pip reported no wheel for {requirements}; see {log}.")
    if extra_index.endswith("/cpu") and any(n.startswith("nvidia_") for n in names):
        raise InfraError(
            f"--wheelhouse {wheelhouse}: pip resolved a CUDA build of torch for a CPU stack, since {extra_index} "
            "was not reachable. Fix: make that index reachable, or put the CPU torch wheel into the host's pip "
            "find-links (PIP_FIND_LINKS) first."
        )
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"requirements": requirements, "python": python, "wheels": names}, indent=1))
    return [wheelhouse / n for n in names]
