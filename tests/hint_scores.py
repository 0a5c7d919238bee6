"""How the hints do on real public failure logs, split by whether they were tuned on them (issue 23
items 5 and 6): the share of entries whose confirmed fix a hint names, and the hints that name another
cause, certain or possible, counted apart; a silent report is no wrong hint.

- training: tests/data/real_failures.yaml, the entries the packaged hints are built from (each hint cites its
  own as evidence);
- held-out: tests/data/real_failures_heldout.yaml, collected apart (by other hands, from threads the
  training file does not cite) and never used to write or tune a hint. A split is scored blind once:
  after its misses are read it is training (the first split, 46 entries scored 27/46 on 2026-12-02, is
  now the ho1-* entries of the training file), and the next measure needs a fresh one.

A hint "names the fix" of an entry when it is a hint of the entry's cause: one built from a training
entry of that cause. A hint of another cause is a wrong hint, unless it is generic (a wrapper's or a
victim's: "look at the other rank"), which is counted on its own. Where no specific hint fires, the
subsystem advice (harness/advice.py) is scored too: whether it names a variable that the confirmed
fix turns.

A cause label says nothing about a cause never collected: by it, a hint that names the fix of a new cause
(a class-of-cause hint: "a shared library is not found; install the package that provides it") could only
count as wrong or generic. So the held-out split is also scored as judged: every hint that fired on a
held-out entry without being a hint of its cause is judged by someone who wrote no hint, from the entry's
confirmed fix and the hint's text alone (tests/data/heldout_judged.yaml): `names-fix` counts as naming the
fix, `other` as a hint of another cause (a generic one too). A verdict holds for the hint's text it judged
(its digest): a changed hint needs a new verdict.

    python3 tests/hint_scores.py          # both splits' figures, and the held-out misses one by one
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

if __package__ in (None, ""):  # run as a script: the repo on the path, as the tests have it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import advice
from harness.hints import Hint
from tests.test_hints_real import cause_hints, confirmed, decided, fired, log_record

DATA = Path(__file__).parent / "data"
HELD_OUT = DATA / "real_failures_heldout.yaml"
JUDGED = DATA / "heldout_judged.yaml"
VARIABLES = re.compile(r"\b(NCCL_[A-Z0-9_]+|GLOO_SOCKET_IFNAME|MASTER_ADDR|MASTER_PORT|FI_[A-Z_]+|CUDA_VISIBLE_DEVICES)\b")


@lru_cache(maxsize=1)
def held_out() -> tuple[dict, ...]:
    return tuple(e for e in yaml.safe_load(HELD_OUT.read_text()) if confirmed(e))


@lru_cache(maxsize=1)
def training() -> tuple[dict, ...]:
    return tuple(e for e in yaml.safe_load((DATA / "real_failures.yaml").read_text()) if decided(e))


def digest(hint: Hint) -> str:
    """What a verdict judged: the hint's title, explanation and fix."""
    return hashlib.sha256(f"{hint.title}\n{hint.explanation}\n{hint.fix}".encode()).hexdigest()[:12]


@lru_cache(maxsize=1)
def verdicts() -> dict[tuple[str, str], dict]:
    """(entry id, hint id) -> the judge's verdict on that hint for that held-out entry."""
    return {(v["entry"], v["hint"]): v for v in yaml.safe_load(JUDGED.read_text()) or ()}


@dataclass(frozen=True)
class Scored:
    """One entry's verdict."""

    id: str
    cause: str
    named: bool  # a hint of its cause fired (certain or possible)
    named_certain: bool
    wrong_certain: tuple[str, ...]  # hints of another cause, certain
    wrong_possible: tuple[str, ...]
    generic: tuple[str, ...]  # wrapper / victim hints that fired
    advised: bool | None = None  # no specific hint: the advice names a variable of the fix (None: the fix turns none)
    decidable: bool = True  # the excerpt holds the fact that decides its cause (no `undecided:`)


def of_its_cause(entry: dict, by_cause: dict[str, set[str]] | None = None) -> set[str]:
    """The hints that name the entry's fix by its cause label: built from an entry of the same cause, or
    named for it (`also_named_by`). Any other hint that fires is outside its cause."""
    by_cause = cause_hints() if by_cause is None else by_cause
    return by_cause.get(entry["cause"], set()) | set(entry.get("also_named_by", ()))


def score(entry: dict, by_cause: dict[str, set[str]] | None = None, judged: bool = False) -> Scored:
    """By the cause label (a hint built from an entry of the same cause names the fix), or also `judged`:
    a hint outside the cause with a current verdict counts as that verdict says."""
    mine = of_its_cause(entry, by_cause)
    record = log_record(entry)
    got = fired(record)
    other: set[str] = set()
    if judged:
        said = {h: verdicts().get((entry["id"], h)) for h in set(got) - mine}
        current = {h: v["verdict"] for h, v in said.items() if v and v["digest"] == digest(got[h].hint)}
        mine = mine | {h for h, v in current.items() if v == "names-fix"}
        other = {h for h, v in current.items() if v == "other"}
    specific = {h: m for h, m in got.items() if not m.generic or h in other}
    foreign = {h: m for h, m in specific.items() if h not in mine}
    advised = None
    wanted = set(VARIABLES.findall(entry["fix"]))
    if not specific and wanted:
        found = advice.advise(record, matched=list(got.values()))
        advised = bool(found and wanted & {v for s in found.subsystems for v in s.variables})
    return Scored(entry["id"], entry["cause"], bool(mine & set(got)), any(got[h].certain for h in mine & set(got)),
                  tuple(h for h, m in foreign.items() if m.certain), tuple(h for h, m in foreign.items() if not m.certain),
                  tuple(h for h, m in got.items() if m.generic and h not in specific), advised, "undecided" not in entry)


@dataclass(frozen=True)
class Figures:
    """A split's figures."""

    name: str
    scored: tuple[Scored, ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return len(self.scored)

    @property
    def named(self) -> int:
        return sum(s.named for s in self.scored)

    @property
    def wrong_certain(self) -> int:
        return sum(bool(s.wrong_certain) for s in self.scored)

    @property
    def wrong_possible(self) -> int:
        return sum(bool(s.wrong_possible) and not s.wrong_certain for s in self.scored)

    @property
    def silent(self) -> int:
        return sum(not s.named and not s.wrong_certain and not s.wrong_possible for s in self.scored)

    def line(self) -> str:
        advised = [s for s in self.scored if s.advised is not None]
        return (f"{self.name}: {self.n} entries over {len({s.cause for s in self.scored})} causes; fix named "
                f"{self.named}/{self.n} ({self.named / max(self.n, 1):.0%}, certain {sum(s.named_certain for s in self.scored)}); "
                f"a wrong hint: certain {self.wrong_certain}, possible only {self.wrong_possible}; no hint of any cause "
                f"{self.silent}; where no hint fired and the fix turns a variable, the advice names it "
                f"{sum(bool(s.advised) for s in advised)}/{len(advised)}{self._decidable()}")

    def _decidable(self) -> str:
        """Where some entries' excerpts cannot decide their cause, the figures on the ones that can."""
        sure = [s for s in self.scored if s.decidable]
        if len(sure) == self.n:
            return ""
        named = sum(s.named for s in sure)
        return (f"; on the {len(sure)} whose excerpt decides the cause: named {named} "
                f"({named / max(len(sure), 1):.0%}), a wrong certain hint {sum(bool(s.wrong_certain) for s in sure)}")


def figures(name: str, entries: Iterable[dict], judged: bool = False) -> Figures:
    by_cause = cause_hints()
    return Figures(name, tuple(score(e, by_cause, judged) for e in entries))


def main() -> None:
    train, held = figures("training", training()), figures("held-out", held_out())
    print(train.line())
    print(held.line())
    print(figures("held-out, judged", held_out(), judged=True).line())
    for s in held.scored:
        if not s.named or s.wrong_certain or s.wrong_possible:
            print(f"  {s.id} ({s.cause}): named={s.named} wrong certain={list(s.wrong_certain)} "
                  f"possible={list(s.wrong_possible)} generic={list(s.generic)} advice={s.advised}")


if __name__ == "__main__":
    main()
