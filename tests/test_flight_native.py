"""Reading where a hung cell's ranks were (issue 24 items 1 and 2), pure: torch's flight recorder as the
ranks dumped it (flight.read), and every thread's native stack (nativestack), on dumps taken for real
(tests/data/native/: gdb and eu-stack on gloo ranks, on the host and in a container; see each test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import flight, nativestack
from harness.flight import FlightDump

NATIVE = Path(__file__).parent / "data" / "native"


def _dump(rank: int, *ops: tuple[str, int, str], torch: str = "2.13.0+cpu") -> FlightDump:
    return FlightDump.tolerant({"rank": rank, "torch": torch, "entries": [
        {"op": op, "seq": seq, "group": "default_pg", "state": state, "input_sizes": [[1000]]} for op, seq, state in ops]})


EARLIER = [("gloo:broadcast", 4, "scheduled")]


def test_a_rank_whose_newest_collective_is_older_never_entered_the_one_the_others_wait_in():
    read = flight.read({0: _dump(0, *EARLIER, ("gloo:all_reduce", 5, "scheduled")), 1: _dump(1, *EARLIER)}, 2)
    assert read.text == ("rank 1 never entered all_reduce #5 (gloo, input 1000) (its last: broadcast #4 (gloo, "
                         "input 1000)); rank 0 waits in it")
    assert read.behind == (1,)


def test_every_rank_in_the_same_collective_is_no_rank_behind():
    dumps = {r: _dump(r, *EARLIER, ("nccl:all_reduce", 5, "started")) for r in (0, 1)}
    read = flight.read(dumps, 2)
    assert read.text == "ranks 0, 1 wait in all_reduce #5 (nccl, input 1000)" and read.behind == ()


def test_gloo_records_no_completion_so_ranks_at_the_same_collective_are_not_said_to_wait():
    read = flight.read({r: _dump(r, *EARLIER, ("gloo:all_reduce", 5, "scheduled")) for r in (0, 1)}, 2)
    assert read.text == "ranks 0, 1 last entered all_reduce #5 (gloo, input 1000) (gloo records no completion)"


def test_a_collective_every_rank_completed_is_said_as_completed():
    read = flight.read({r: _dump(r, ("nccl:all_reduce", 9, "completed")) for r in (0, 1)}, 2)
    assert read.text == "ranks 0, 1 completed all_reduce #9 (nccl, input 1000)"


def test_a_rank_that_wrote_nothing_is_said_with_what_is_known_of_it_never_guessed():
    read = flight.read({0: _dump(0, ("gloo:all_reduce", 5, "scheduled"))}, 2, {1: "silent for 6s (stopped or frozen)"})
    assert read.text == ("rank 0 last entered all_reduce #5 (gloo, input 1000) (gloo records no completion); "
                         "rank 1 wrote no flight record (silent for 6s (stopped or frozen))")
    assert read.behind == ()  # where it is, only its stacks can say
    assert "no answer: stopped or gone" in (flight.read({0: _dump(0, ("gloo:all_reduce", 5, "scheduled"))}, 2).text or "")


def test_a_torch_without_the_recorder_is_said_so_and_an_empty_record_is_no_record():
    old = FlightDump.tolerant({"rank": 0, "torch": "2.1.2", "unavailable": "torch 2.1.2 has no flight recorder"})
    assert flight.read({0: old}, 1).text == "rank 0 wrote no flight record (torch 2.1.2 has no flight recorder)"
    empty = FlightDump.tolerant({"rank": 0, "torch": "2.13.0", "entries": []})
    assert flight.read({0: empty}, 1).text == "rank 0's flight record holds no collective yet"


def test_a_record_of_the_wrong_shape_keeps_what_fits():
    problems: list[str] = []
    dump = FlightDump.tolerant({"rank": 0, "entries": [{"op": "gloo:all_reduce", "seq": "x"}, {"op": "gloo:broadcast", "seq": 2}]},
                               problems)
    assert [(e.op, e.seq) for e in dump.entries] == [("gloo:all_reduce", 0), ("gloo:broadcast", 2)]
    assert problems and "seq" in problems[0]


@pytest.mark.parametrize(("name", "main", "first"), [
    # gdb on the host, on a gloo rank waiting in all_reduce for a peer that sleeps (torch 2.13, CPU)
    ("gdb-gloo-waiting", "inside a collective: c10d::Work::wait from libtorch_cpu.so", "inside gloo"),
    # eu-stack on the host, on that peer, stopped in its sleep: never in the collective
    ("eu-stack-gloo-stopped-behind", "in no collective (innermost: clock_nanosleep@GLIBC_2.2.5)", None),
    # eu-stack in a container (the CPU image), on a rank stopped inside check's all-reduce
    # (tests/test_collective_named.py)
    ("eu-stack-gloo-stopped-inside", "inside a collective: c10d::Work::wait", "inside gloo"),
    # eu-stack on the H200 (torch 2.11, NCCL 2.28.9, one rank), stopped as it started `check`
    # (bench/hang_forensics.py): NCCL's proxy threads first, then torch's watchdog and heartbeat monitor
    ("eu-stack-nccl-h200-stopped", "in no collective (innermost: clock_nanosleep)", "NCCL proxy/progress thread"),
])
def test_a_native_dump_says_where_the_main_thread_waits_and_shows_the_threads_that_matter_first(name, main, first):
    text = (NATIVE / f"{name}.txt").read_text()
    assert nativestack.where(text) == main
    ordered = nativestack.ordered(text)
    assert ordered[0].matters == first
    assert sum(t.main for t in ordered) == 1
    # gloo's event loop and torch's idle gloo workers are in every rank: they say nothing by themselves
    assert all(t.matters is None for t in ordered if any("tcp::Loop::run" in f or "Gloo::runLoop" in f for f in t.frames)
               and not any("gloo::" in f and "Loop::run" not in f for f in t.frames))
    # nor does the store's daemon thread (c10d's LibUVStoreDaemon, in epoll in every rank)
    assert all(t.matters is None for t in ordered if any("StoreDaemon" in f for f in t.frames))
    shown = nativestack.shown(text, most=2, frames=4)
    assert shown.startswith(f"thread {ordered[0].tid}") and "more threads" in shown


def test_frames_lose_their_argument_lists_and_keep_their_library():
    assert nativestack._short("gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, "
                              "std::ratio<1l, 1000l> >) () from /usr/lib/libtorch_cpu.so") == \
        "gloo::transport::tcp::UnboundBuffer::waitRecv from libtorch_cpu.so"
    assert nativestack._short("__GI___clock_nanosleep (clock_id=1, req=0x7f) at ../sysdeps/clock_nanosleep.c:48") == \
        "__GI___clock_nanosleep at clock_nanosleep.c:48"
    assert nativestack._short("clock_nanosleep@GLIBC_2.2.5") == "clock_nanosleep@GLIBC_2.2.5"


def test_on_nccl_the_proxy_threads_and_torchs_watchdog_come_first():
    ordered = nativestack.ordered((NATIVE / "eu-stack-nccl-h200-stopped.txt").read_text())
    assert [t.matters for t in ordered[:4]] == ["NCCL proxy/progress thread"] * 2 + ["torch's watchdog/monitor"] * 2
    assert {nativestack._short(t.frames[1]) for t in ordered[:2]} == {"ncclProxyService", "ncclProxyServiceUDS"}


def test_text_that_is_no_native_dump_is_shown_as_it_is():
    assert nativestack.where("(eu-stack failed: ptrace: Operation not permitted)") is None
    assert nativestack.shown("(eu-stack failed: ptrace: Operation not permitted)") == \
        "(eu-stack failed: ptrace: Operation not permitted)"


def _server(reply_hello: bytes, status: bytes) -> tuple[int, list[bytes]]:
    """A one-connection server on loopback speaking (or not) the RAS client protocol; what it was sent."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as reader:
            got.append(reader.readline())
            conn.sendall(reply_hello)
            if reply_hello.startswith(b"SERVER"):
                got.append(reader.readline())
                conn.sendall(status)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], got


def test_the_ras_client_speaks_nccls_protocol_and_returns_the_status_report():
    from harness.engines.collector import nccl_ras

    report = b"NCCL version 2.28.9 compiled with CUDA 13.0\nJob summary\n  Nodes  1\n"
    port, got = _server(b"SERVER PROTOCOL 2\n", report)
    assert nccl_ras(f"127.0.0.1:{port}") == report.decode()
    assert got == [b"CLIENT PROTOCOL 2\n", b"STATUS\n"]


def test_a_port_that_is_not_rass_is_said_so_and_none_listening_is_no_report():
    import socket

    from harness.engines.collector import nccl_ras

    port, _ = _server(b"HTTP/1.1 400 Bad Request\r\n", b"")
    assert nccl_ras(f"127.0.0.1:{port}") == "(the RAS port answered 'HTTP/1.1 400 Bad Request', not NCCL's RAS)"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    assert nccl_ras(f"127.0.0.1:{free}", timeout=2) == ""
