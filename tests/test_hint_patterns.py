"""Hint patterns are searched in what the system under test wrote, which can be of any size (issue 22):
a pattern that can backtrack without end is refused when the hints file is read, and every command
that reads hints (report, compare, publish, matrix) stops at once with exit 2, naming the file, the
hint, the pattern and the fix; the packaged patterns and ordinary ones pass; and a pattern is
searched only in the head and the tail of a long text (textmatch.MAX_TEXT), so a huge log cannot
make a search long either."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import hints, textmatch
from harness.hints import HintsError

from .conftest import REPO
from .test_hints import make_record

# what each kind of refusal says (textmatch's four rules)
NESTED, AMBIGUOUS, OVERLAP, LEADING = ("itself repeats", "two ways through it", "can take what an earlier one could take",
                                       "begins with an unbounded repeat")

REFUSED = {
    # a repeat inside a repeat: exponential (2**n ways to split n letters a), or n**20 for `(.*a){20}`
    r"(a+)+b": NESTED, r"(a*)*b": NESTED, r"(.*a){20}": NESTED, r"x(\w+\s?)+timed out": NESTED,
    r"x(?:a{1,10})*b": NESTED, r"x(?:(?=a+)b)*c": NESTED,
    # a repeated choice whose ways begin alike: exponential too
    r"x(a|a)*b": AMBIGUOUS, r"x(\w|\d\d)+b": AMBIGUOUS, r"x(aa?)*b": AMBIGUOUS, r"x(?:b?a|a)+c": AMBIGUOUS,
    r"x(a?)*b": AMBIGUOUS,  # harmless in re (an empty round ends the repeat), refused all the same: the check errs that way
    # a repeat that can take what an earlier one took, one of them unbounded: every split is tried
    r"x.*.*y": OVERLAP, r"x\s*\s+y": OVERLAP, r"NCCL WARN.*timeout.*rank": OVERLAP, r"x\d+\d+y": OVERLAP,
    r"foo(.*)(.*)bar": OVERLAP, r"/dev/shm\S*.{0,80}No space": OVERLAP, r"x.{0,600}\S+y": OVERLAP,
    r"x.*\b.*y": OVERLAP,
    # an unbounded repeat at the start: a search tries it from every place in the text
    r".*timed out": LEADING, r"\S+ failed": LEADING, r"(\d+ )?ms": LEADING, r"(?=.*x)y": LEADING,
    r"(?:foo|\w+)bar": LEADING,
}


@pytest.mark.parametrize("pattern", REFUSED)
def test_a_pattern_that_backtracks_without_end_is_refused_with_its_kind(pattern):
    found = textmatch.hazard(pattern, re.IGNORECASE)
    assert found is not None and REFUSED[pattern] in found.problem, found
    assert found.fix


FINE = [
    r"NCCL WARN .*timeout",  # one unbounded repeat after the text it looks for
    r"x\d+\s*ms", r"Error: \d+\.\d+", r"foo\S+ \S+bar", r"a[^)]*\)[^)]*\)x",  # repeats that cannot take each other's
    r"x.{0,80}y.{0,80}z",  # bounded gaps, as the packaged hints write them
    r"x(ab|cd)+y", r"x(foo|bar)+y", r"x(ab?)*y", r"x(\d|\w)+y",  # re makes `(\d|\w)` one class
    r"^.*x", r"\Ax.*y",  # anchored: a search starts there only
    r"undefined symbol: \w*nccl\w*", r"\w+",  # a repeat at the end is never retried
    r"nvidia-nccl-(cu\d+)\b[\s\S]*?nvidia-nccl-(?!\1\b)cu\d+",  # `\b` ends the digits
    r"x(?i:abc)*y", r"x\d{4}.*y",
]


@pytest.mark.parametrize("pattern", FINE)
def test_an_ordinary_pattern_passes(pattern):
    assert textmatch.hazard(pattern, re.IGNORECASE) is None


def _patterns(when: tuple[tuple[str, Any], ...]) -> list[str]:
    found = []
    for key, value in when:
        if key in ("text", "text_absent"):
            found.append(value.pattern)
        elif key == "any":
            found += [p for alt in value for p in _patterns(alt)]
    return found


def test_every_packaged_pattern_passes_the_check():
    rules = hints.load(hints.PACKAGED)
    checked = {(rule.hint.id, p): textmatch.hazard(p, re.IGNORECASE) for rule in rules for p in _patterns(rule.when)}
    assert len(checked) >= 30
    assert {key: found for key, found in checked.items() if found is not None} == {}


# ---------------------------------------------------------------- a site's own file
SITE = """hints:
  - id: site-ok
    title: A hint that is fine
    explanation: What happened. The fix.
    link: https://github.com/NVIDIA/nccl/issues/418
    when:
      text: 'NCCL WARN .*timeout'
  - id: site-timeout
    title: A site's own timeout
    explanation: What happened. The fix.
    link: https://github.com/NVIDIA/nccl/issues/418
    when:
      any:
        - status: [hang]
        - text: '{pattern}'
"""
BACKTRACKING = r"ran (\w+\s?)+timed out"


def site_file(tmp_path: Path, pattern: str = BACKTRACKING) -> Path:
    path = tmp_path / "site-hints.yaml"
    path.write_text(SITE.replace("{pattern}", pattern))
    return path


def test_the_refusal_names_file_line_hint_pattern_and_fix(tmp_path):
    path = site_file(tmp_path)
    with pytest.raises(HintsError) as info:
        hints.check(path)
    message = str(info.value)
    assert message.startswith(f"{path}:15 at `hints[site-timeout].when.any[1].text`: the pattern `{BACKTRACKING}` "
                              "repeats a part that itself repeats"), message
    assert "catastrophic backtracking" in message and "Fix: repeat one plain part" in message
    assert "\n" not in message and info.value.code == 2


# searched with BACKTRACKING, this never ends (2**60 ways to split the words after "ran")
STOPPED = "the worker ran its first allreduce and then stopped answering the watchdog"


def one_run(root: Path, message: str = STOPPED) -> Path:
    """A results folder holding run R, whose one cell hung with this rank error."""
    cell = root / "R" / "cells" / "c1"
    cell.mkdir(parents=True)
    record = make_record(status="hang", phase="prepare", error_class="nccl", reason="no progress", error=message)
    (cell / "record.json").write_text(json.dumps(record))
    return root


def harness(*args: str, hints_file: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"HARNESS_HINTS": str(hints_file)}
    # the timeout is the guard: before issue 22 such a file made these commands spin forever
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


COMMANDS = {
    "report": lambda r, out: ["report", "--results", str(r), "--out", str(out / "report.md")],
    "compare": lambda r, out: ["compare", "--base", "R", "--new", "R", "--results", str(r)],
    "publish": lambda r, out: ["publish", "--results", str(r), "--to", str(out / "docs")],
    "matrix": lambda r, out: ["matrix", "--results", str(r), "--run-id", "new"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_backtracking_site_file_stops_every_command_that_reads_hints(tmp_path, command):
    path, results = site_file(tmp_path), one_run(tmp_path / "results")
    proc = harness(*COMMANDS[command](results, tmp_path), hints_file=path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}:15 at `hints[site-timeout].when.any[1].text`: the pattern `{BACKTRACKING}`" in proc.stderr
    assert "Fix: " in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "site-hints.yaml"]  # nothing written


def test_a_site_file_of_fine_patterns_still_works(tmp_path):
    fine = site_file(tmp_path, r"ran \w+ (\w+ )?timed out")
    results = one_run(tmp_path / "results", "NCCL WARN watchdog timeout on rank 1")
    proc = harness("report", "--results", str(results), "--out", str(tmp_path / "report.md"), hints_file=fine)
    assert proc.returncode == 0, proc.stderr
    assert "A hint that is fine" in (tmp_path / "report.md").read_text()


# ---------------------------------------------------------------- long texts
HALF = textmatch.MAX_TEXT // 2


def test_a_long_text_is_searched_in_its_head_and_tail_only():
    assert textmatch.clip("short") == ("short",)
    assert textmatch.clip("x" * textmatch.MAX_TEXT) == ("x" * textmatch.MAX_TEXT,)
    head, tail = textmatch.clip("h" * HALF + "middle" + "t" * HALF)
    assert (head, tail) == ("h" * HALF, "t" * HALF)  # two texts: no match spans the cut


def rules(tmp_path: Path, pattern: str) -> list[hints.Rule]:
    return hints.load(site_file(tmp_path, pattern))


@pytest.mark.parametrize("where,found", [("start", True), ("end", True), ("middle", False)])
def test_evidence_beyond_the_cap_is_not_found(tmp_path, where, found):
    filler = "x" * textmatch.MAX_TEXT
    words = "Duplicate GPU detected : rank 1 and rank 0"
    message = {"start": words + filler + filler, "end": filler + filler + words, "middle": filler + words + filler}[where]
    record = make_record(status="fail", phase="init", error=message)
    assert all(len(t) <= textmatch.MAX_TEXT for t in hints.facts(record).texts)
    matched = [m.hint.id for m in hints.match(record, rules(tmp_path, "Duplicate GPU detected"))]
    assert matched == (["site-timeout"] if found else [])


def test_a_huge_log_cannot_make_the_report_long(tmp_path):
    """A rank error of one 8 MB line of NCCL WARN, then the line that matters: searched whole,
    `NCCL WARN .*timeout` would try the rest of the long line from each of its 800,000 starts (it
    would never end); searched in its head and tail it ends at once and finds the last line. The
    subprocess timeout is the guard."""
    path = site_file(tmp_path, r"ran \w+ timed out")
    results = one_run(tmp_path / "results", "NCCL WARN " * 800_000 + "\nNCCL WARN watchdog timeout")
    proc = harness("report", "--results", str(results), "--out", str(tmp_path / "report.md"), hints_file=path)
    assert proc.returncode == 0, proc.stderr
    assert "A hint that is fine" in (tmp_path / "report.md").read_text()

