"""The wheel store: every image installs torch, Accelerate and the NCCL pin from wheels resolved and
downloaded on the host (which has the proxy, the CA bundle and the pip configuration), never from an
index during the build. The file set chosen for a requirement list is locked on first download, so
every later command finds the same image without pip or the network, and a rebuild installs the same
packages. Where the store lies does not matter to an image: its tag hashes wheel names and contents."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from . import CACHE_DIR, proc, statefile
from .codec import Domain, Model, Str, Text
from .errors import InfraError, StateError

# One cache folder per user, shared by every checkout (the file-hash cache of images.py lives there too).
DEFAULT_STORE = CACHE_DIR / "wheels"
LOCKS = ".locks"

_SAVED = re.compile(r"^\s*(?:Saved|File was already downloaded)\s+(\S+\.whl)\s*$")
# Every manylinux tag a glibc-2.35 image can install (Ubuntu 22.04; Debian 12 has 2.36), newest first:
# pip's --platform takes exact tags, so a wheel tagged manylinux_2_18 needs that very tag listed.
PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)) + (
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any")


@cache
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


# A wheel's file name as pip saves it into the store: no folder, no `..`, no hidden file. A lock naming
# anything else (`../../etc/passwd`, `/etc/passwd`) would put that file into the build context.
WHEEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!%-]*\.whl")


def _wheel_name(name: str) -> str:
    if not WHEEL_NAME.fullmatch(name):
        raise PydanticCustomError("domain", "should be {should}",
                                  {"should": "a wheel's file name in the store (no folder, no `..`, ending in .whl)"})
    return name


class WheelLock(Model):
    """<store>/.locks/<key>.json: the wheel files (names in the store) chosen for a requirement list, with
    the list, the Python and the index they were resolved for."""

    requirements: tuple[Text, ...] = ()
    python: Str = ""
    index: Str = ""
    wheels: tuple[Annotated[str, Domain("str"), AfterValidator(_wheel_name)], ...]


MAX_LOCK_BYTES = 1 << 20  # a lock names a few dozen wheels: torch's CUDA closure is 45 names, 4 KB


def locked(store: Path, key: str) -> list[Path] | None:
    """The locked wheels of `key` when the lock and every file it names are in the store; None when there is
    no lock, or a file it names is gone (then resolved and downloaded again). A lock that cannot be read or
    is not one is a StateError: the lock is what makes a rebuild install the very same files, so it is not
    silently resolved again (that could put other wheels into the image without a word, and on an offline
    host it fails with pip's error instead of this one)."""
    path = store / LOCKS / f"{key}.json"
    fix = "delete it: the next build resolves that requirement list again with pip on this host and locks it anew"
    try:
        lock = statefile.read_model(WheelLock, path, MAX_LOCK_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(str(path), f"wheel lock cannot be read ({exc.strerror or exc})", fix) from None
    except statefile.Damaged as exc:
        raise StateError(str(path), f"not a wheel lock: {exc}", fix) from None
    files = [store / n for n in lock.wheels]
    return files if files and all(f.is_file() for f in files) else None


@contextmanager
def _exclusive(store: Path) -> Iterator[None]:
    """One download into a store at a time (parallel builds, two commands, two checkouts)."""
    with open(store / ".download.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def collect(store: Path, requirements: list[str], python: str, extra_index: str, log: Path,
            no_deps: bool = False) -> list[Path]:
    """The locked wheels (closure of `requirements` for CPython `python` on Linux x86_64) in `store`,
    downloaded and locked first when the store has no complete lock for them: with a lock, neither pip
    nor the network is touched.

    pip runs with the host's own configuration (index, find-links, proxy, CA); a fully offline host
    sets PIP_NO_INDEX=1 and PIP_FIND_LINKS=<dir> after filling that folder by hand."""
    key = lock_key(requirements, python, extra_index, no_deps)
    files = locked(store, key)
    if files:
        return files
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InfraError(f"wheel store {store}: cannot create it ({exc.strerror}). Fix: pass a writable folder "
                         "with --wheelhouse DIR.") from None
    with _exclusive(store):
        return locked(store, key) or _download(store, key, requirements, python, extra_index, log, no_deps)


def _download(store: Path, key: str, requirements: list[str], python: str, extra_index: str, log: Path,
              no_deps: bool) -> list[Path]:
    argv = [sys.executable, "-m", "pip", "download", "--dest", str(store), "--only-binary=:all:",
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
            f"wheel store {store}: pip could not download {' '.join(requirements)} for Python {python} "
            f"({' '.join(tail) or 'see ' + str(log)}). Fix: check the versions and the host's pip index/proxy "
            "settings, or put the wheels into that folder by hand."
        )
    names = sorted({Path(m.group(1)).name for m in map(_SAVED.match, result.output.splitlines()) if m})
    if not names:
        raise InfraError(f"wheel store {store}: pip reported no wheel for {requirements}; see {log}.")
    if extra_index.endswith("/cpu") and any(n.startswith("nvidia_") for n in names):
        raise InfraError(
            f"wheel store {store}: pip resolved a CUDA build of torch for a CPU stack, since {extra_index} "
            "was not reachable. Fix: make that index reachable, or put the CPU torch wheel into the host's pip "
            "find-links (PIP_FIND_LINKS) first."
        )
    lock = store / LOCKS / f"{key}.json"
    lock.parent.mkdir(exist_ok=True)
    tmp = lock.with_suffix(f".{os.getpid()}.tmp")
    lock_json = WheelLock(requirements=tuple(requirements), python=python, index=extra_index, wheels=tuple(names)).to_json()
    tmp.write_text(json.dumps(lock_json, indent=1))
    os.replace(tmp, lock)  # a reader sees no lock or the whole lock, never half of one
    return [store / n for n in names]
