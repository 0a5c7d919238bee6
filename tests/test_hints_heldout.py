"""The hints on real public failure logs they were not tuned on (issue 23 items 5 and 6;
tests/hint_scores.py has the figures, `python3 tests/hint_scores.py` prints them).

The held-out split is kept apart: no thread of it is cited by the training corpus, and no hint cites
one of its entries. A split is scored blind once, then read, and joins the training corpus: the first
(46 entries, 27 named, 59%) is ho1-*, the second (92, 45 named, 49%) h2-*. This is the third, collected
2026-12-02 by four collectors who did not read the hints (97 entries over 59 causes, 20 of them of 15
causes no training entry has), and judged before scoring by a fifth, blind too, for whether each excerpt
holds the fact that decides its cause (65 do). Scored once, with no hint changed for it: the fix named in
39 (40%; 34 of the 65 decidable, 52%), a certain hint of another cause on 9 (listed below). The issue's aim
is 80% and none; these tests keep what was measured from getting worse."""

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


# The certain hints of another cause when the split was scored (2026-12-02), each a text whose deciding
# fact the log does not hold: an IB queue pair's connect timeout that was a RoCE GID; an IB retry count
# read as the GID index; "Address already in use" from a process out of file descriptors; "invalid
# device ordinal" from Slurm's --gpus-per-task and from a single MIG instance; NCCL's socket interface
# hint on an IOMMU/ACS hang; NVML's "Insufficient Permissions" for a rootless container's device groups;
# a CUDA unknown error after suspend read as a GPU fault; "no CUDA GPUs" under WSL's libcuda path.
KNOWN_CERTAIN_WRONG = {"h3a-ib-roce-gid-1", "h3a-ib-retry-exceeded-2", "h3a-ulimit-open-files-2", "h3b-slurm-gpus-per-task-1",
                       "h3c-iommu-acs-1", "h3c-rootless-device-groups-1", "h3c-nvidia-uvm-stale-2",
                       "h3c-mig-single-instance-2", "h3c-wsl-libcuda-path-1"}


def test_on_the_held_out_split_no_new_certain_hint_names_another_cause():
    held = figures("held-out", held_out())
    wrong = {s.id for s in held.scored if s.wrong_certain}
    assert wrong <= KNOWN_CERTAIN_WRONG, sorted(wrong - KNOWN_CERTAIN_WRONG)


def test_on_the_held_out_split_the_fix_is_named_at_least_as_often_as_when_it_was_collected():
    held = figures("held-out", held_out())
    assert held.named / held.n >= 0.40, held.line()
    assert held.wrong_possible <= 1, held.line()  # possible only, with the caveat of what was not measured
