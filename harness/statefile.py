"""The harness's own files, read back: wheel locks, the file-hash cache, the Slurm job notes, publish's
sidecars, builds.json. A harness wrote each of them whole (a temporary file, then a rename), so one that
is not what it writes was damaged or tampered with. Each is read the one way here: a regular file
(opened without blocking, so a FIFO in its place is refused, not waited on forever) of a bounded size,
UTF-8 JSON of its model's shape; what is wrong is a Damaged naming the key. Each reader decides, and
says why, whether damage stops the command (errors.StateError, with the file and the fix) or the file
counts as absent (a cache, which is rebuilt).

Seen before (issue 22): a wheel lock whose `wheels` was not a list of names, and a published sidecar of
the wrong JSON type, were tracebacks (the sidecar's in every later publish); a lock naming
`../../etc/passwd` put that file into the build context; a FIFO as a job note hung every command."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, TypeVar

from .codec import Model, RecordError, shown

M = TypeVar("M", bound=Model)


class Damaged(ValueError):
    """A state file that is not what the harness writes there; str() says what is wrong, and where."""


# what open_regular refuses, as errno: a link (O_NOFOLLOW), a device, FIFO or socket, a second name
REFUSED = frozenset((errno.ELOOP, errno.EINVAL, errno.EMLINK))


def open_regular(path: Path, one_name: bool = False, writable: bool = False) -> int:
    """A descriptor of `path` for reading (and writing, when `writable`), only if it is a regular file
    reached without a link (O_NOFOLLOW: a link the harness never writes could name any file), opened without
    blocking (a FIFO in its place is refused, not waited on) and, with `one_name`, with no other name (a hard
    link); an OSError whose errno is in REFUSED otherwise. The one opener of files read back: the harness's
    own (here) and what ranks write (rankfiles.py)."""
    mode = os.O_RDWR if writable else os.O_RDONLY
    fd = os.open(path, mode | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", str(path))
        if one_name and info.st_nlink != 1:
            raise OSError(errno.EMLINK, f"a hard link ({info.st_nlink} names): it may be any file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes reached without a link, else Damaged.
    FileNotFoundError and the other OSErrors (a folder that cannot be read) are the caller's."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        if exc.errno not in REFUSED:
            raise
        raise Damaged("a link, not followed" if exc.errno == errno.ELOOP else "not a regular file") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)  # a buffered read returns all it asks for, or up to the file's end
    if len(data) > limit:
        raise Damaged(f"larger than {limit} bytes, far beyond any the harness writes")
    return data


# A record.json of a real run is a dozen levels deep, the harness's other files fewer; beyond this it is damage
MAX_DEPTH = 64
_TOO_DEEP = f"JSON nested too deeply (more than {MAX_DEPTH} levels)"


def _depth(data: Any) -> int:
    """How deeply `data` nests (without recursion: a damaged file may nest past Python's stack)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level <= MAX_DEPTH and isinstance(item, (dict, list)):
            stack.extend((x, level + 1) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(path: Path, limit: int) -> Any:
    """The JSON value in `path` (read_bytes's rules), at most MAX_DEPTH levels deep, else Damaged saying why
    it is not such JSON."""
    data = read_bytes(path, limit)
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise Damaged(_TOO_DEEP) from None
    except UnicodeDecodeError as exc:
        raise Damaged(f"not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise Damaged(f"not JSON ({exc})") from None
    if _depth(value) > MAX_DEPTH:
        raise Damaged(_TOO_DEEP)
    return value


def read_model(cls: type[M], path: Path, limit: int) -> M:
    """The `cls` value in `path` (read_json's rules), else Damaged naming the first key that does not fit."""
    data = read_json(path, limit)
    if not isinstance(data, dict):
        raise Damaged(f"not a JSON object but {shown(data)}")
    try:
        return cls.read(data)
    except RecordError as exc:
        raise Damaged(str(exc)) from None
