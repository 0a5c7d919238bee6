"""Errors that end a command with a one-paragraph message and an exit code, never a traceback."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterable

from .escape import terminal

# Exit codes shared by every command (see README).
EXIT_OK = 0
EXIT_CELLS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOTHING_SELECTED = 3
EXIT_INFRA = 4
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP (the shell's 128 + SIGINT)


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice a typo most likely meant (`dokcer` -> docker, `--dry-rnu` -> --dry-run), or None."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


class HarnessError(Exception):
    """A problem the user can fix; `str()` is the whole message, `code` the exit code."""

    code = EXIT_BAD_INPUT

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class FileError(HarnessError):
    """An input file is malformed: names the file, the key path (and line) and the fix."""

    def __init__(self, path: str, key: str, problem: str, fix: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line else path
        key_part = f" at `{key}`" if key else ""
        super().__init__(f"{where}{key_part}: {problem} Fix: {fix}")
        self.path, self.key, self.problem, self.fix, self.line = path, key, problem, fix, line


class MatrixError(FileError):
    """matrix.yaml (or a --matrix file) is malformed."""


class HintsError(FileError):
    """A hints file (harness/hints.d/*.yaml, or the HARNESS_HINTS file or folder) is malformed."""


class InfraError(HarnessError):
    """The harness cannot work here (no engine, no debootstrap...): exit 4 with the way out."""

    code = EXIT_INFRA


class StateError(InfraError):
    """A file the harness wrote for itself and reads back (a wheel lock) is damaged or was tampered with:
    exit 4 (in a build: that image's build-error), naming the file, what is wrong (the key) and the fix."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{path}: {problem}. Fix: {fix}.")


class WriteError(InfraError):
    """A results file could not be written (full disk, read-only or unwritable folder): the run stops
    cleanly, keeping everything recorded before; str() names the path, the cause and the fix."""


class BuildFailed(HarnessError):
    """An image could not be built (the engine refused, or a Dockerfile step failed): its cells become
    build-error and the rest of the matrix goes on. str() is the key error line."""

    code = EXIT_CELLS_FAILED


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """The one line an interrupted command ends with: `interrupted`, or `interrupted by SIGTERM` (owner.Terminated
    carries the signal's name)."""
    return f"interrupted by {exc}" if str(exc) else "interrupted"


def guarded(fn: Callable[[], int]) -> int:
    """Run a command: a HarnessError becomes its message and exit code, Ctrl-C (SIGTERM, SIGHUP) exit 130,
    no traceback."""
    try:
        return fn()
    except HarnessError as exc:
        print(terminal(f"error: {exc}", lines=True), file=sys.stderr)  # messages quote what images and ranks said
        return exc.code
    except KeyboardInterrupt as exc:
        print(interrupted_line(exc), file=sys.stderr)
        return EXIT_INTERRUPTED
