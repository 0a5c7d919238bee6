"""A system under test that misbehaves cannot hurt the harness (issue 22, items 1, 2, 4 and 7), on the host
engine with real ranks: a site's sitecustomize.py on the variant's PYTHONPATH (tests/hostile_site.py, the
way a broken install or a hostile image would have it) makes a rank fail to import Accelerate, plants
links, a hard link and a FIFO where its NCCL debug file goes, points it at /dev/zero, or floods its
stdout, its NCCL log and its event file. The run ends with a readable record for every cell and the
verdict each deserves; nothing a link names is copied into a record; what the ranks wrote is kept to a
bound on disk; report, compare and publish read the run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import rankfiles, results

from .conftest import REPO

SECRET = "host:1:1 [0] NCCL WARN s3cret-outside-the-attempt-folder-2718"
FLOOD_MB = 80  # beyond every bound: the launcher log's 64 MiB cap, a log's 16+4 MiB window, a 4 MiB event line
VARIANTS = {
    "noaccelerate": "noaccelerate",
    "escapes": "escapes",
    "links": "links",
    "hardlink": "hardlink",
    "endless": "endless",
    "floods": "floods",
}


def _matrix(site: Path, secret: Path) -> str:
    define = "".join(
        f"    {name}: {{env: {{PYTHONPATH: \"{site}\", HOSTILE: \"{words}\", SECRET_FILE: \"{secret}\", "
        f"FLOOD_MB: \"{FLOOD_MB}\"}}}}\n" for name, words in VARIANTS.items())
    return f"""version: 1
stacks:
  matrix: {{cuda: ["cpu"], torch: ["2.13.0"], accelerate: ["1.15.0"]}}
variants: [{", ".join(VARIANTS)}]
launchers: [accelerate]
define:
  variants:
{define}timeouts: {{fingerprint: 60, init: 60, prepare: 60, step: 30, check: 30, bandwidth: 60, teardown: 30, cell: 300}}
bandwidth: {{sizes: ["4K"], iters: 2, warmup: 1, trials: 2}}
ranks: 2
"""


def _harness(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real harness in a process of its own: a read that never ends (a FIFO, /dev/zero) fails the test by
    the timeout, not the suite by hanging."""
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("hostile")
    site = root / "site"
    site.mkdir()
    shutil.copy(Path(__file__).with_name("hostile_site.py"), site / "sitecustomize.py")
    secret = root / "secret.log"
    secret.write_text(SECRET + "\n")
    (root / "hostile.yaml").write_text(_matrix(site, secret))
    done = _harness("matrix", "--matrix", str(root / "hostile.yaml"), "--engine", "host",
                    "--results", str(root / "results"), "--run-id", "hostile")
    return root, done


def test_the_run_ends_with_a_readable_record_and_its_verdict_for_every_cell(hostile_run):
    root, done = hostile_run
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stderr[-3000:]  # noaccelerate fails; the run itself is fine
    data = results.load_run(root / "results" / "hostile")
    assert data.problems == {}
    statuses = {r.cell.variant: r.status for r in data.records.values()}
    assert statuses == {"noaccelerate": "fail", "escapes": "fail", "links": "pass", "hardlink": "pass", "endless": "pass",
                        "floods": "pass"}


def test_a_rank_without_accelerate_fails_as_an_import_error_the_readers_can_read(hostile_run):
    root, _ = hostile_run
    data = results.load_run(root / "results" / "hostile")
    record = next(r for r in data.records.values() if r.cell.variant == "noaccelerate")
    assert record.outcome.error_class == "import", record.outcome
    assert "accelerate" in record.outcome.reason
    assert record.fingerprint.fact_errors and "No module named 'accelerate'" in record.fingerprint.fact_errors["accelerate"]


def test_nothing_a_planted_link_names_reaches_a_record(hostile_run):
    root, _ = hostile_run
    run = root / "results" / "hostile"
    written = [p for p in run.rglob("*") if p.name in ("record.json", "attempt.json", "report.md", "run.json")]
    assert len(written) >= 11
    for path in written:
        assert "s3cret-outside" not in path.read_text(), path
    assert (root / "secret.log").read_text() == SECRET + "\n"  # and nothing was written through them


def test_what_the_ranks_flooded_is_kept_to_a_bound(hostile_run):
    root, _ = hostile_run
    (attempt,) = (root / "results" / "hostile" / "cells").glob("*floods*/attempt-*")
    log = attempt / "launcher.log"
    assert 2 * FLOOD_MB << 20 > log.stat().st_size <= rankfiles.LOG_CAP + (rankfiles.LOG_KEEP << 1)
    assert b"[harness: the output between here and the last 4 MiB was left out" in log.read_bytes()
    record = json.loads((attempt.parent / "record.json").read_text())
    ranks = record["attempts"][-1]["raw"]["ranks"]
    assert sum(r.get("malformed_events", 0) for r in ranks.values()) >= 2  # each rank's junk line, skipped
    nccl = record["attempts"][-1]["raw"]["nccl"]
    assert set(nccl) == {"0", "1"} and all("P2P" in json.dumps(summary) for summary in nccl.values())


def test_report_compare_and_publish_read_the_run(hostile_run):
    root, _ = hostile_run
    res = str(root / "results")
    report = _harness("report", "--run", "hostile", "--results", res, timeout=120)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    text = (root / "results" / "hostile" / "report.md").read_text()
    assert "corrupt" not in text and "noaccelerate" in text
    compare = _harness("compare", "hostile", "hostile", "--results", res, timeout=120)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    publish = _harness("publish", "--to", str(root / "docs"), "--run", "hostile", "--results", res, timeout=120)
    assert publish.returncode == 0 and "Traceback" not in publish.stderr, publish.stderr


def test_control_sequences_and_markdown_from_a_rank_are_shown_never_obeyed(hostile_run):
    """Issue 22, item 5, with a real rank: its error carries an OSC that sets the terminal's title, a CSI,
    BEL and markdown; the console, report.md and the published page show them as text."""
    root, done = hostile_run
    line = next(l for l in done.stderr.splitlines() if "+escapes: FAIL" in l)
    assert "\\x1b]0;pwned\\x07" in line and "\x1b" not in line and "\x07" not in line
    _harness("publish", "--to", str(root / "docs"), "--run", "hostile", "--results", str(root / "results"), timeout=120)
    pages = [root / "results" / "hostile" / "report.md", *(root / "docs").rglob("hostile.md")]
    assert len(pages) == 2
    for page in pages:
        text = page.read_text()
        assert "pwned" in text, page  # shown
        assert not any((ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f for c in text), page
        assert not re.search(r"(?<!\\)\]\(javascript:", text) and "\\[click\\]" in text, page  # no live link
