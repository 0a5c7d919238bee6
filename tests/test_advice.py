"""Advice from the subsystem when no known issue matched (issue 23 item 2; harness/advice.py): an
unknown failure still gets a next step that is true, from the part of the stack that reported it,
ending with the rescue search for the cell; and it never stands beside a known issue's own fix.

"True" is checked against real public logs: each real entry of tests/data/real_failures.yaml, taken
as if no hint had matched it, must name the variable its confirmed fix turned (where the fix turns
one and the log names the subsystem), and may name nothing where the log holds no failing line."""

from __future__ import annotations

import re

import pytest

from harness import advice, hints, report, textmatch
from harness.advice import SUBSYSTEMS, advise

from .test_hints import failed, make_record, warned
from .test_hints_real import STATUS, entries, log_record

VARIABLES = re.compile(r"\b(NCCL_[A-Z_]+|GLOO_SOCKET_IFNAME|MASTER_ADDR|MASTER_PORT|FI_PROVIDER)\b")


def _unknown(record: dict) -> advice.Advice:
    """The advice for a record as if no known issue had matched it."""
    found = advise(record, matched=[])
    assert found is not None
    return found


def test_each_subsystem_pattern_is_bounded_and_declared_once():
    names = [s.name for s in SUBSYSTEMS]
    assert len(names) == len(set(names))
    for s in SUBSYSTEMS:
        assert textmatch.hazard(s.seen.pattern, s.seen.flags) is None, s.name
        assert s.variables and s.attempt


# ------------------------------------------------------------------- on real public logs
# the entries of a failure or a hang (two are a slow and a wrong cell: no advice is given for those)
FIXED_BY_A_VARIABLE = [e for e in entries().values() if VARIABLES.search(e["fix"]) and e["id"] not in STATUS]


def test_on_real_logs_the_advice_names_the_variable_of_the_confirmed_fix_most_of_the_time():
    # silence is right where the excerpt holds no fact that decides the cause (`undecided:`, as for the hints):
    # such an entry counts only where the advice spoke
    named, silent, wrong = [], [], []
    for entry in FIXED_BY_A_VARIABLE:
        got = _unknown(log_record(entry))
        said = {v for s in got.subsystems for v in s.variables}
        if not got.subsystems and "undecided" in entry:
            continue
        (silent if not got.subsystems else named if said & set(VARIABLES.findall(entry["fix"])) else wrong).append(
            entry["id"])
    scored = len(named) + len(silent) + len(wrong)
    assert scored >= 15
    assert len(named) >= 0.7 * scored, (named, silent, wrong)
    assert len(wrong) <= 0.2 * scored, wrong


@pytest.mark.parametrize("entry_id, subsystem", [
    ("ib-roce-gid-1", "NET/IB"),
    ("socket-ifname-3", "bootstrap"),
    ("shm-size-1", "SHM"),
    ("nvls-1", "NVLS"),
    ("rendezvous-port-2", "the store and rendezvous"),
    ("remote-error-victim-1", "the network between ranks"),
    # NCCL's socket types disagreeing (a NET/IB connection where NET/Socket listens: IB broken on one node)
    ("h4a-ib-broken-on-one-node-2", "the ranks' network transports"),
])
def test_a_real_log_names_the_subsystem_that_reported_it(entry_id, subsystem):
    got = _unknown(log_record(entries()[entry_id]))
    assert got.subsystems and got.subsystems[0].name.startswith(subsystem), [s.name for s in got.subsystems]


def test_an_info_line_names_no_subsystem_only_a_failing_one_does():
    """NCCL's INFO lines name every transport it set up; only the one whose line says it failed is advised."""
    info = warned("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
                  "bootstrap.cc:88 NCCL WARN Bootstrap : no socket interface found")
    assert [s.name.split(" ")[0] for s in _unknown(info).subsystems] == ["bootstrap"]


# ------------------------------------------------------------------- when and how it is said
def test_it_is_said_plainly_and_ends_with_the_rescue_search_for_this_cell():
    record = warned("transport/net_ib.cc:2360 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with status=12")
    text = _unknown(record).text()
    assert text.startswith("No known issue matched. The failure was reported by NET/IB")
    assert "NCCL_IB_DISABLE=1" in text
    assert text.endswith("runs the rescue search: the smallest NCCL change that makes it pass.")
    assert f"`invoke rescue {record['cell']['id']}`" in text


def test_a_failure_that_names_no_subsystem_still_gets_the_rescue_search():
    text = _unknown(failed("RuntimeError: something nobody has seen")).text()
    assert text.startswith("No known issue matched, and the failure names no subsystem.")
    assert "invoke rescue" in text


def test_a_gloo_cell_gets_no_rescue_search_which_does_not_apply_to_it():
    record = failed("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
                    "no error", error_class="other")
    record["cell"]["cuda"] = "cpu"
    got = _unknown(record)
    assert got.rescue is None and "invoke rescue" not in got.text()
    assert got.subsystems[0].name.startswith("gloo") and "GLOO_SOCKET_IFNAME" in got.text()


def test_no_advice_beside_a_known_issue_nor_for_a_cell_that_passed():
    shm = warned("include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
                 error_class="shm", shm=64 << 20)
    assert [m.hint.id for m in hints.match(shm) if not m.generic] and advise(shm) is None
    assert advise(make_record(status="pass")) is None
    # a generic hint (about a wrapper) alone leaves the cell unexplained: the advice is given beside it
    wrapper = warned("enqueue.cc:1234 NCCL WARN ncclInvalidUsage: the call was refused")
    matched = hints.match(wrapper)
    assert matched and all(m.generic for m in matched)
    assert advise(wrapper) is not None


def test_the_report_gives_the_next_step_in_the_cells_detail():
    record = warned("proxy.cc:1523 NCCL WARN [Proxy Service 1] Failed to execute operation Connect from rank 1, retcode 3")
    lines = report._detail(record["cell"]["id"], report.CellRecord.parse(record), report.RunFacts())
    step = next(line for line in lines if line.startswith("- next step: "))
    assert "proxy" in step and "NCCL_NET=Socket" in step and "invoke rescue" in step
