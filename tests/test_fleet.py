"""`invoke fleet` (issue 26), the pure part: which nodes can be tested now, the pairs between them, each node
and pair judged against the rest of the fleet with compare's noise rule (noise never names a node), a link
named only where both its nodes are fine alone, each node against its own baseline, the drain lines, and
the report. Hand-built records through the real record types; the real cluster is in test_fleet_cluster.py."""

from __future__ import annotations

import pytest

from harness import fleet
from harness.fleet import Fleet, Member, judge, member, pairs, usable

from .bandwidth_records import CPU, cell_record, row

MIB = 1 << 20


def node(name: str, trials: list[float] | None, status: str = "pass", nodes: tuple[str, ...] | None = None) -> Member:
    """A node's (or a pair's) cell: gloo busbw at 16 MiB over five trials, or a failure."""
    record = cell_record(CPU, "default", [row(16 * MIB, trials)] if trials else None, status=status)
    return member(nodes or (name,), f"{CPU.id}+{fleet.variant_of(nodes or (name,))}", record)


HEALTHY = {"n1": [0.80, 0.82, 0.84, 0.83, 0.81], "n2": [0.78, 0.80, 0.83, 0.81, 0.79],
           "n3": [0.85, 0.86, 0.88, 0.84, 0.87], "n4": [0.79, 0.81, 0.80, 0.82, 0.83]}


def fleet_of(trials: dict[str, list[float] | None], **status: str) -> list[Member]:
    return [node(n, t, status.get(n, "pass")) for n, t in trials.items()]


# ---------------------------------------------------------------- which nodes, which pairs
def test_down_drained_and_unresponsive_nodes_are_set_aside_with_their_state_busy_ones_are_tried():
    ok, out = usable({"n1": "idle", "n2": "mixed", "n3": "allocated", "n4": "drained", "n5": "down*", "n6": "idle*",
                      "n7": "draining", "n8": "idle+drain", "n9": "completing"})
    assert ok == ["n1", "n2", "n3", "n9"]
    assert out == {"n4": "drained", "n5": "down*", "n6": "idle*", "n7": "draining", "n8": "idle+drain"}


def test_a_small_fleet_gets_every_pair_a_large_one_a_ring_unless_all_pairs():
    assert pairs(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    six = ["a", "b", "c", "d", "e", "f"]
    assert pairs(six) == [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("f", "a")]
    assert len(pairs(six, all_pairs=True)) == 15
    assert pairs(["a"]) == []


# ---------------------------------------------------------------- the verdicts
def test_a_healthy_fleet_flags_nothing():
    judged = judge(fleet_of(HEALTHY))
    assert [j.flag for j in judged] == ["", "", "", ""] and not any(j.suspect for j in judged)


def test_a_node_slower_beyond_the_fleets_noise_is_the_outlier_with_its_distance():
    slow = HEALTHY | {"n3": [0.30, 0.31, 0.33, 0.32, 0.29]}  # a CPU quota on one node: -62%
    judged = {j.member.name: j for j in judge(fleet_of(slow))}
    assert judged["n3"].flag == "outlier" and judged["n3"].suspect
    assert judged["n3"].change is not None and judged["n3"].change.change == pytest.approx(-0.61, abs=0.02)
    assert judged["n3"].mads is not None and judged["n3"].mads < -3.5
    assert "ranges apart" in judged["n3"].why
    assert not any(judged[n].suspect for n in ("n1", "n2", "n4"))


def test_noise_never_names_a_node_however_far_its_median():
    """A node 25% under the others' median with trials that reach into their range: inside the noise (and the
    30% floor of gloo cells) it is not an outlier."""
    noisy = HEALTHY | {"n2": [0.45, 0.62, 0.63, 0.64, 0.80]}
    judged = {j.member.name: j for j in judge(fleet_of(noisy))}
    assert judged["n2"].flag == "" and not judged["n2"].suspect


def test_a_failing_node_fails_and_a_pair_with_it_is_explained_by_it_not_the_link():
    nodes = judge(fleet_of(HEALTHY | {"n4": None}, n4="fail"))
    bad = {j.member.nodes[0] for j in nodes if j.suspect}
    assert bad == {"n4"} and next(j for j in nodes if j.member.name == "n4").flag == "fails"
    pair_trials = [0.40, 0.41, 0.42, 0.41, 0.40]
    prs = [node("", pair_trials, nodes=p) for p in [("n1", "n2"), ("n1", "n3"), ("n2", "n3")]]
    prs += [node("", None, "fail", nodes=p) for p in [("n1", "n4"), ("n2", "n4"), ("n3", "n4")]]
    judged = {j.member.nodes: j for j in judge(prs, bad_nodes=bad)}
    assert {j.flag for p, j in judged.items() if "n4" in p} == {"explained"}
    assert not any(j.suspect for j in judged.values())


def test_a_pair_that_fails_or_is_slow_between_two_good_nodes_names_the_link():
    prs = [node("", [0.40, 0.41, 0.42, 0.41, 0.40], nodes=p) for p in [("n1", "n2"), ("n1", "n3"), ("n1", "n4"),
                                                                       ("n2", "n4")]]
    prs.append(node("", [0.10, 0.11, 0.12, 0.11, 0.10], nodes=("n2", "n3")))
    prs.append(node("", None, "hang", nodes=("n3", "n4")))
    judged = {j.member.nodes: j for j in judge(prs)}
    assert judged[("n2", "n3")].flag == "link" and judged[("n3", "n4")].flag == "link"
    assert sum(j.suspect for j in judged.values()) == 2


def test_a_pair_whose_job_never_started_is_untested_not_a_link_and_the_fleet_not_known_good():
    prs = [node("", [0.40, 0.41, 0.42, 0.41, 0.40], nodes=p) for p in [("n1", "n2"), ("n1", "n3")]]
    prs.append(node("", None, "infra-error", nodes=("n2", "n3")))
    judged = {j.member.nodes: j for j in judge(prs)}
    assert judged[("n2", "n3")].flag == "untested" and not judged[("n2", "n3")].suspect
    f = Fleet("f", "c", "f", tuple(judge(fleet_of(HEALTHY))), tuple(judged.values()))
    assert not f.suspects and [j.member.name for j in f.untested] == ["n2–n3"]
    assert "**1 untested**" in fleet.render(f) and f.to_json()["untested"] == ["n2–n3"]


def test_with_one_trial_a_node_must_also_be_far_in_mads_to_be_named():
    one = {n: [sum(t) / 5] for n, t in HEALTHY.items()}
    assert not any(j.suspect for j in judge(fleet_of(one)))
    slow = one | {"n3": [0.30]}
    judged = {j.member.name: j for j in judge(fleet_of(slow))}
    assert judged["n3"].flag == "outlier", judged["n3"]


def test_each_node_against_its_own_baseline_names_a_node_that_slowed_with_the_fleet():
    before = {m.nodes: m for m in fleet_of(HEALTHY)}
    after = fleet_of({n: [x * (0.5 if n == "n1" else 1.0) for x in t] for n, t in HEALTHY.items() if t})
    judged = {j.member.name: fleet.against_baseline(j, before[j.member.nodes], 0.10) for j in judge(after)}
    assert judged["n1"].flag == "outlier"  # against the fleet too, here
    assert "-50% at 16 MiB" in judged["n1"].baseline and judged["n1"].suspect
    assert judged["n2"].baseline == "within 10% of its baseline" and not judged["n2"].suspect
    # the whole fleet slowed alike (after an upgrade of every node): the fleet sees nothing, each baseline does
    everyone = fleet_of({n: [x * 0.5 for x in t] for n, t in HEALTHY.items() if t})
    judged_all = [fleet.against_baseline(j, before[j.member.nodes], 0.10) for j in judge(everyone)]
    assert all(j.flag == "regressed" for j in judged_all)


# ---------------------------------------------------------------- the report
def test_the_report_puts_suspects_first_and_prints_but_does_not_run_the_drain_lines():
    nodes = judge(fleet_of(HEALTHY | {"n3": [0.30, 0.31, 0.33, 0.32, 0.29], "n4": None}, n4="fail"))
    f = Fleet("fleet-a", "cpu-torch2.13.0-acc1.15.0+default", "fleet-a", tuple(nodes), (),
              (("n5", "drained"),))
    text = fleet.render(f)
    table = text.split("## Nodes", 1)[1]
    assert table.index("`n3`") < table.index("`n1`") and table.index("`n4`") < table.index("`n1`")
    assert "**2 suspect(s):**" in text and "## Not tested" in text and "`n5`: drained" in text
    assert ('scontrol update NodeName=n3 State=DRAIN Reason="nccl-harness fleet fleet-a: busbw -61% from the fleet median"'
            in text)
    assert f.drains()[1] == ("n4", "nccl-harness fleet fleet-a: fail: fail in prepare")
    assert fleet.drain_argv(*f.drains()[0]) == ["scontrol", "update", "NodeName=n3", "State=DRAIN",
                                                 "Reason=nccl-harness fleet fleet-a: busbw -61% from the fleet median"]
    data = f.to_json()
    assert data["suspects"] == ["n3", "n4"] and data["unavailable"] == {"n5": "drained"}
    assert fleet.render(Fleet("ok", "c", "ok", tuple(judge(fleet_of(HEALTHY))), ())).count("No suspect") == 1


def test_a_drain_reason_keeps_only_what_a_shell_and_slurm_keep():
    reason = fleet.drain_reason('fail (RuntimeError: "x" `rm -rf` $HOME)', "f1")
    assert '"' not in reason and "`" not in reason and "$" not in reason and len(reason) <= 160


# ---------------------------------------------------------------- the placement the slurm engine submits
def test_a_placed_cell_is_submitted_to_its_nodes_by_its_variant_and_waits_for_them_when_busy():
    from harness.engines.slurm import SlurmOptions
    from harness.engines.slurmjob import NEVER_STARTS, PLACED_NEVER_STARTS

    options = SlurmOptions(nodes=3, jobs=3, placement=(("node-a", ("a",)), ("pair-a-b", ("a", "b"))), ranks_per_node=2)
    assert options.placed("cpu-torch2.13.0-acc1.15.0+pair-a-b") == ("a", "b")
    assert options.placed("host-stack+node-a+torchrun") == ("a",)  # the variant, whatever the stack and launcher
    assert options.placed("cpu-torch2.13.0-acc1.15.0+default") == ()
    assert options.sbatch_args(("a", "b"))[:3] == ["--nodes=2", "--ntasks-per-node=1", "--nodelist=a,b"]
    assert "--exclusive" in options.sbatch_args(("a",)) and options.sbatch_args()[0] == "--nodes=3"
    assert "ReqNodeNotAvail" in NEVER_STARTS and "ReqNodeNotAvail" not in PLACED_NEVER_STARTS


def test_a_suspect_is_named_only_when_measured_again_it_is_still_one():
    """Seen on the container cluster under other work: a healthy pair 42% under the others, trials just apart,
    fine when run again. The second measurement is judged against the same peers."""
    peers = [node("", [0.56, 0.60, 0.62, 0.63, 0.64], nodes=("n1", "n2")),
             node("", [0.37, 0.55, 0.56, 0.58, 0.60], nodes=("n1", "n3"))]
    noisy = node("", [0.30, 0.33, 0.35, 0.35, 0.36], nodes=("n2", "n3"))
    (first,) = [j for j in judge([*peers, noisy]) if j.member.nodes == ("n2", "n3")]
    assert first.flag == "link"
    fine = fleet.confirm(first, node("", [0.55, 0.58, 0.60, 0.61, 0.62], nodes=("n2", "n3")), peers)
    assert fine.flag == "unconfirmed" and not fine.suspect and "noise, not named" in fine.why
    still = fleet.confirm(first, node("", [0.20, 0.21, 0.22, 0.22, 0.23], nodes=("n2", "n3")), peers)
    assert still.flag == "link" and still.suspect and "measured again, the same" in still.why
    broken = fleet.confirm(first, node("", None, "hang", nodes=("n2", "n3")), peers)
    assert broken.suspect
    unknown = fleet.confirm(first, node("", None, "infra-error", nodes=("n2", "n3")), peers)
    assert unknown.flag == "link" and "not measured again (infra-error)" in unknown.why
