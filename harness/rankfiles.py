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
    with os.fdopen(open_regular(path), "rb") as handle:
        return handle.read(limit)  # a buffered read returns all it asks for, or up to the file's end


def tail(path: Path, limit: int) -> tuple[bytes, bool]:
    """At most the last `limit` bytes of `path`, from a line's start when the file is longer, and whether
    it was cut."""
    with os.fdopen(open_regular(path), "rb") as handle:
        start = max(0, os.fstat(handle.fileno()).st_size - limit)
        if start == 0:
            return handle.read(limit), False
        handle.seek(start - 1)  # one byte more: was the window cut mid-line?
        data = handle.read(limit + 1)
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


class Lines:
    """Bytes that arrive in pieces, split into lines of at most `width` bytes: a longer line comes out as its
    first `width` bytes, marked cut, and the rest of it is skipped up to its newline, so memory stays at a
    piece and a line whatever the input. The last line, not yet ended, waits in `partial`. The NCCL logs
    (lines) and the event files (supervise.EventTail) are split by it."""

    def __init__(self, width: int) -> None:
        self.width, self.partial, self.skipping = width, b"", False

    def feed(self, data: bytes) -> Iterator[tuple[bytes, bool]]:
        """The lines that `data` ends, each with whether it was cut."""
        parts = data.split(b"\n")
        for i, part in enumerate(parts):
            ended = i < len(parts) - 1
            if self.skipping:
                self.skipping = not ended  # the newline of the overlong line: skip no more
                continue
            self.partial += part
            if ended:
                line, self.partial = self.partial, b""
                yield line[:self.width], len(line) > self.width
            elif len(self.partial) > self.width:  # a line that goes on: keep its start, skip to its end
                yield self.partial[:self.width], True
                self.partial, self.skipping = b"", True


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
        fd = statefile.open_regular(path, one_name=True, writable=True)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if info.st_size <= limit:
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


def _lines(fd: int, limit: int, width: int) -> Iterator[str]:
    """The lines of the next `limit` bytes of `fd`, split by Lines."""
    split, left = Lines(width), limit
    while left > 0:
        chunk = os.read(fd, min(left, PIECE))
        if not chunk:
            break
        left -= len(chunk)
        yield from (line.decode("utf-8", errors="replace") for line, _ in split.feed(chunk))
    if split.partial:
        yield split.partial.decode("utf-8", errors="replace")
