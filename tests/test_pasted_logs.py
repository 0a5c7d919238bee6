"""Logs as people paste them (issue 23 item 4): the same real failure behind a launcher's, a scheduler's
or a log collector's wrapping gets the same hints as the log as its program wrote it.

Built from the real public logs of tests/data/real_failures.yaml: each confirmed entry whose plain
excerpt gets a hint is wrapped each way these logs arrive in threads and in the harness's own inputs:
torch's `[rank3]:` in front of every line, torchrun's `[default0]:`, an ISO timestamp (kubectl logs
--timestamps), `srun -l`'s `0: `, a JSON record per line (Docker's json-file log driver, which the
docker engine's containers use, and Kubernetes' container logs), and the lines wrapped at 80 columns (a
terminal, a logger's width). The entries that arrived so wrapped in their own threads are checked as
they were pasted too."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from harness.textmatch import flattened, normalise, searched

from .test_hints_real import CONFIRMED, entries, fired, log_record


def _each_line(prefix: str):
    return lambda text: "\n".join(prefix + line for line in text.splitlines())


def _json_file(text: str) -> str:
    """Docker's json-file driver: one record per line, the line (with its newline) in "log"."""
    return "\n".join(json.dumps({"log": line + "\n", "stream": "stderr", "time": "2024-10-23T19:30:56.633819710Z"})
                     for line in text.splitlines())


def _wrapped(text: str) -> str:
    # at spaces, as a logger's or an editor's soft wrap leaves a line: not after a hyphen inside a word
    # ("libnccl-" / "net.so", textwrap's own habit) and not inside a word longer than the width; a
    # terminal's hard cut inside a word is not joined back (textmatch.flattened joins lines with a space)
    return "\n".join(part for line in text.splitlines()
                     for part in (textwrap.wrap(line, 80, break_on_hyphens=False, break_long_words=False) or [""]))


PASTED = {
    "torch rank prefix": _each_line("[rank3]: "),
    "torchrun prefix": _each_line("[default0]:"),
    "ISO timestamp": _each_line("2024-10-23T19:30:56.633819710Z "),
    "srun -l": _each_line("0: "),
    "timestamp, then rank": _each_line("[2026-01-04 21:33:04] [rank1]: "),
    "json-file record": _json_file,
    "wrapped at 80 columns": _wrapped,
}

HINTED = [e for e in CONFIRMED if fired(log_record(e))]


def _with_excerpt(entry: dict, text: str) -> dict:
    return {**entry, "excerpt": text}


def test_every_confirmed_real_entry_takes_part():
    assert len(HINTED) == len(CONFIRMED) >= 80


@pytest.mark.parametrize("how", sorted(PASTED))
@pytest.mark.parametrize("entry", HINTED, ids=[e["id"] for e in HINTED])
def test_a_real_log_pasted_through_a_wrapper_gets_the_same_hints(entry, how):
    plain = {h: m.certain for h, m in fired(log_record(entry)).items()}
    pasted = {h: m.certain for h, m in fired(log_record(_with_excerpt(entry, PASTED[how](entry["excerpt"])))).items()}
    assert pasted == plain


# ------------------------------------------------------------------- the rules themselves
@pytest.mark.parametrize("line, plain", [
    ("[rank3]: RuntimeError: NCCL error", "RuntimeError: NCCL error"),
    ("[default0]:torch.distributed.DistBackendError: x", "torch.distributed.DistBackendError: x"),
    ("2024-10-23T19:30:56.633819710Z host:1:2 [0] NCCL WARN x", "host:1:2 [0] NCCL WARN x"),
    ("[2026-01-04 21:33:04] host:617:2799 [3] transport/net_ib.cc:2360 NCCL WARN NET/IB: Got completion",
     "host:617:2799 [3] transport/net_ib.cc:2360 NCCL WARN NET/IB: Got completion"),
    ("Jan  2 03:04:05 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
     "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."),
    ("0: [rank0]: Traceback (most recent call last):", "Traceback (most recent call last):"),
    ("[1,0]<stderr>:host:1:2 [0] NCCL WARN x", "host:1:2 [0] NCCL WARN x"),
    ("(RayTrainWorker pid=1234, ip=10.0.0.1) RuntimeError: x", "RuntimeError: x"),
    ("trainer-1  | RuntimeError: x", "RuntimeError: x"),
    ("E1202 03:04:05.123456 42 ProcessGroupGloo.cpp:7] Gloo connectFullMesh failed", "Gloo connectFullMesh failed"),
    ('{"log":"host:1:2 [0] NCCL WARN Call to connect returned Connection refused\\n","stream":"stderr"}',
     "host:1:2 [0] NCCL WARN Call to connect returned Connection refused"),
    ('{"level": "error", "msg": "RuntimeError: x"}', "RuntimeError: x"),
    # what NCCL and torch write themselves is left as it is
    ("host:12:34 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", "host:12:34 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"),
    ("include/shm.h:41 -> 2", "include/shm.h:41 -> 2"),
    ('{"not": "a log record"}', '{"not": "a log record"}'),
    ("{not json}", "{not json}"),
])
def test_normalise_strips_what_launchers_and_collectors_put_around_a_line(line, plain):
    assert normalise(line) == plain


def test_a_wrapped_message_is_whole_on_one_line_and_every_form_is_searched():
    text = "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-1 (size\n    9637888)"
    assert flattened(text).endswith("segment nccl-shm-recv-1 (size 9637888)")
    assert text in searched(text) and flattened(text) in searched(text)
    assert re.search(r"\(size \d+\)", " ".join(searched(text)))


def test_the_entries_pasted_so_in_their_own_threads_are_among_the_cases():
    """Real threads' own prefixes (torch's [rankN]:, timestamps, srun -l) are in the corpus as pasted."""
    wrapped_in_thread = [e for e in entries().values()
                         if re.search(r"^(\[(rank|default)\d+\]:|\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\d+: )", e["excerpt"], re.M)]
    assert len(wrapped_in_thread) >= 8
    assert {e["id"] for e in wrapped_in_thread} & {e["id"] for e in HINTED}
