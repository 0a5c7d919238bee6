"""The hints on real public failure logs they were not tuned on (issue 23 items 5 and 6;
tests/hint_scores.py has the figures, `python3 tests/hint_scores.py` prints them).

The held-out split is kept apart: no thread of it is cited by the training corpus, and no hint cites
one of its entries. A split is scored blind once. The first (46 entries, 27 named, 59%) was then read
and joined the training corpus (ho1-*); this is the second, collected 2026-12-02 after the hints were
generalised, by collectors who did not read them: 92 entries over 51 causes, 30 of them causes no
training entry has. Scored once, with no hint changed for it: the fix named in 45 (49%), and a certain
hint of another cause on 4 (listed below). The issue's aim is 80% and none; these tests keep what was
measured from getting worse: no new certain hint of another cause, and the share named not lower."""

from __future__ import annotations

from harness.hints import load

from .hint_scores import figures, held_out, training


def _thread(url: str) -> str:
    return url.split("#")[0].rstrip("/").lower()


def test_the_held_out_split_shares_no_thread_with_the_training_corpus_and_no_hint_cites_it():
    held = held_out()
    assert len(held) >= 90 and len({e["cause"] for e in held}) >= 50
    assert {_thread(e["url"]) for e in held}.isdisjoint({_thread(e["url"]) for e in training()})
    cited = {entry for rule in load() for entry in rule.hint.evidence}
    assert not cited & {e["id"] for e in held}


def test_the_corpus_is_large_enough_over_enough_causes():
    every = [*training(), *held_out()]
    assert len(every) >= 120 and len({e["cause"] for e in every}) >= 50


def test_on_the_training_split_every_fix_is_named_and_no_hint_names_another_cause():
    train = figures("training", training())
    assert train.named == train.n and train.wrong_certain == 0 and train.wrong_possible == 0


# The certain hints of another cause when the split was scored (2026-12-02): the CUDA runtime's
# "insufficient driver" from a container started without GPUs; bind()'s "Address already in use" from
# NCCL running out of local ports; an RDMA device the pod may not open, read as the EFA devices missing;
# nvidia-container-cli failing to initialise CUDA, read as a GPU fault. Each is a cause whose deciding fact
# the record does not hold yet (the container's device request, NCCL's socket count, the pod's devices).
KNOWN_CERTAIN_WRONG = {"h2-no-gpu-in-container-1", "h2-tcp-port-exhaustion-1", "h2b-efa-unopenable-verbs-device-1",
                       "h2c-container-toolkit-broken-1"}


def test_on_the_held_out_split_no_new_certain_hint_names_another_cause():
    held = figures("held-out", held_out())
    wrong = {s.id for s in held.scored if s.wrong_certain}
    assert wrong <= KNOWN_CERTAIN_WRONG, sorted(wrong - KNOWN_CERTAIN_WRONG)


def test_on_the_held_out_split_the_fix_is_named_at_least_as_often_as_when_it_was_collected():
    held = figures("held-out", held_out())
    assert held.named / held.n >= 0.48, held.line()
    assert held.wrong_possible <= 4, held.line()  # possible only, with the caveat of what was not measured
