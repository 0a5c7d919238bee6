"""`python -m harness` and the `nccl-harness` script: an invoke Program over harness/tasks.py, the one
declaration of the commands, their flags, help texts and defaults (the repo root's tasks.py exposes the
same collection to `invoke`). This module adds only what every entry point shares: `guarded` (a
HarnessError is its message and exit code, Ctrl-C is 130, never a traceback) and, for the Program built
here, parse errors answered like every other bad input: exit 2, one paragraph naming the flag and the fix."""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
from typing import Callable, Iterator, Sequence

from invoke import Collection, Exit, ParseError, Program

from . import __version__
from .errors import EXIT_BAD_INPUT, HarnessError


def guarded(fn: Callable[[], int]) -> int:
    """Run a command: a HarnessError becomes its message and exit code, Ctrl-C exit 130, no traceback."""
    try:
        return fn()
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _dashed(name: str) -> str:
    return "--" + name.replace("_", "-") if len(name) > 1 else "-" + name


def _closest(word: str, candidates: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


class HarnessProgram(Program):
    """invoke's Program with a static namespace; its parse errors become exit 2 with a fix."""

    def parse_core(self, argv):
        with self._parse_errors():
            super().parse_core(argv)

    def parse_tasks(self) -> None:
        with self._parse_errors():
            try:
                super().parse_tasks()
            except ParseError as exc:
                self._help_as_positional([exc.context])
                raise
            self._help_as_positional(self.tasks)

    def _help_as_positional(self, contexts) -> None:
        """`compare --help` or `compare A -h`: invoke's parser takes the flag as BASE or NEW; show the help."""
        for ctx in contexts:
            if ctx is not None and any(a.value in ("--help", "-h") for a in ctx.positional_args):
                self.print_task_help(ctx.name)
                raise Exit

    def parse_cleanup(self) -> None:
        with self._parse_errors():
            super().parse_cleanup()

    @contextlib.contextmanager
    def _parse_errors(self) -> Iterator[None]:
        try:
            yield
        except ParseError as exc:
            raise Exit(f"error: {self.explain(exc)}", code=EXIT_BAD_INPUT) from None

    # -- messages ---------------------------------------------------------------------------------------

    def _tasks(self) -> list[str]:
        return sorted(self.collection.task_names) if getattr(self, "collection", None) else []

    def _help(self, task: str | None = None) -> str:
        return f"`{self.binary} {task} --help` lists its flags" if task else f"`{self.binary} --list` lists the tasks"

    def explain(self, exc: ParseError) -> str:
        """One paragraph for a parse error: what was wrong, where, and the fix."""
        msg, ctx = str(exc), exc.context
        task = ctx.name if ctx is not None and ctx.name else None
        unknown = re.fullmatch(r"No idea what '(.*)' is!", msg)
        if unknown:
            return self._unknown(unknown.group(1), ctx, task)
        needed = re.fullmatch(r"Flag <Argument: (\S+).*> needed value and was not given one!", msg)
        if needed:
            flag = _dashed(needed.group(1))
            arg = ctx.flags.get(flag) if ctx is not None and flag in ctx.flags else None
            what = f" ({arg.help})" if arg is not None and arg.help else ""
            where = f"`{task}` flag " if task else "flag "
            return f"{where}{flag} needs a value. Fix: give it one, e.g. {flag} VALUE{what}; {self._help(task)}."
        missing = re.fullmatch(r"'(.*)' did not receive required positional arguments: (.*)", msg)
        if missing and ctx is not None:
            usage = " ".join(a.name.upper() for a in ctx.positional_args)
            return (f"`{task}` needs {missing.group(2).replace(chr(39), '').upper()}. "
                    f"Fix: {self.binary} {task} {usage} ...; {self._help(task)}.")
        return f"{msg} Fix: {self._help(task)}."

    def _unknown(self, token: str, ctx, task: str | None) -> str:
        if token.startswith("-"):
            flags = list(ctx.flags.keys()) + list(ctx.inverse_flags.keys()) if ctx is not None else []
            core = list(self.initial_context.flags.keys())
            guess = _closest(token, flags) or _closest(token, core)
            where = f"`{task}` has no flag {token}" if task else f"{self.binary} has no option {token}"
            listing = self._help(task) if task else f"`{self.binary} --help` lists the options and tasks"
            if guess:
                return f"{where}; did you mean {guess}? Fix: use {guess}; {listing}."
            return f"{where}. Fix: {listing}."
        if ctx is not None and "--run" in ctx.flags and not ctx.flags["--run"].positional:
            return (f"`{task}` takes the run as a flag, not as an argument ({token!r}). "
                    f"Fix: {self.binary} {task} --run {token}.")
        guess = _closest(token, self._tasks())
        hint = f"; did you mean {guess}?" if guess else "."
        where = f" (after `{task}`, which takes no further arguments)" if task else ""
        return f"no task named {token!r}{where}{hint} Fix: {self._help()}."


def program(binary: str = "nccl-harness") -> HarnessProgram:
    from . import tasks  # imports this module for guarded

    return HarnessProgram(namespace=Collection.from_module(tasks), name="nccl-harness", binary=binary,
                          version=__version__, binary_names=[binary])


def main(argv: Sequence[str] | None = None, binary: str = "nccl-harness") -> int:
    """The console script and `python -m harness`: run the tasks; invoke exits with the task's code."""
    try:
        program(binary).run([binary, *argv] if argv is not None else None)
    except BrokenPipeError:  # `... --help | head`: the reader left; say nothing more
        sys.stdout = open(os.devnull, "w")
        return 141
    return 0
