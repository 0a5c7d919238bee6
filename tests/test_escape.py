"""Text from the system under test is shown, never obeyed (issue 22, item 5): what ranks, NCCL, the
launcher, the host and nvidia-smi wrote reaches the terminal with every control character shown as its
code (`\\x1b`), and markdown (report.md, published pages, compare) as the text it is, never as a link,
HTML, emphasis or a code span. The rule itself (harness/escape.py) on hostile inputs."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from harness import escape

OSC_TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
CLEAR = "\x1b[2J"  # CSI: erases the screen
BEL = "\x07"
C1_CSI = "\x9b31m"  # the one-character CSI of C1
LINK = "[x](javascript:alert(1))"
SCRIPT = "<script>alert(1)</script>"
BOLD = "**bold**"
TICKS = "`tick`"
HOSTILE = f"{OSC_TITLE}{CLEAR}{BEL}{C1_CSI} {LINK} {SCRIPT} {BOLD} {TICKS} a|b"
# what the terminal and a reader see of it: each control character as its code, the rest as written
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x07\\x9b31m [x](javascript:alert(1)) <script>alert(1)</script> **bold** `tick` a|b"


def raw_controls(text: str) -> list[str]:
    """Control characters in text a terminal would obey: C0 but newline, DEL, C1."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F]


def _tokens(markdown: str) -> list[Token]:
    """Every token of the document, inline ones included, as a GFM renderer parses it (tables, strikethrough)."""
    found: list[Token] = []
    for tok in MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown):
        found += [tok, *(tok.children or [])]
    return found


def rendered(markdown: str) -> str:
    """The text a reader sees: text and code, each inline run on its own line."""
    return "\n".join("".join(c.content for c in tok.children or [] if c.type in ("text", "code_inline"))
                     for tok in _tokens(markdown) if tok.type == "inline")


def made_by(markdown: str) -> set[str]:
    """The markup a document makes that text could smuggle in: links (with their targets), HTML, emphasis,
    strikethrough and headings."""
    kinds = {"html_inline", "html_block", "em_open", "strong_open", "s_open"}
    return {f"link {t.attrGet('href')}" if t.type == "link_open" else t.type for t in _tokens(markdown)
            if t.type in kinds or t.type == "link_open"}


# ---------------------------------------------------------------- the rule
@pytest.mark.parametrize("text, shown", [
    (OSC_TITLE, "\\x1b]0;pwned\\x07"),
    (CLEAR, "\\x1b[2J"),
    (BEL, "\\x07"),
    (C1_CSI, "\\x9b31m"),
    ("\x7f\x00\r", "\\x7f\\x00\\x0d"),
    ("a\u202eb\u2028c", "a\\u202eb\\u2028c"),  # bidi override (CVE-2021-42574), line separator
    ("two\nlines\tand a tab", "two\\x0alines\\x09and a tab"),
    ("ümlaut → ok", "ümlaut → ok"),  # printable text is untouched
])
def test_on_the_terminal_every_control_character_is_shown_as_its_code(text: str, shown: str) -> None:
    assert escape.terminal(text) == shown
    assert raw_controls(escape.terminal(text)) == []


def test_a_block_of_lines_keeps_its_newlines_and_tabs_and_nothing_else() -> None:
    assert escape.terminal(f"GPU0\tX\n{OSC_TITLE}", lines=True) == "GPU0\tX\n\\x1b]0;pwned\\x07"


def test_colour_codes_are_stripped_and_other_sequences_stay_for_the_rule() -> None:
    assert escape.strip_colours("\x1b[1mGPU0\x1b[0m \x1b[32;1mNV18\x1b[m") == "GPU0 NV18"
    assert escape.strip_colours(OSC_TITLE + CLEAR) == OSC_TITLE + CLEAR


@pytest.mark.parametrize("text", [OSC_TITLE, CLEAR, BEL, C1_CSI, LINK, SCRIPT, BOLD, TICKS, "a | b", "_em_ and *em*",
                                  "~~struck~~", "![img](x.png)", "[ref]: https://x", "<https://x>", "&lt;b&gt;",
                                  "$x^2$", "C:\\path\\", "`` fence ``", HOSTILE])
def test_markdown_renders_the_text_itself_and_makes_nothing(text: str) -> None:
    """Inline (a list item, as notes and cell details are) and in a table cell: the reader sees exactly
    the text, with control characters as their codes; no link, HTML, emphasis or code span is made."""
    item = f"- {escape.esc(text)}\n"
    assert rendered(item) == escape.terminal(text).strip() and made_by(item) == set(), item
    table = f"| a | b |\n| --- | --- |\n| {escape.esc(text)} | end |\n"
    assert rendered(table).splitlines()[-2:] == [escape.terminal(text).strip(), "end"] and made_by(table) == set()


@pytest.mark.parametrize("text", ["# heading", "## 2", "- item", "+ item", "1. item", "7) item"])
def test_text_that_starts_a_line_makes_no_heading_or_list(text: str) -> None:
    """Notes are `1. <text>`: a reason starting like a block would open a heading or a list inside."""
    note = f"1. {escape.esc(text)}\n"
    kinds = {t.type for t in _tokens(note)}
    assert rendered(note) == text and not kinds & {"heading_open", "bullet_list_open"} and kinds >= {"ordered_list_open"}
    assert [t.type for t in _tokens(note)].count("ordered_list_open") == 1


def test_plain_words_stay_as_they_read_in_the_markdown_source() -> None:
    """The escapes are where markdown needs them: variable names, versions and sizes read as written."""
    for text in ("NCCL_P2P_DISABLE=1", "12.4.1", "2.5.1+cu124", "340.9 GB/s", "rank 0: DistBackendError"):
        assert escape.esc(text) == text


@pytest.mark.parametrize("text", ["cpu-torch2.13.0+default", "a`b", "``x", "y`", " spaced ", "|pipe|", SCRIPT, HOSTILE])
def test_a_code_span_shows_its_text_and_cannot_be_closed_by_it(text: str) -> None:
    span = f"see {escape.code(text)} here\n"
    codes = [t for t in _tokens(span) if t.type == "code_inline"]
    assert [c.content for c in codes] == [escape.terminal(text)] and made_by(span) == set(), span
