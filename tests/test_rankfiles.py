"""What the ranks write is read as input from the system under test (harness/rankfiles.py, issue 22): never
through a link, never a device, FIFO or hard link, never more than a stated number of bytes; a log is read
as its head and tail, in pieces; an event line longer than any event is skipped and counted; the
launcher's output is cut in place to a bound."""

from __future__ import annotations

import errno
import json
import os
import threading

import pytest

from harness import nccl_log, rankfiles
from harness.supervise import MAX_EVENT_LINE, EventTail

EVENT = {"v": 1, "event": "heartbeat", "rank": 0, "world": 2, "wall": 1.0, "mono": 1.0, "pid": 7}


def _line(**change) -> bytes:
    return (json.dumps({**EVENT, **change}) + "\n").encode()


@pytest.mark.parametrize("make, code", [
    (lambda p, t: os.symlink(t, p), errno.ELOOP),
    (lambda p, t: os.symlink("/dev/zero", p), errno.ELOOP),
    (lambda p, t: os.link(t, p), errno.EMLINK),
    (lambda p, t: os.mkfifo(p), errno.EINVAL),
])
def test_links_devices_fifos_and_hard_links_are_not_read(tmp_path, make, code):
    target = tmp_path / "outside.txt"
    target.write_text("NCCL WARN secret\n")
    path = tmp_path / "attempt" / "nccl-rank0.log"
    path.parent.mkdir()
    make(path, target)
    errors: list[OSError] = []

    def read() -> None:  # a FIFO opened for reading without O_NONBLOCK would wait here for a writer
        try:
            rankfiles.head(path, 100)
        except OSError as exc:
            errors.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert [e.errno for e in errors] == [code]
    assert nccl_log.parse_file(path).warnings == () and nccl_log.tail_file(path) == ""


def test_reads_stop_at_their_bound(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a\n" * 1000)
    assert rankfiles.head(path, 10) == b"a\n" * 5
    data, cut = rankfiles.tail(path, 11)
    assert cut and data == b"a\n" * 5  # from a line's start
    assert rankfiles.tail(path, 5000) == (b"a\n" * 1000, False)


def test_a_long_log_is_its_head_a_line_saying_so_and_its_tail(tmp_path):
    path = tmp_path / "nccl-rank0.log"
    with open(path, "w") as fh:
        fh.write("first\n" + "x" * 50_000 + "\n")  # a line longer than the width: cut, its rest skipped
        for i in range(20_000):
            fh.write(f"line {i}\n")
        fh.write("last\n")
    got = list(rankfiles.lines(path, first=60_000, last=100, width=80))
    assert got[0] == "first" and got[1] == "x" * 80 and got[2] == "line 0"
    assert any(g.startswith("[harness: ") and "left out" in g for g in got)
    assert got[-1] == "last" and len(got) < 2000
    whole = list(rankfiles.lines(path, width=80))
    assert len(whole) == 20_003 and whole[-1] == "last"


def test_the_parser_keeps_a_bounded_number_of_facts(tmp_path):
    path = tmp_path / "nccl-rank0.log"
    with open(path, "w") as fh:
        for i in range(10_000):
            fh.write(f"host:1:1 [0] NCCL WARN distinct warning {i}\n")
    found = nccl_log.parse_file(path)
    assert 0 < len(found.warnings) <= 4096


def test_an_overlong_event_line_is_skipped_and_counted_and_the_next_events_read(tmp_path):
    path = tmp_path / "events-rank0.jsonl"
    tail = EventTail(path)
    with open(path, "ab") as fh:
        fh.write(_line(pid=1))
        fh.write(b"z" * (MAX_EVENT_LINE + (3 << 20)))  # a flood without a newline
    assert [e["pid"] for e in tail.read(whole=True)] == [1]
    assert tail.malformed == 1 and len(tail.lines.partial) <= MAX_EVENT_LINE
    with open(path, "ab") as fh:
        fh.write(b"zzz\n" + _line(pid=2) + _line(pid=3)[:20])
    assert [e["pid"] for e in tail.read()] == [2]
    with open(path, "ab") as fh:
        fh.write(_line(pid=3)[20:])
    assert [e["pid"] for e in tail.read()] == [3] and tail.malformed == 1


def test_an_event_file_replaced_by_a_link_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(_line(pid=9))
    path = tmp_path / "events-rank0.jsonl"
    os.symlink(target, path)
    assert EventTail(path).read(whole=True) == []


def test_the_launcher_log_is_cut_in_place_to_its_head_and_tail(tmp_path):
    path = tmp_path / "launcher.log"
    with open(path, "ab") as writer:  # the launcher appends (O_APPEND): it goes on after the cut
        writer.write(b"H" * 1000 + b"M" * 5000 + b"T" * 1000)
        writer.flush()
        assert not rankfiles.cap(path, limit=10_000, keep=1000)
        writer.write(b"M" * 5000 + b"T" * 1000)
        writer.flush()
        assert rankfiles.cap(path, limit=10_000, keep=1000)
        writer.write(b"after")
    data = path.read_bytes()
    assert data.startswith(b"H" * 1000 + b"\n[harness: the output between here and the last")
    assert data.endswith(b"T" * 1000 + b"after") and b"MM" not in data
    os.symlink(path, tmp_path / "link.log")
    assert not rankfiles.cap(tmp_path / "link.log", limit=10, keep=1)
