"""Hint patterns are searched in what the system under test wrote, which can be of any size (issue 22):
a pattern that can backtrack without end is refused when the hints file is read, and every command
that reads hints (report, compare, publish, matrix) stops at once with exit 2, naming the file, the
hint, the pattern and the fix; the packaged patterns and ordinary ones pass; and a pattern is
searched only in the head and the tail of a long text (textmatch.MAX_TEXT), so a huge log cannot
make a search long either."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness import hints, textmatch

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
    rules = hints.load(hints.DATA_FILE)
    checked = {(rule.hint.id, p): textmatch.hazard(p, re.IGNORECASE) for rule in rules for p in _patterns(rule.when)}
    assert len(checked) >= 30
    assert {key: found for key, found in checked.items() if found is not None} == {}


# ---------------------------------------------------------------- long texts
HALF = textmatch.MAX_TEXT // 2


def test_a_long_text_is_searched_in_its_head_and_tail_only():
    assert textmatch.clip("short") == ("short",)
    assert textmatch.clip("x" * textmatch.MAX_TEXT) == ("x" * textmatch.MAX_TEXT,)
    head, tail = textmatch.clip("h" * HALF + "middle" + "t" * HALF)
    assert (head, tail) == ("h" * HALF, "t" * HALF)  # two texts: no match spans the cut
