"""The files a cell's ranks write into its attempt folder (events, pid files, NCCL debug files, thread
dumps, the launcher's output), read as what they are: input from the system under test, which is broken
some of the time by definition. Issue 22 saw, on a fresh clone: a rank that replaced its NCCL debug file
with a link to an endless device made the harness read it whole (MemoryError, exit 1, no record); links
planted in the attempt folder were followed and their targets copied into record.json (on the docker
engine the folder is a bind mount: a link made inside the container names a host path); 500 MB NCCL logs,
a 600 MB event line without a newline and 400 MB of stdout per rank took the harness to 2.3 GB.

So every read here: opens without following a link (O_NOFOLLOW) and without blocking on a FIFO
(O_NONBLOCK); reads only a regular file with one name (a hard link could name any file its owner can
read); and reads at most a stated number of bytes. Anything else is an OSError saying why, which callers
treat like a missing file (and say so where the record has room)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from . import statefile

# Beyond these a file is cut, never read whole. A real NCCL INFO log of one rank's init is under 1 MB (8
# H200s, 32 channels: 0.4 MB); the facts the parser wants are at its start (version, transports, env) and
# its end (the last warnings and errors), so a longer log is read as its head and its tail.
LOG_HEAD = 16 << 20
LOG_TAIL = 4 << 20
LINE = 8192  # longer lines are cut to this (no NCCL line is near it)


def open_regular(path: Path) -> int:
    """A descriptor of `path` for reading (statefile.open_regular's rules, and one name only: a hard link in the
    attempt folder could name any file the ranks' user can read)."""
    return statefile.open_regular(path, one_name=True)


def head(path: Path, limit: int) -> bytes:
    """At most the first `limit` bytes of `path`."""
    fd = open_regular(path)
    try:
        return _read(fd, limit)
    finally:
        os.close(fd)


def tail(path: Path, limit: int) -> tuple[bytes, bool]:
    """At most the last `limit` bytes of `path`, from a line's start when the file is longer, and whether
    it was cut."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        if start == 0:
            return _read(fd, limit), False
        os.lseek(fd, start - 1, os.SEEK_SET)  # one byte more: was the window cut mid-line?
        data = _read(fd, limit + 1)
    finally:
        os.close(fd)
    cut = data.find(b"\n")
    return (data[cut + 1:] if cut >= 0 else b""), True


def text(path: Path, limit: int) -> str:
    """A small file (a pid file, a probe's answer) as text: at most `limit` bytes, undecodable bytes replaced."""
    return head(path, limit).decode("utf-8", errors="replace")


def lines(path: Path, first: int = LOG_HEAD, last: int = LOG_TAIL, width: int = LINE) -> Iterator[str]:
    """The lines of a log, each cut to `width` characters: all of them when the file is at most
    `first + last` bytes, else those of its first `first` bytes, one line saying how much was left out,
    then those of its last `last` bytes. Read in pieces: memory stays at a piece, whatever the file."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size <= first + last:
            yield from _lines(fd, size, width)
            return
        yield from _lines(fd, first, width)
        yield f"[harness: {size - first - last} bytes of this log left out; its last {last} bytes follow]"
        os.lseek(fd, size - last, os.SEEK_SET)
        skip = True  # the window starts mid-line
        for line in _lines(fd, last, width):
            if not skip:
                yield line
            skip = False
    finally:
        os.close(fd)


PIECE = 1 << 20

# The launcher's output (host and slurm engines: launcher.log in the attempt folder, written by the ranks'
# launcher with O_APPEND) is kept to at most LOG_CAP on disk: its first and last LOG_KEEP bytes.
LOG_CAP = 64 << 20
LOG_KEEP = 4 << 20
CUT = b"\n[harness: the output between here and the last %d MiB was left out: more than %d MiB in all]\n"


def cap(path: Path, limit: int = LOG_CAP, keep: int = LOG_KEEP) -> bool:
    """Cut a growing log in place when it is over `limit`: its first `keep` bytes, a line saying so, its
    last `keep` bytes; whether it was cut. The writer appends (O_APPEND), so it goes on writing after the new
    end; what it writes between the read of the tail and the truncation is lost (a fraction of a second
    of output that is being cut anyway)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size <= limit:
            return False
        last = os.pread(fd, keep, info.st_size - keep)
        mark = CUT % (keep >> 20, limit >> 20)
        os.pwrite(fd, mark + last, keep)
        os.ftruncate(fd, keep + len(mark) + len(last))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _read(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, PIECE))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _lines(fd: int, limit: int, width: int) -> Iterator[str]:
    """The lines of the next `limit` bytes of `fd`; a line longer than `width` is cut, its rest skipped."""
    partial, left, skipping = b"", limit, False
    while left > 0:
        chunk = os.read(fd, min(left, PIECE))
        if not chunk:
            break
        left -= len(chunk)
        parts = chunk.split(b"\n")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if skipping:
                if not last:
                    skipping = False
                continue
            partial += part
            if last:
                if len(partial) > width:  # a line that goes on: keep its start, skip to its end
                    yield partial[:width].decode("utf-8", errors="replace")
                    partial, skipping = b"", True
                continue
            yield partial[:width].decode("utf-8", errors="replace")
            partial = b""
    if partial:
        yield partial[:width].decode("utf-8", errors="replace")
