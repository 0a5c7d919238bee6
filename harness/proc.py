"""The one place that starts external processes on the host. Stopping goes wait, terminate, kill, and a
timed-out process is told apart from one that exited with an error."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import InfraError


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    output: str
    timed_out: bool = False


def stat_fields(pid: int | str) -> list[str]:
    """/proc/<pid>/stat from field 3 (state) on: [0] is the state, [19] the start time in clock ticks
    after boot. The command (field 2) may hold spaces and parentheses, so the split starts after the
    last ")". OSError when the process is gone."""
    return stat_after_command(Path(f"/proc/{pid}/stat").read_text())


def stat_after_command(stat: str) -> list[str]:
    """The fields of a /proc/<pid>/stat text after the command: [0] is the state (stat_fields)."""
    return stat[stat.rindex(")") + 2:].split()


def which(name: str) -> str | None:
    from shutil import which as _which

    return _which(name)


def stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Wait briefly, then SIGTERM the whole process group, then SIGKILL it."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        if sig is not None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    log: Path | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Completed:
    """Run argv in its own process group, streaming merged stdout/stderr to `log` and `on_line`."""
    if which(argv[0]) is None and not Path(argv[0]).exists():
        raise InfraError(f"`{argv[0]}` is not installed on this host. Fix: install it (scripts/setup.sh does on Debian).")
    lines: list[str] = []
    sink = open(log, "a") if log else None  # noqa: SIM115 - closed in the finally below
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        timed_out = threading.Event()
        def expire() -> None:
            timed_out.set()
            stop(proc, grace=2.0)

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if sink:
                    sink.write(line)
                    sink.flush()
                if on_line:
                    on_line(line.rstrip("\n"))
            proc.wait()
        except BaseException:
            stop(proc, grace=2.0)
            raise
        finally:
            timer.cancel()
    finally:
        if sink:
            sink.close()
    return Completed(tuple(argv), proc.returncode, "".join(lines), timed_out.is_set())


def spawn(argv: Sequence[str], *, env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start a long-running process in its own process group, output appended to `log`; the caller
    owns its end (see stop)."""
    with open(log, "ab") as sink:
        return subprocess.Popen(
            list(argv), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )


def watchdog(argv: Sequence[str], *, env: dict[str, str]) -> subprocess.Popen:
    """Start a process that outlives this one on purpose: in a session of its own (a terminal's Ctrl-C
    does not reach it), its stdin the read end of a pipe whose write end only this process holds (the
    pipe is not inherited by other children: close_fds), so it reads EOF the moment this process ends,
    however it ends. Keep the returned Popen: dropping it closes the pipe."""
    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True, close_fds=True)


def check(result: Completed, what: str, hint: str) -> Completed:
    """Turn a failed Completed into an InfraError that says which of the two ways it failed."""
    if result.timed_out:
        raise InfraError(f"{what} timed out ({' '.join(result.argv[:3])} ...). {hint}")
    if result.returncode != 0:
        tail = "\n".join(result.output.strip().splitlines()[-5:])
        raise InfraError(f"{what} exited with code {result.returncode}: {tail} {hint}")
    return result
