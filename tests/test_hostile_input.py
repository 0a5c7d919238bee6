"""Hostile input (issue 14, items 1 and 5). Whatever a matrix file holds (an alias bomb, 20,000 nested
brackets, /dev/zero, a FIFO, binary, duplicate keys, `init: .inf`, `ranks: true`, ...), every command
refuses it before it runs anything: exit 2, one paragraph naming the file (and the line where there is
one) and the fix, no traceback, and the refusal is cheap (under 2 s of CPU and 200 MB, measured on the
real `python -m harness` and `invoke` processes). A run id is a name under --results, never a path."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import commands, matrix, matrixfile, results, selection, yamlfile
from harness.errors import HarnessError, guarded

from .conftest import REPO

GOOD = """version: 1
stacks:
  matrix:
    cuda: ["cpu"]
    torch: ["2.5.1"]
    accelerate: ["1.2.1"]
variants: [default]
"""


def _with(extra: str) -> str:
    """GOOD plus top-level keys, which start at line 8."""
    return GOOD + extra


def _bomb(levels: int, fanout: int, key: bool = False) -> str:
    """The issue's 970-byte bomb: each anchor a list of `fanout` aliases of the one before."""
    lines = ["a0: &a0 [" + ", ".join(["x"] * fanout) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fanout) + "]" for i in range(1, levels)]
    return GOOD + "\n".join(lines) + (f"\n? *a{levels - 1}\n: 1\n" if key else "\n")


def _merge_bomb() -> str:
    lines = ["m0: &m0 {a: 1, b: 2}"]
    lines += [f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 9) + "]}" for i in range(1, 12)]
    return "\n".join(lines) + "\n"


def _fifo(d: Path) -> Path:
    os.mkfifo(d / "fifo.yaml")
    return d / "fifo.yaml"


def _sparse(d: Path) -> Path:
    """50 MB of NULs without writing them (the issue's 50 MB file took 149 s and 3.8 GB)."""
    with open(d / "big.yaml", "wb") as fh:
        fh.truncate(50 << 20)
    return d / "big.yaml"


def _symlink_to_zero(d: Path) -> Path:
    (d / "zero.yaml").symlink_to("/dev/zero")
    return d / "zero.yaml"


def _directory(d: Path) -> Path:
    (d / "dir.yaml").mkdir()
    return d / "dir.yaml"


@dataclass(frozen=True)
class Case:
    """A hostile file: its content (text, bytes, or a function making a special file in a folder), the
    line the message must name (None: the file as a whole) and words it must contain."""

    content: str | bytes | Callable[[Path], Path]
    line: int | None
    words: tuple[str, ...] = ()

    def make(self, folder: Path) -> Path:
        if callable(self.content):
            return self.content(folder)
        path = folder / "matrix.yaml"
        path.write_bytes(self.content if isinstance(self.content, bytes) else self.content.encode())
        return path


STACKS = '  matrix: {cuda: ["cpu"], torch: ["2.5.1"], accelerate: ["1.2.1"]}\n'
def _versions(n: int) -> str:
    return "[" + ", ".join(f'"2.{i}.0"' for i in range(n)) + "]"

CASES: dict[str, Case] = {
    # what the file is
    "FIFO": Case(_fifo, None, ("FIFO", "not a regular file")),
    "/dev/zero": Case(lambda d: Path("/dev/zero"), None, ("character device",)),
    "symlink to /dev/zero": Case(_symlink_to_zero, None, ("character device",)),
    "directory": Case(_directory, None, ("directory",)),
    "50 MB file": Case(_sparse, None, ("larger than 512 KiB",)),
    "600 KB list": Case("stacks: [" + "1," * 300_000 + "1]\n", None, ("larger than 512 KiB",)),
    "60,000-item list under the size limit": Case("stacks:\n" + "- 1\n" * 60_000, yamlfile.MAX_NODES - 1, (f"more than {yamlfile.MAX_NODES} values",)),
    # what the bytes are
    "latin-1 byte": Case(GOOD.encode() + "description: caf\xe9\n".encode("latin-1"), 8, ("not UTF-8", "0xe9", "line 8")),
    "UTF-16 with BOM": Case(GOOD.encode("utf-16"), 1, ("not UTF-8", "UTF-16")),
    "NUL byte": Case(b"stacks:\n  ma\x00trix: {}\n", 2, ("U+0000", "line 2, column 5")),
    "escape sequence": Case(_with("description: \x1b[2J\n"), 8, ("U+001B",)),
    "binary garbage": Case(bytes(range(256)) * 8, 2, ("not UTF-8", "0x80")),
    "UTF-8 BOM, then an error": Case(("\ufeff" + GOOD.replace('["2.5.1"]', "[2.5]")).encode(), 5, ("quote it",)),
    "CRLF line ends, then an error": Case(GOOD.replace("\n", "\r\n").replace('["2.5.1"]', "[2.5]"), 5, ("quote it",)),
    # what the YAML is
    "empty file": Case("", None, ("must be a mapping",)),
    "only comments": Case("# nothing here\n", None, ("must be a mapping",)),
    "list at top level": Case("- stacks\n- variants\n", 1, ("must be a mapping",)),
    "scalar at top level": Case("hello\n", 1, ("must be a mapping",)),
    "two documents": Case(GOOD + "---\n" + GOOD, 8, ("not valid YAML", "another document")),
    "unclosed bracket": Case(_with("variants: [default\n"), None, ("not valid YAML",)),
    "tab indentation": Case("stacks:\n\tmatrix: {}\n", 2, ("not valid YAML",)),
    "alias bomb in values": Case(_bomb(9, 9), 12, (f"more than {yamlfile.MAX_NODES} values", "aliases")),
    "alias bomb in a key": Case(_bomb(9, 9, key=True), 16, ("as a key",)),  # the anchor's line
    "alias used as a key": Case(GOOD + "x: &x [1]\n? *x\n: 1\n", 8, ("as a key",)),
    "merge-key bomb": Case(_merge_bomb(), 5, (f"more than {yamlfile.MAX_NODES} values",)),
    "recursive alias": Case("stacks: &a [*a]\n", 1, ("refers to a collection that contains it",)),
    "recursive merge key": Case("stacks: &a {<<: *a}\n", 1, ("refers to a collection that contains it",)),
    "undefined alias": Case(_with("variants: *nope\n"), 8, ("not valid YAML", "nope")),
    "merge key bringing an unknown key": Case("x: &x {stackz: 1}\n<<: *x\n" + GOOD[len("version: 1\n"):], 1,
                                              ("unknown key `stackz`",)),
    "20,000 nested brackets": Case("stacks: " + "[" * 20_000 + "]" * 20_000 + "\n", 1, ("deeper than 32",)),
    "20,000 nested flow mappings": Case("stacks: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n", 1, ("deeper than 32",)),
    "40 nested block mappings": Case("".join(" " * i + f"k{i}:\n" for i in range(40)), 32, ("deeper than 32",)),
    "chain of 200 aliases": Case("\n".join(["c0: &c0 [1]"] + [f"c{i}: &c{i} [*c{i - 1}]" for i in range(1, 200)]) + "\n",
                                 32, ("deeper than 32", "aliases")),
    "!!python/object/apply": Case("stacks: !!python/object/apply:os.system ['touch /tmp/pwned']\n", 1,
                                  ("!!python/object/apply:os.system",)),
    "!!python/name": Case("stacks: !!python/name:os.system\n", 1, ("YAML tag",)),
    "!!binary": Case(_with("description: !!binary aGVsbG8=\n"), 8, ("!!binary",)),
    "!!set": Case(_with("variants: !!set {default}\n"), 8, ("!!set",)),
    "local tag": Case(_with("variants: !mine [default]\n"), 8, ("!mine",)),
    "duplicate top-level key": Case(_with("stacks: {}\n"), 8, ("`stacks` is given twice", "lines 2 and 8")),
    "duplicate nested key": Case(GOOD.replace('    accelerate: ["1.2.1"]', '    accelerate: ["1.2.1"]\n    cuda: ["12.4.1"]'), 7,
                                 ("`stacks.matrix.cuda` is given twice", "lines 4 and 7")),
    "duplicate key in a flow mapping": Case(_with("timeouts: {init: 5, init: 6}\n"), 8, ("`timeouts.init` is given twice",)),
    "list as a key": Case(_with("? [a, b]\n: 1\n"), 8, ("as a key",)),
    "5,000-digit integer": Case(_with("ranks: " + "9" * 5000 + "\n"), 8, ("cannot be read",)),
    "impossible date": Case(_with("description: 2024-13-45\n"), 8, ("2024-13-45", "cannot be read")),
    # what the values are
    "sizes: [0]": Case(_with("bandwidth: {sizes: [0]}\n"), 8, ("bandwidth.sizes[0]", "at least 4 bytes")),
    "sizes: [-4096]": Case(_with("bandwidth: {sizes: [-4096]}\n"), 8, ("bandwidth.sizes[0]", "at least 4 bytes")),
    'sizes: ["999999T"]': Case(_with('bandwidth: {sizes: ["999999T"]}\n'), 8, ("at most 32G",)),
    "sizes: [64G]": Case(_with("bandwidth: {sizes: [64G]}\n"), 8, ("at most 32G",)),
    "sizes: [true]": Case(_with("bandwidth: {sizes: [true]}\n"), 8, ("boolean",)),
    "sizes: [1.5]": Case(_with("bandwidth: {sizes: [1.5]}\n"), 8, ("bandwidth.sizes[0]",)),
    'sizes: ["64Q"]': Case(_with('bandwidth: {sizes: ["64Q"]}\n'), 8, ("is not a size",)),
    "sizes: a 10,000-digit string": Case(_with(f'bandwidth: {{sizes: ["{"9" * 10_000}"]}}\n'), 8, ("is not a size",)),
    "65 sizes": Case(_with("bandwidth: {sizes: [" + ", ".join(["8K"] * 65) + "]}\n"), 8, ("at most 64",)),
    "ranks: true": Case(_with("ranks: true\n"), 8, ("boolean", "whole number")),
    "ranks: 10000": Case(_with("ranks: 10000\n"), 8, ("10000 ranks cannot run here",)),
    "ranks: 0": Case(_with("ranks: 0\n"), 8, ("at least 1",)),
    "ranks: -3": Case(_with("ranks: -3\n"), 8, ("at least 1",)),
    "ranks: 2.5": Case(_with("ranks: 2.5\n"), 8, ("whole number",)),
    'ranks: "2"': Case(_with('ranks: "2"\n'), 8, ("string", "without quotes")),
    "init: .inf": Case(_with("timeouts: {init: .inf}\n"), 8, ("timeouts.init", "not a usable timeout")),
    "init: .nan": Case(_with("timeouts: {init: .nan}\n"), 8, ("not a usable timeout",)),
    "init: 1.0e+308": Case(_with("timeouts: {init: 1.0e+308}\n"), 8, ("not a usable timeout",)),
    "init: -5": Case(_with("timeouts: {init: -5}\n"), 8, ("not a usable timeout",)),
    "cell: 0": Case(_with("timeouts: {cell: 0}\n"), 8, ("timeouts.cell",)),
    "cell: true": Case(_with("timeouts: {cell: true}\n"), 8, ("boolean",)),
    "timeouts: a string": Case(_with("timeouts: fast\n"), 8, ("timeouts",)),
    "iters: 10**9": Case(_with("bandwidth: {iters: 1000000000}\n"), 8, ("bandwidth.iters", "less than or equal")),
    "trials: 0": Case(_with("bandwidth: {trials: 0}\n"), 8, ("bandwidth.trials",)),
    "min_busbw: .inf": Case(_with("bandwidth: {min_busbw: .inf}\n"), 8, ("bandwidth.min_busbw",)),
    "version: true": Case(GOOD.replace("version: 1", "version: true"), 1, ("boolean",)),
    "version: 2": Case(GOOD.replace("version: 1", "version: 2"), 1, ("version",)),
    "unknown key": Case(_with("rank: 2\n"), 8, ("unknown key `rank`", "did you mean `ranks`")),
    "key with a newline and escape": Case(_with('"a\\nb\\e[2J": 1\n'), 8, ("unknown key",)),
    "10,000-character key": Case(_with("k" * 10_000 + ": 1\n"), 8, ("not valid YAML",)),  # keys end at 1024
    "10,000-character quoted key": Case(_with("? " + "k" * 10_000 + "\n: 1\n"), 8, ("unknown key",)),
    "stacks: a list": Case("stacks: [cpu]\n", 1, ("stacks",)),
    "variants: a string": Case(_with("launchers: torchrun\n"), 8, ("launchers",)),
    "env value a list": Case(GOOD.replace("variants: [default]", "variants: [x]\ndefine: {variants: {x: {env: {A: [1]}}}}"), 8,
                             ("define.variants.x.env.A",)),
    "env value a boolean": Case(GOOD.replace("variants: [default]", "variants: [x]\ndefine: {variants: {x: {env: {A: true}}}}"),
                                8, ("boolean",)),
    "10,000-character version": Case(GOOD.replace('["2.5.1"]', '["' + "9" * 10_000 + '"]'), 3, ("is not a version",)),
    "template outside images/": Case(GOOD.replace('    accelerate: ["1.2.1"]', '    accelerate: ["1.2.1"]\n    template: ["../../etc/x"]'),
                                     3, ("does not exist",)),
    "python: a 5,000-digit version": Case(GOOD.replace("    accelerate", '    python: ["3.' + "9" * 5000 + '"]\n    accelerate'), 3,
                                          ("is not a version",)),
    "python: not a version": Case(GOOD.replace("    accelerate", '    python: ["abc"]\n    accelerate'), 3, ("is not a version",)),
    "27,000 stacks": Case(GOOD.replace('["2.5.1"]', _versions(30)).replace('["1.2.1"]', _versions(30))
                          .replace('    accelerate', f"    python: {_versions(30)}\n    accelerate"), 3, ("more than the 500",)),
    "2,400 cells": Case(GOOD.replace('["2.5.1"]', _versions(20)).replace('["1.2.1"]', _versions(20))
                        .replace("variants: [default]", "variants: [default, p2p-off, p2p-nvl, shm-off, net-only, ib-off]"),
                        2, ("more than the 2000 cells",)),
    "101 include entries": Case(GOOD.replace("  matrix:", "  include: [" + ", ".join(["{cuda: cpu}"] * 101) + "]\n  matrix:"),
                                3, ("stacks.include",)),
}

# issue 14: each case under 2 s ... of CPU beyond what the command costs to start with a good matrix
# file, measured in the same run (starting the CLI is about 1.6-1.9 s of CPU on this 2-core machine, more
# while the rest of the suite runs beside it: an absolute bound would measure the machine's load)
CPU_LIMIT_S = 2.0
RSS_LIMIT_KB = 200 * 1024  # ... and under 200 MB


def _check_message(err: str, path: Path, case: Case) -> None:
    assert "Traceback" not in err
    message = err.strip()
    assert message.startswith(f"error: {path}:{case.line}" if case.line else f"error: {path}"), message[:300]
    assert "\n" not in message, message[:300]  # one paragraph
    assert len(message) < 700, message[:300]  # short whatever the input holds
    assert "Fix: " in message
    for word in case.words:
        assert word in message, message


@pytest.mark.parametrize("name", CASES)
def test_every_hostile_file_is_refused_with_one_paragraph(tmp_path, capsys, name):
    case = CASES[name]
    path = case.make(tmp_path)
    code = guarded(lambda: commands.list_cells(commands.Selection(path)))
    out, err = capsys.readouterr()
    assert code == 2 and not out
    _check_message(err, path, case)


@pytest.mark.parametrize("name", ["FIFO", "alias bomb in values", "duplicate top-level key", "init: .inf", "ranks: true"])
def test_matrix_dry_run_refuses_before_anything_runs(tmp_path, capsys, name):
    case = CASES[name]
    path = case.make(tmp_path)
    code = guarded(lambda: commands.run_matrix(commands.Selection(path), commands.MatrixOptions(
        engine="host", dry_run=True, results=tmp_path / "results")))
    assert code == 2
    _check_message(capsys.readouterr().err, path, case)
    assert not (tmp_path / "results").exists()


def test_real_files_are_still_read():
    for path in (matrix.DEFAULT_GPU_MATRIX, matrix.DEFAULT_CPU_MATRIX):
        assert matrix.load(path).cells


def test_bom_and_crlf_alone_are_accepted(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(("\ufeff" + GOOD).replace("\n", "\r\n").encode())
    assert [c.id for c in matrix.load(path).cells] == ["cpu-torch2.5.1-acc1.2.1+default"]


def test_anchors_and_merge_keys_within_bounds_still_work(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(GOOD.replace("variants: [default]", "variants: [ring, ring2]\n")
                    + "define: {variants: {ring: &ring {env: {NCCL_ALGO: Ring}}, ring2: *ring}}\n"
                    + "timeouts: {<<: {init: 30}, step: 20}\n")
    m = matrix.load(path)
    assert (m.timeouts.init, m.timeouts.step) == (30, 20)
    assert [c.variant.env_dict for c in m.cells] == [{"NCCL_ALGO": "Ring"}] * 2


# ---------------------------------------------------------------- the real processes, measured


# The child is started by a small Python of its own, which forks and waits: Linux carries the forking
# process's memory high-water mark across exec into the child's ru_maxrss, and pytest, with torch
# loaded by earlier tests, is far above the limit (seen in CI: every child "measured" over 200 MB).
_MEASURE = ("import json, os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.execvp(sys.argv[2], sys.argv[2:])\n"
            "_, status, usage = os.wait4(pid, 0)\n"
            "with open(sys.argv[1], 'w') as fh:\n"
            "    json.dump([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss], fh)\n")


def _measured(argv: list[str]) -> tuple[int, str, float, int]:
    """Exit code, stdout+stderr, CPU seconds and max RSS (KB) of one child, from its own rusage (wait4 in a
    small parent); killed after 30 s so that a blocking case fails instead of hanging the suite."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        facts = Path(tmp) / "rusage.json"
        proc = subprocess.Popen([sys.executable, "-c", _MEASURE, str(facts), *argv], cwd=REPO, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        killer = threading.Timer(30, lambda: os.killpg(proc.pid, signal.SIGKILL))
        killer.start()
        output = proc.stdout.read().decode(errors="replace")
        proc.wait()
        killer.cancel()
        proc.stdout.close()
        if not facts.exists():
            return -9, output + "\n(killed after 30 s)", 30.0, 0
        code, cpu, rss = json.loads(facts.read_text())
    return code, output, cpu, rss


def _invoke() -> list[str]:
    script = Path(sys.executable).parent / "invoke"
    return [str(script)] if script.exists() else [shutil.which("invoke") or "invoke"]


FRONTS = {"module": [sys.executable, "-m", "harness"], "invoke": _invoke()}
# Every case through both entry points (2 x 86 processes: about 75 s of CPU on 2 cores).


@pytest.mark.parametrize("front", FRONTS)
def test_the_real_commands_refuse_every_case_quickly_and_small(tmp_path, front):
    names = list(CASES)
    jobs = []
    for i, name in enumerate(names):
        folder = tmp_path / str(i)
        folder.mkdir()
        path = CASES[name].make(folder)
        jobs.append((name, path, FRONTS[front] + ["list", "--matrix", str(path)]))
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    baseline = [FRONTS[front] + ["list", "--matrix", str(good)]] * 3
    with ThreadPoolExecutor(max_workers=3) as pool:
        measured = list(pool.map(lambda job: _measured(job[2]), jobs))
        started = sorted(cpu for code, _, cpu, _ in pool.map(_measured, baseline) if code == 0)
    assert len(started) == 3, "the good matrix file must list"
    start = started[1]  # the median of three, measured beside the cases
    problems = []
    for (name, path, _), (code, output, cpu, rss) in zip(jobs, measured):
        try:
            assert code == 2, f"exit {code}"
            _check_message(output, path, CASES[name])
            assert cpu - start < CPU_LIMIT_S, f"{cpu:.2f} s of CPU, {start:.2f} s to start"
            assert rss < RSS_LIMIT_KB, f"{rss // 1024} MB"
        except AssertionError as exc:
            problems.append(f"{name}: {exc}: {output[-300:]!r}")
    assert not problems, "\n".join(problems)


def test_measurement_sees_the_child_itself():
    """The limits above are meaningful: a child that allocates 300 MB is seen as such."""
    code, _, _cpu, rss = _measured([sys.executable, "-c", "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096])"])
    assert code == 0 and rss > RSS_LIMIT_KB
    # and a child that allocates nothing is seen as small, however big this test process has grown
    code, _, _, small = _measured([sys.executable, "-c", "pass"])
    assert code == 0 and small < RSS_LIMIT_KB // 4


# ---------------------------------------------------------------- --ranks and --timeout on the command line


@pytest.mark.parametrize("ranks", [0, -1, 10_000, matrixfile.max_ranks() + 1])
def test_ranks_flag_is_bounded_like_the_file(ranks):
    with pytest.raises(HarnessError) as err:
        selection.check_ranks(ranks)
    assert err.value.code == 2 and str(err.value).startswith(f"--ranks {ranks}:") and "Fix:" in str(err.value)


def test_ranks_flag_may_exceed_the_gpus_up_to_the_host_bound():
    assert selection.check_ranks(matrixfile.max_ranks()) == matrixfile.max_ranks()
    assert selection.check_ranks(None) is None


@pytest.mark.parametrize("item", ["init=inf", "init=nan", "init=1e308", "init=1e400", "init=-1", "init=0", "init=",
                                  "init=two", "cell=604801", "bogus=5", "=5"])
def test_timeout_flag_is_finite_and_bounded(item):
    with pytest.raises(HarnessError) as err:
        selection.check_timeouts((item,), matrixfile.Timeouts())
    assert err.value.code == 2 and str(err.value).startswith(f"--timeout {item}:") and "Fix:" in str(err.value)


def test_timeout_flag_overrides_within_bounds():
    t = selection.check_timeouts(("prepare=300", "cell=604800"), matrixfile.Timeouts())
    assert (t.prepare, t.cell, t.init) == (300, 604800, 90)


@pytest.mark.parametrize("flag", [["--timeout", "init=inf"], ["--ranks", "100000"]])
def test_bad_numbers_on_the_command_line_exit_2_before_running(tmp_path, write_matrix, flag):
    path = write_matrix(GOOD)
    code, output, _, _ = _measured([sys.executable, "-m", "harness", "matrix", "--dry-run", "--engine", "host",
                                    "--matrix", str(path), "--results", str(tmp_path / "r"), *flag])
    assert code == 2 and "Traceback" not in output and output.startswith(f"error: {flag[0]} ")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- run ids are names, not paths

BAD_RUN_IDS = ["../x", "../../escape1", "ABSOLUTE", ".", "..", "a\nb", "", "x" * 101, "ünïcode", "a/b", ".hidden", "-x",
               "a b", "x\x00y", "run\n"]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("command", ["matrix", "dry-run", "resume", "build"])
@pytest.mark.parametrize("run_id", BAD_RUN_IDS)
def test_a_run_id_that_is_not_a_name_is_refused_and_writes_nothing(tmp_path, write_matrix, capsys, command, run_id):
    path = write_matrix(GOOD)
    run_id = str(tmp_path / "abs") if run_id == "ABSOLUTE" else run_id
    res = tmp_path / "a" / "b" / "results"
    res.mkdir(parents=True)
    before = _tree(tmp_path)
    sel = commands.Selection(path)
    if command == "build":
        code = guarded(lambda: commands.build(sel, commands.images.BuildOptions(), res, run_id))
    else:
        opts = commands.MatrixOptions(engine="host", results=res, run_id=run_id, dry_run=command == "dry-run",
                                      resume=command == "resume")
        code = guarded(lambda: commands.run_matrix(sel, opts))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: --run-id ") and "Fix: " in err and err.count("\n") == 1
    assert _tree(tmp_path) == before  # nothing written, inside --results or outside it


@pytest.mark.parametrize("run_id", ["before-driver-upgrade", "20250101-120000-abcd", "a.b_c-1", "X" * 100])
def test_names_are_run_ids(run_id):
    assert results.check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", BAD_RUN_IDS[:8])
def test_the_store_itself_refuses_paths(tmp_path, run_id):
    """run_dir and cell_dir (the rerun cleanup deletes attempt folders under cell_dir) check too."""
    run_id = str(tmp_path / "abs") if run_id == "ABSOLUTE" else run_id
    for make in (lambda: results.run_dir(tmp_path / "r", run_id), lambda: results.cell_dir(tmp_path / "r", run_id, "c")):
        with pytest.raises(HarnessError, match="--run-id"):
            make()
    assert not (tmp_path / "r").exists() and not (tmp_path / "x").exists() and not (tmp_path / "abs").exists()


def test_report_of_a_path_that_is_not_a_run_names_it_safely(tmp_path):
    (tmp_path / "r" / "ok").mkdir(parents=True)
    with pytest.raises(HarnessError) as err:
        results.resolve_run(tmp_path / "r", "../\x1b[2Jx")
    assert "\x1b" not in str(err.value) and "not found" in str(err.value)


# ---------------------------------------------------------------- the hints file shares the reader

HINTS_CASES = {
    "FIFO": (_fifo, None, "FIFO"),
    "alias bomb": (lambda d: _written(d, _bomb(9, 9).replace(GOOD, "hints: []\n")), 6, "more than"),
    "duplicate key": (lambda d: _written(d, "hints: []\nhints: []\n"), 2, "`hints` is given twice"),
    "latin-1 byte": (lambda d: _written(d, b"hints: []\n# caf\xe9\n"), 2, "not UTF-8"),
    "50 MB file": (_sparse, None, "larger than 512 KiB"),
}


def _written(folder: Path, content: str | bytes) -> Path:
    path = folder / "hints.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("name", HINTS_CASES)
def test_a_hostile_hints_file_is_refused_the_same_way(tmp_path, monkeypatch, capsys, name):
    from harness import hints

    make, line, word = HINTS_CASES[name]
    path = make(tmp_path)
    monkeypatch.setenv("HARNESS_HINTS", str(path))
    assert guarded(hints.check) == 2
    _check_message(capsys.readouterr().err, path, Case("", line, (word,)))


@pytest.mark.parametrize("ranks, gpus, asked, words", [
    (2, ("0",), "0", ["--ranks 2 with --gpus 0", "give 1 rank(s), not 2", "Fix: name 2 GPUs (e.g. --gpus 0,1)"]),
    (1, ("0", "1"), None, ["--ranks 1 with this host's 2 GPU(s) (--gpus all)", "Duplicate GPU detected"]),
])
def test_ranks_that_the_gpus_would_not_give_are_refused_not_ignored(ranks, gpus, asked, words):
    """Issue 22: `--ranks 2 --gpus 0` on the one-H200 host ran one rank without a word."""
    with pytest.raises(HarnessError) as err:
        selection.check_ranks_for_gpus(ranks, gpus, asked)
    assert err.value.code == 2 and all(w in str(err.value) for w in words), str(err.value)
    selection.check_ranks_for_gpus(len(gpus), gpus, asked)  # as many ranks as GPUs: honoured
    selection.check_ranks_for_gpus(ranks, (), None)  # CPU cells: --ranks is theirs
    selection.check_ranks_for_gpus(None, gpus, asked)
