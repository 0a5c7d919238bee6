"""`python -m harness`, the `nccl-harness` script and the `invoke` binary: an invoke Program over
harness/tasks.py, the one declaration of the commands, their flags, help texts and defaults. The `invoke`
binary gets here through the repo root's tasks.py (`take_over_invoke`). This module adds only what every
entry point shares: parse errors answered like every other bad input: exit 2, one paragraph naming the
flag, a did-you-mean where there is a close one, and the fix (the tasks run their commands through
errors.guarded: a HarnessError is its message and exit code, Ctrl-C is 130, never a traceback)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import cast

from invoke import Collection, Exit, ParseError, Program
from invoke.parser import ParserContext

from . import __version__, owner
from .errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, closest, interrupted_line


def _dashed(name: str) -> str:
    return "--" + name.replace("_", "-") if len(name) > 1 else "-" + name


class HarnessProgram(Program):
    """invoke's Program with a static namespace; its parse errors become exit 2 with a fix."""

    def parse_core(self, argv: list[str] | None) -> None:
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
            self._no_missing_values(self.tasks)

    def _help_as_positional(self, contexts: Iterable[ParserContext | None]) -> None:
        """`compare --help` or `compare A -h`: invoke's parser takes the flag as BASE or NEW; show the help."""
        for ctx in contexts:
            if ctx is not None and any(a.value in ("--help", "-h") for a in ctx.positional_args):
                # invoke types ParserContext.name as Optional[str]; only task contexts take positionals, and they are named
                self.print_task_help(cast(str, ctx.name))
                raise Exit

    def _no_missing_values(self, contexts: Iterable[ParserContext]) -> None:
        """Two missing values invoke lets through: a repeatable flag with nothing after it (`--only` last,
        or before another flag: its default [] stands in for the value, and the run would go ahead with
        no filter) and an empty one (`--gpus ''`, `--results=`), which a task would take as its default."""
        words = self.core.unparsed
        for ctx in contexts:
            for arg in {id(a): a for a in ctx.flags.values()}.values():
                if not arg.takes_value:
                    continue
                values = arg.value if isinstance(arg.value, list) else [arg.value] if arg.got_value else []
                names = [_dashed(n) for n in arg.names]
                given = sum(1 for w in words if w in names or any(w.startswith(f"{n}=") for n in names))
                if "" in values or (isinstance(arg.value, list) and given > len(values)):
                    raise Exit(f"error: {self._needs_value(_dashed(arg.name), ctx, ctx.name)}", code=EXIT_BAD_INPUT)

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
            return self._needs_value(_dashed(needed.group(1)), ctx, task)
        missing = re.fullmatch(r"'(.*)' did not receive required positional arguments: (.*)", msg)
        if missing and ctx is not None:
            # invoke types Argument.name as Optional[str]; it is `attr_name or names[0]`, never None
            usage = " ".join(cast(str, a.name).upper() for a in ctx.positional_args)
            return (f"`{task}` needs {missing.group(2).replace(chr(39), '').upper()}. "
                    f"Fix: {self.binary} {task} {usage} ...; {self._help(task)}.")
        return f"{msg} Fix: {self._help(task)}."

    def _needs_value(self, flag: str, ctx: ParserContext | None, task: str | None) -> str:
        arg = ctx.flags.get(flag) if ctx is not None and flag in ctx.flags else None
        what = f" ({arg.help})" if arg is not None and arg.help else ""
        where = f"`{task}` flag " if task else "flag "
        return f"{where}{flag} needs a value. Fix: give it one, e.g. {flag} VALUE{what}; {self._help(task)}."

    def _unknown(self, token: str, ctx: ParserContext | None, task: str | None) -> str:
        if token.startswith("-"):
            flags = list(ctx.flags.keys()) + list(ctx.inverse_flags.keys()) if ctx is not None else []
            core = list(self.initial_context.flags.keys())
            guess = closest(token, flags) or closest(token, core)
            where = f"`{task}` has no flag {token}" if task else f"{self.binary} has no option {token}"
            listing = self._help(task) if task else f"`{self.binary} --help` lists the options and tasks"
            if guess:
                return f"{where}; did you mean {guess}? Fix: use {guess}; {listing}."
            return f"{where}. Fix: {listing}."
        switch = next((a.partition("=")[0] for a in self.argv if a.startswith("--") and a.endswith(f"={token}")), None)
        if switch:  # invoke reads `--dry-run=yes` as the switch, then `yes` as a task name
            return (f"{f'`{task}` flag ' if task else 'flag '}{switch} is a switch and takes no value ({switch}={token}). "
                    f"Fix: give {switch} alone to turn it on, leave it out for off.")
        if ctx is not None and "--run" in ctx.flags and not ctx.flags["--run"].positional:
            return (f"`{task}` takes the run as a flag, not as an argument ({token!r}). "
                    f"Fix: {self.binary} {task} --run {token}.")
        guess = closest(token, self._tasks())
        hint = f"; did you mean {guess}?" if guess else "."
        where = f" (after `{task}`, which takes no further arguments)" if task else ""
        return f"no task named {token!r}{where}{hint} Fix: {self._help()}."


class InvokeProgram(HarnessProgram):
    """The Program behind the `invoke` binary once it has found the repo root's tasks.py: it also takes
    invoke's own task-runner flags (-c/--collection, -r/--search-root, --no-dedupe: they did their work in
    finding this file) and lists the tasks under invoke's heading."""

    @property
    def initial_context(self) -> ParserContext:
        return ParserContext(args=self.core_args() + self.task_args())

    def task_list_opener(self, extra: str = "") -> str:
        return "Available tasks"


def program(binary: str = "nccl-harness", cls: type[HarnessProgram] = HarnessProgram) -> HarnessProgram:
    from . import tasks  # here, not at the top: the tasks load the commands' modules only when run

    names = ["invoke", "inv"] if cls is InvokeProgram else [binary]
    return cls(namespace=Collection.from_module(tasks), name="nccl-harness", binary=binary,
               version=__version__, binary_names=names)


def take_over_invoke() -> None:
    """Called by the repo root's tasks.py. invoke's own Program (`invoke.main.program`: the `invoke` and
    `inv` console scripts and `python -m invoke`) imports that file in `load_collection`, before it parses
    the task flags, and its `Program.run` answers every ParseError with exit 1 and no fix. invoke has no
    setting for another Program class, so the file hands the whole command line to this module's Program
    at that point, and `invoke` keeps the contract of `python -m harness`: exit 2, the flag, a did-you-mean,
    the fix. Imported any other way (tooling, `invoke -c`, an earlier run in this process), it returns."""
    from invoke.main import program as stock

    if not stock.argv or getattr(stock, "collection", None) is not None:
        return
    binary = "inv" if os.path.basename(stock.argv[0]) == "inv" else "invoke"
    raise SystemExit(main(list(stock.argv[1:]), binary=binary, cls=InvokeProgram))


def main(argv: Sequence[str] | None = None, binary: str = "nccl-harness",
         cls: type[HarnessProgram] = HarnessProgram) -> int:
    """The console script, `python -m harness` and `invoke`: run the tasks; invoke exits with the task's code.

    Every command keeps the README's interruption contract here, in one place: SIGTERM and SIGHUP are
    Ctrl-C (owner.signals_as_interrupt, installed before the command line is parsed), which a task's
    errors.guarded answers with one line and exit 130. Seen before (issue 22): only `matrix` handled
    them, and `timeout 5 invoke report` ended with 143 and not a word."""
    try:
        with owner.signals_as_interrupt():
            program(binary, cls).run([binary, *argv] if argv is not None else None)
    except BrokenPipeError:  # `... --help | head`: the reader left; say nothing more
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stdout for the rest of the process
        return 141
    except SystemExit as exc:
        # invoke's Program.run answers an interrupt outside a task (while it parses) with sys.exit(1), inside
        # its `except KeyboardInterrupt`: that exit's context is the interrupt
        if isinstance(exc.__context__, KeyboardInterrupt):
            print(interrupted_line(exc.__context__), file=sys.stderr)
            return EXIT_INTERRUPTED
        raise
    return 0
