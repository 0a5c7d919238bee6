"""Text from the system under test is shown, never obeyed (issue 22, item 5): what ranks, NCCL, the
launcher, the host and nvidia-smi wrote reaches the terminal with every control character shown as its
code (`\\x1b`), and markdown (report.md, published pages, compare) as the text it is, never as a link,
HTML, emphasis or a code span. First the rule itself (harness/escape.py) on hostile inputs, then a whole
run on the fake engine whose rank, NCCL log, inherited variable, hostname and nvidia-smi say them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.console import Console

from harness import commands, escape, hostinfo, pipeline, reaper, results
from harness.errors import HarnessError, guarded
from harness.matrix import DEFAULT_CPU_MATRIX
from harness.progress import Progress
from harness.selection import Selection

from .fakeengine import FakeEngine, Rank

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


# ---------------------------------------------------------------- a whole run that says it all
NCCL_LOG = (f"fake:40000:40000 [0] NCCL INFO NCCL_SOCKET_IFNAME set to {HOSTILE}\n"
            f"fake:40000:40000 [0] transport/shm.cc:590 NCCL WARN Error while creating shared memory segment {HOSTILE}\n")
FINGERPRINT = {"torch": "2.13.0+cpu", "accelerate": "1.15.0", "python": "3.11.7",
               "env": {"NCCL_SOCKET_IFNAME": HOSTILE}}
HOSTNAME = f"box$\\frac{{${HOSTILE}"  # mathtext that fails matplotlib too
TOPO = f"\x1b[1mGPU0\x1b[0m\t X \t{OSC_TITLE}\nLegend:\x1b[0m\n"


def _nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi as hostinfo runs it, answering in colour with an OSC among its lines."""
    def run(argv: list[str], timeout: float = 20) -> Any:
        answer = TOPO if argv[:3] == ["nvidia-smi", "topo", "-m"] else f"NVIDIA H200{BEL}" if argv[0] == "nvidia-smi" else "0123456789ab"
        return SimpleNamespace(returncode=0, output=answer)

    monkeypatch.setattr(hostinfo, "proc", SimpleNamespace(which=lambda name: f"/usr/bin/{name}", run=run))


def _failing(spec: Any) -> dict[int, Rank]:
    """Rank 0 fails in init with the hostile text in its error (rank 1 is its victim); in the cell of
    Accelerate 1.15.0 its NCCL log warns with it too, and that line is the key line."""
    if "acc1.15.0" in spec.cell_id:
        (spec.out_dir / "nccl-rank0.log").write_text(NCCL_LOG)
    return {0: Rank("error", "init", error_class="nccl", message=f"NCCL error: {HOSTILE}", fingerprint=FINGERPRINT)}


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """Run `good` (the cell passes) and run `bad` (it fails with the hostile text everywhere) on the fake
    engine, through `invoke matrix`'s own pipeline; returns the results folder and what the console got."""
    monkeypatch.setattr(reaper, "sweep", lambda *args, **kw: [])
    monkeypatch.setattr(hostinfo.platform, "node", lambda: HOSTNAME)
    _nvidia_smi(monkeypatch)
    selection = Selection(DEFAULT_CPU_MATRIX, only=("*+default+torchrun",))
    for run_id, script, code in (("good", {}, 0), ("bad", _failing, 1)):
        engine = FakeEngine(script, inherited={"NCCL_SOCKET_IFNAME": HOSTILE})
        monkeypatch.setattr(pipeline.engines, "choose", lambda *args, engine=engine: engine)
        assert pipeline.run(selection, pipeline.MatrixOptions(results=tmp_path, run_id=run_id)) == code
    console = capsys.readouterr()
    return tmp_path, console.out + console.err


def test_the_run_recorded_the_hostile_text_as_data(runs: tuple[Path, str]) -> None:
    root, _ = runs
    record = next(iter(results.load_run(root / "bad").records.values()))
    assert record.status == "fail" and HOSTILE in str(record.reason)


def test_run_json_holds_nvidia_smis_output_as_plain_text(runs: tuple[Path, str]) -> None:
    """Colour codes are noise and stripped where the output is stored; the OSC is kept, as its codes."""
    host = json.loads((runs[0] / "bad" / "run.json").read_text())["host"]
    assert host["topo"] == "GPU0\t X \t\\x1b]0;pwned\\x07\nLegend:"
    assert host["gpus"] == ["NVIDIA H200\\x07"] and host["driver"] in (None, "NVIDIA H200\\x07")
    assert host["hostname"] == HOSTNAME  # data as the host said it: escaped where it is shown


def test_the_console_shows_the_text_and_obeys_none_of_it(runs: tuple[Path, str]) -> None:
    _, console = runs
    line = next(l for l in console.splitlines() if ": FAIL - " in l)
    assert SHOWN in line and raw_controls(console) == [], line


def test_report_md_shows_every_hostile_text_and_makes_no_link_or_html(runs: tuple[Path, str]) -> None:
    report = (runs[0] / "bad" / "report.md").read_text()
    assert raw_controls(report) == []
    # the harness's own markup only: bold hint titles and their https:// links
    assert {k for k in made_by(report) if k != "strong_open" and not k.startswith("link https://")} == set()
    seen = rendered(report)
    assert f"rank 0: RuntimeError: NCCL error: {SHOWN}" in seen  # the rank's error
    assert f"rank 0: RuntimeError: Error while creating shared memory segment {SHOWN}" in seen  # NCCL's line
    assert f"compatibility on box$\\frac{{${SHOWN}" in seen  # the hostname, in the title and the host table
    assert f"NCCL_SOCKET_IFNAME={SHOWN}" in seen  # the inherited variable, by origin


def test_published_pages_and_the_plot_take_the_hostile_hostname(runs: tuple[Path, str], tmp_path: Path) -> None:
    root, _ = runs
    docs = tmp_path / "docs"
    for run_id in ("good", "bad"):  # good has a busbw: its plot's title holds the hostname's `$\frac{$`
        assert guarded(lambda run_id=run_id: commands.publish(run_id, docs, root)) == 0
    pages = sorted(docs.rglob("*.md"))
    assert len(pages) == 3 and list(docs.rglob("good-busbw.png"))
    for page in pages:
        text = page.read_text()
        assert raw_controls(text) == [] and not {k for k in made_by(text) if k.startswith(("link javascript", "html"))}
    assert SHOWN in rendered(next(p for p in pages if p.name == "bad.md").read_text())


def test_compare_shows_the_new_failure_as_text(runs: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert guarded(lambda: commands.compare("good", "bad", runs[0])) == 1
    out = capsys.readouterr().out
    assert raw_controls(out) == [] and made_by(out) <= {"strong_open"}  # **Regressed.** is the harness's own
    regression = next(l for l in rendered(out).splitlines() if "pass → fail" in l)
    assert "+default+torchrun: pass → fail (rank 0: " in regression and SHOWN in regression


# ---------------------------------------------------------------- the console's other ways in
def test_an_error_message_quoting_the_system_under_test_is_shown_not_obeyed(capsys: pytest.CaptureFixture[str]) -> None:
    def fails() -> int:
        raise HarnessError(f"stack `x`: its image answered {HOSTILE}\nFix: check the image.")

    assert guarded(fails) == 2
    err = capsys.readouterr().err
    assert err == f"error: stack `x`: its image answered {SHOWN}\nFix: check the image.\n"


def test_the_live_status_line_passes_no_sequence_of_theirs_and_reads_no_markup() -> None:
    """On a terminal rich draws the status line with its own sequences; none of the rank's gets through,
    and `[link=...]` in a rank's text is not rich markup."""
    out = io.StringIO()
    progress = Progress(Console(file=out, force_terminal=True, width=300))
    with progress.task(f"[1/1] cell {HOSTILE}") as task:
        task.detail(f"rank 0 phase_start [link=javascript:alert(1)]init[/link] {HOSTILE}")
    progress.say(f"done {HOSTILE} :warning:")
    screen = out.getvalue()
    assert not [s for s in (OSC_TITLE, CLEAR, "\x07", "\x9b") if s in screen]
    assert "\\x1b]0;pwned\\x07" in screen and ":warning:" in screen
