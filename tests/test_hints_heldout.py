"""The hints on real public failure logs they were not tuned on (issue 23 items 5 and 6;
tests/hint_scores.py has the figures, `python3 tests/hint_scores.py` prints them).

The held-out split is kept apart: no thread of it is cited by the training corpus, and no hint cites
one of its entries. On it, a certain hint never names a cause other than the confirmed one (silence
beats a wrong hint), and the share of entries whose fix a hint names does not fall below what was
measured when the split was collected (27 of 46, 59%, on 2026-12-02; the issue's aim is 80%)."""

from __future__ import annotations

from harness.hints import load

from .hint_scores import figures, held_out, training


def _thread(url: str) -> str:
    return url.split("#")[0].rstrip("/").lower()


def test_the_held_out_split_shares_no_thread_with_the_training_corpus_and_no_hint_cites_it():
    held = held_out()
    assert len(held) >= 40 and len({e["cause"] for e in held}) >= 25
    assert {_thread(e["url"]) for e in held}.isdisjoint({_thread(e["url"]) for e in training()})
    cited = {entry for rule in load() for entry in rule.hint.evidence}
    assert not cited & {e["id"] for e in held}


def test_the_corpus_is_large_enough_over_enough_causes():
    every = [*training(), *held_out()]
    assert len(every) >= 120 and len({e["cause"] for e in every}) >= 50


def test_on_the_training_split_every_fix_is_named_and_no_hint_names_another_cause():
    train = figures("training", training())
    assert train.named == train.n and train.wrong_certain == 0 and train.wrong_possible == 0


def test_on_the_held_out_split_no_certain_hint_names_another_cause():
    held = figures("held-out", held_out())
    wrong = {s.id: s.wrong_certain for s in held.scored if s.wrong_certain}
    assert wrong == {}


def test_on_the_held_out_split_the_fix_is_named_at_least_as_often_as_when_it_was_collected():
    held = figures("held-out", held_out())
    assert held.named / held.n >= 0.58, held.line()
    assert held.wrong_possible <= 2, held.line()  # possible only, with the caveat of what was not measured
