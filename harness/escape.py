"""The one rule for text the harness did not write (what ranks, NCCL, the launcher, users' images, the
host and nvidia-smi said) wherever it is shown: on the terminal, and in markdown (report.md, published
pages, compare). Harness-authored markdown (the tables, headings, its own code spans) is not passed
through it; every piece of such text placed into it is.

Seen (issue 22): an OSC sequence in a rank's error set the terminal's title when the cell's line was
printed, nvidia-smi's colour codes were stored in run.json, and markdown from a rank (a
`[x](javascript:...)` link, emphasis, backticks) rendered in published pages.

- Terminal (`terminal`): every control character is shown as its code, `\\x1b`, `\\x07`, `\\x9b`
  (`\\u202e` above 0xff): C0 (newline and tab too, unless a block of lines is meant), DEL, C1, the
  Unicode line and paragraph separators, and the bidi controls that reorder how a line reads
  (CVE-2021-42574). So every ESC/CSI/OSC sequence and BEL reads as text: nothing the system under test
  wrote can move the cursor, set the title or ring the bell.
- Markdown (`esc` for inline text and table cells, `code` for a code span): the same, on one line, plus
  the characters that would make markdown: HTML (`<`, `>`, `&` as entities), links (`[`, `]`),
  emphasis and strikethrough (`*`, `~`, and `_` except between two letters or digits, where it never
  is emphasis, so NCCL_P2P_DISABLE reads as written), code spans (backticks), math (`$`), table pipes
  and a block marker at the start (`#`, `-`, `+`, `1.`) backslash-escaped: they render as the text.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[{_CONTROLS}]")  # newline and tab kept: a block of lines
_CONTROL_LINE = re.compile(f"[\t\n{_CONTROLS}]")
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # SGR: what nvidia-smi and docker colour their output with


def _code_of(found: re.Match[str]) -> str:
    point = ord(found.group())
    return f"\\x{point:02x}" if point <= 0xFF else f"\\u{point:04x}"


def terminal(text: Any, lines: bool = False) -> str:
    """Text with every control character shown as its code (`\\x1b`); `lines`: newlines and tabs kept."""
    return (_CONTROL if lines else _CONTROL_LINE).sub(_code_of, str(text))


def strip_colours(text: str) -> str:
    """Text without its ANSI colour codes (SGR sequences): noise in a record; other controls stay."""
    return _COLOURS.sub("", text)


_MARKDOWN = {"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "`": "\\`", "*": "\\*", "~": "\\~",
             "[": "\\[", "]": "\\]", "$": "\\$"}
_BLOCK = re.compile(r"^(?:[#+-]|\d{1,9}[.)](?= |$))")  # a heading, a list item: where the text starts a line


def _line(text: Any) -> str:
    return terminal(str(text).replace("\n", " ").replace("\t", " "))


def esc(text: Any) -> str:
    """Text as markdown that renders as that text, on one line: no HTML, link, emphasis or code span, no
    block where it starts a line, safe inside a GFM table cell. Applied once, where text meets markdown."""
    flat = _line(text).strip()

    def one(i: int, char: str) -> str:
        if char == "_":  # emphasis only where it does not stand between two letters or digits
            inside = 0 < i < len(flat) - 1 and flat[i - 1].isalnum() and flat[i + 1].isalnum()
            return "_" if inside else "\\_"
        return _MARKDOWN.get(char, char)

    escaped = "".join(one(i, c) for i, c in enumerate(flat))
    return _BLOCK.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], escaped)


def code(text: Any) -> str:
    """Text as one inline code span, shown exactly (controls as their codes, on one line): its fence is a
    backtick longer than the longest run of backticks inside, so the text cannot close it. Not for table
    cells (GFM splits a row at a pipe even inside a code span): there, esc."""
    flat = _line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if not flat or flat[0] in "` " or flat[-1] in "` " else ""  # one space each side is dropped again
    return f"{fence}{pad}{flat}{pad}{fence}"
