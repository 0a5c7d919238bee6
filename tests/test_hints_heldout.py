"""The hints on real public failure logs they were not tuned on (issue 23 items 5 and 6;
tests/hint_scores.py has the figures, `python3 tests/hint_scores.py` prints them).

The held-out split is kept apart: no thread of it is cited by the training corpus, and no hint cites
one of its entries. A split is scored blind once, then read, and joins the training corpus: the first
(46 entries, 27 named, 59%) is ho1-*, the second (92, 45, 49%) h2*-, the third (97, 39, 40%; 9 certain
hints of another cause) h3*-, the fourth (59, 25, 42%; 1) h4*-, the fifth (73, 29, 40%; 8) h5*-, the sixth
(77, 28, 36%; 4) h6*-, the seventh (80, 28, 35%; 18) h7*-, the eighth (71, 34, 48%; 8) h8*-, the ninth
(75, 18, 24%; 13) h9*-, the tenth (46, 15, 33%; 4) h10*-, the eleventh (66, 13, 20%; 2) h11*-, the twelfth
(80, 25, 31%; 4) h12*-, the thirteenth (44, 4, 9%; 6) h13*-, the fourteenth (35, 15, 43%; 1) h14*-, the
fifteenth (100, 9, 9%; 7) h15*-, the sixteenth (40, 7, 18%; 8) h16*-, the seventeenth (38, 6, 16%; 1; judged
9, 24%, none wrong) h17*-. This is the eighteenth, collected 2026-12-08 (while the seventeenth was read) by three
collectors who did not read the hints, the scoring or the verdicts, asked for representative failures, given the
cause names to reuse where the cause is the same and, per entry, whether its excerpt holds the fact that decides
its cause: 50 entries over 36 causes (the driver, CUDA and the GPU stack around installs and upgrades; multi-GPU
training outside plain PyTorch; fine-tuning toolkits run as-is), 31 decidable. Scored once on 2026-12-08, after
the seventeenth had joined the training corpus, with the class-of-cause hints, and with no hint changed for it:
by cause label the fix named in 8 (16%; 95% Wilson interval 8-29%), in 8 of the 31 decidable (26%); a certain
hint of another cause label on 9 (8 decidable), a possible one only on 1; on the 21 entries whose cause the
training corpus has, 8; on the 29 of causes it has not (19 causes), none. Judged (tests/data/heldout_judged.yaml:
the 11 hints that fired outside their entry's cause label, judged blind from the confirmed fix and the hint's
text; 9 name the fix): the fix named in 17 (34%; 22-48%), in 17 of the 31 decidable (55%; 38-71%); a certain hint
that names another fix on 1 (not decidable: LLaMA-Factory's own regression, fsdp-mixed-requires-grad), a possible
one only on 1 (a driver too old for the torch build, nvml-driver-mismatch); 8 of the 29 entries of new cause
labels named (the label was new, the fix a known hint's: an extension built for another torch, an unsigned
module under Secure Boot, mpi4py against another MPI, device_map across processes). The issue's aim is 80% and
none; these tests keep what was measured from getting worse."""

from __future__ import annotations

from harness.hints import load

from .hint_scores import digest, figures, held_out, of_its_cause, training, verdicts
from .test_hints_real import cause_hints, fired, log_record


def _thread(url: str) -> str:
    return url.split("#")[0].rstrip("/").lower()


def test_the_held_out_split_shares_no_thread_with_the_training_corpus_and_no_hint_cites_it():
    held = held_out()
    # at least 30 entries over 30 causes: fewer would say little (the fourteenth, 35, is the smallest yet)
    assert len(held) >= 30 and len({e["cause"] for e in held}) >= 30
    assert {_thread(e["url"]) for e in held}.isdisjoint({_thread(e["url"]) for e in training()})
    cited = {entry for rule in load() for entry in rule.hint.evidence}
    assert not cited & {e["id"] for e in held}


def test_the_corpus_is_large_enough_over_enough_causes():
    every = [*training(), *held_out()]
    assert len(every) >= 120 and len({e["cause"] for e in every}) >= 50


def test_on_the_training_split_every_fix_is_named_and_no_hint_names_another_cause():
    train = figures("training", training())
    assert train.named == train.n and train.wrong_certain == 0 and train.wrong_possible == 0


# The certain hints of another cause label when the split was scored (2026-12-08), unread: what the tests
# keep from growing until the split is read and joins the training corpus (judged, all but one name the fix).
KNOWN_CERTAIN_WRONG = {"h18a-prebuilt-wheel-torch-mismatch-1", "h18a-prebuilt-wheel-torch-mismatch-2",
                       "h18a-prebuilt-wheel-torch-mismatch-3", "h18a-secure-boot-unsigned-module-1",
                       "h18b-mpi4py-mpi-mismatch-1", "h18c-framework-code-regression-1",
                       "h18c-device-map-auto-split-unsupported-1", "h18c-extension-torch-version-mismatch-1",
                       "h18c-extension-torch-version-mismatch-2"}
KNOWN_JUDGED_WRONG = {"h18c-framework-code-regression-1"}


def test_on_the_held_out_split_no_new_certain_hint_names_another_cause():
    held = figures("held-out", held_out())
    wrong = {s.id for s in held.scored if s.wrong_certain}
    assert wrong <= KNOWN_CERTAIN_WRONG, sorted(wrong - KNOWN_CERTAIN_WRONG)


def test_on_the_held_out_split_the_fix_is_named_at_least_as_often_as_when_it_was_collected():
    held = figures("held-out", held_out())
    assert held.named >= 8 and held.n == 50, held.line()
    assert held.wrong_possible <= 1, held.line()  # possible only, with the caveat of what was not measured


# ---------------------------------------------------------------- judged: verdicts on the hints outside the cause
def test_every_hint_that_fires_outside_its_cause_on_the_held_out_split_has_a_current_verdict():
    """Judged figures count every such hint: a new or changed hint that fires on a held-out entry outside its
    cause needs a verdict on its text (judged blind, see tests/data/heldout_judged.yaml) before it counts."""
    by_cause = cause_hints()
    missing = []
    for entry in held_out():
        for hint_id, m in fired(log_record(entry)).items():
            said = verdicts().get((entry["id"], hint_id))
            if hint_id not in of_its_cause(entry, by_cause) and (not said or said["digest"] != digest(m.hint)):
                missing.append(f"{entry['id']}: {hint_id} ({'stale' if said else 'none'})")
    assert not missing, missing


def test_each_verdict_names_a_held_out_entry_a_hint_and_says_why():
    hints = {rule.hint.id for rule in load()}
    held = {e["id"] for e in held_out()}
    for (entry, hint), said in verdicts().items():
        assert entry in held and hint in hints, (entry, hint)
        assert said["verdict"] in ("names-fix", "other") and said["why"].strip(), said


def test_judged_the_held_out_fix_is_named_at_least_as_often_as_when_it_was_judged():
    judged = figures("held-out, judged", held_out(), judged=True)
    assert judged.named >= 17 and judged.n == 50, judged.line()
    assert {s.id for s in judged.scored if s.wrong_certain} <= KNOWN_JUDGED_WRONG, judged.line()
    assert judged.wrong_possible <= 1, judged.line()
