"""Find the release that broke it (issue 25): the pure part of `invoke bisect`. The versions between a good
and a bad release of one axis, in the order they were released, with the ones that cannot exist beside the
rest of the stack set aside (compat.why_not, their reason kept); the rule that judges one step's outcome
against the good and the bad one; the next version to try, as git bisect picks it (the middle of what is
still unknown, going around skipped steps); and the answer.

Versions run from the good end to the bad end, whichever is older: "good 0.34.2, bad 0.20.0" asks for the
oldest release that still works as much as "good 2.25.1, bad 2.26.2" asks for the first that broke. The image
axis walks the user's own tags in the order given (a tag is not a version: "2026-11" or "prod-3").

A step is judged by its outcome (the default), or with --metric busbw by its bandwidth against the good end's
(compare's rule: beyond the threshold and beyond the noise the two measured): both ends and the step must pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.version import InvalidVersion, Version

from .errors import HarnessError
from .kinds import STATUSES
from .matrix import Stack, default_base, default_index

__all__ = ["AXES", "LISTED_ONLY", "METRICS", "Plan", "Step", "Verdict", "answer", "bounds", "image_ref", "judge",
           "judge_busbw", "judge_end", "next_version", "plan", "stack_at"]

# The axes a bisection walks: the stack field it changes, and the package whose releases it lists.
AXES: dict[str, tuple[str, str | None]] = {
    "accelerate": ("accelerate", "accelerate"),
    "torch": ("torch", "torch"),
    "nccl": ("nccl", None),  # the pip wheel's name depends on the stack's CUDA (compat: nvidia-nccl-cuXX)
    "cuda": ("cuda", None),  # no package index lists CUDA releases as bases: --versions gives them
    "image": ("image", None),  # the user's own tags, from --versions, in their order
}
# Axes whose releases no package index lists: the user gives them (--versions)
LISTED_ONLY = frozenset({"cuda", "image"})
METRICS = ("outcome", "busbw")

Verdict = str  # "good" | "bad" | "skip"
VERDICTS = ("good", "bad", "skip")


@dataclass(frozen=True)
class Plan:
    """What a bisection walks: the versions from the good end to the bad end (both included), and those of
    them that cannot exist with the rest of the stack, with why (never built, never run)."""

    axis: str
    cell_id: str
    versions: tuple[str, ...]
    na: tuple[tuple[str, str], ...] = ()

    @property
    def good(self) -> str:
        return self.versions[0]

    @property
    def bad(self) -> str:
        return self.versions[-1]

    @property
    def worst_case_steps(self) -> int:
        """Steps a search can need: both ends, then halving what lies between them (skips can add more)."""
        inner = len(self.versions) - 2 - len(self.na)
        return 2 + (math.ceil(math.log2(inner + 1)) if inner > 0 else 0)


@dataclass(frozen=True)
class Step:
    """One version tried: its verdict, the outcome that decided it, and the run that holds its record."""

    version: str
    verdict: Verdict
    status: str
    why: str = ""
    run_id: str = ""


def _version(text: str, flag: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise HarnessError(f"{flag} {text!r} is not a version. Fix: give a release as pip names it, e.g. 1.2.1.") from None


def plan(axis: str, cell_id: str, good: str, bad: str, released: Iterable[str],
         why_not: Callable[[str], str | None] = lambda v: None) -> Plan:
    """The versions from `good` to `bad` among `released` (pre-releases only where an end is one), in release
    order from the good end; `why_not(v)` sets aside the ones that cannot exist with the stack."""
    if axis not in AXES:
        raise HarnessError(f"--axis {axis!r} is not an axis bisect walks. Fix: one of {', '.join(AXES)}.")
    if axis == "image":
        return _plan_tags(cell_id, good, bad, list(released), why_not)
    g, b = _version(good, "--good"), _version(bad, "--bad")
    if g == b:
        raise HarnessError(f"--good and --bad are the same release ({good}). Fix: give two releases, the last one "
                           "known to work and the first one known not to.")
    low, high = min(g, b), max(g, b)
    pre = g.is_prerelease or b.is_prerelease
    chosen: dict[Version, str] = {}
    for text in released:
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if low <= v <= high and (pre or not v.is_prerelease) and v not in chosen:
            chosen[v] = text
    for v, text in ((g, good), (b, bad)):
        chosen.setdefault(v, text)
    ordered = [chosen[v] for v in sorted(chosen, reverse=g > b)]
    na = tuple((v, reason) for v in ordered[1:-1] if (reason := why_not(v)) is not None)
    return Plan(axis, cell_id, tuple(ordered), na)


def _plan_tags(cell_id: str, good: str, bad: str, tags: list[str], why_not: Callable[[str], str | None]) -> Plan:
    """The image axis: the tags from good to bad in the order --versions gives them (either way round)."""
    if good == bad:
        raise HarnessError(f"--good and --bad are the same image ({good}). Fix: give the last image known to work and "
                           "the first known not to.")
    for flag, end in (("--good", good), ("--bad", bad)):
        if end not in tags:
            raise HarnessError(f"{flag} {end!r} is not in --versions ({', '.join(tags) or 'none given'}). Fix: list the "
                               "images in the order they were made, both ends included: --versions OLD,MIDDLE,...,NEW.")
    unique = list(dict.fromkeys(tags))
    i, j = unique.index(good), unique.index(bad)
    ordered = unique[i:j + 1] if i < j else unique[j:i + 1][::-1]
    na = tuple((v, reason) for v in ordered[1:-1] if (reason := why_not(v)) is not None)
    return Plan("image", cell_id, tuple(ordered), na)


def judge(step_status: str, step_class: str | None, good_status: str, bad_status: str,
          bad_class: str | None) -> tuple[Verdict, str]:
    """One step's verdict against the two ends, with why. Good when it ends as the good end did; bad when it
    fails as the bad end did (the same status and, for a failure, the same error class); anything else (a
    build that failed, an infra error, another failure) is skip: it says nothing of this regression."""
    if step_status not in STATUSES:
        return "skip", f"no outcome ({step_status or 'not run'})"
    if step_status == good_status:
        return "good", f"{step_status}, as the good end"
    if step_status == bad_status and (step_status != "fail" or step_class == bad_class):
        return "bad", f"{step_status}{f' ({step_class})' if step_class else ''}, as the bad end"
    if step_status in ("build-error", "infra-error", "n/a"):
        return "skip", f"{step_status}: it could not be run fairly"
    return "skip", (f"{step_status}{f' ({step_class})' if step_class else ''}, neither the good end's "
                    f"{good_status} nor the bad end's {bad_status}{f' ({bad_class})' if bad_class else ''}")


def judge_busbw(step_status: str, change: str | None, said: str) -> tuple[Verdict, str]:
    """A step judged by its bandwidth (--metric busbw): bad when it passed and compare's rule calls its busbw
    against the good end's a regression, good when it passed without one; a step that did not pass says
    nothing of a slowdown (skip). `change` is compare's verdict (None: no change beyond the threshold), `said`
    its line."""
    if step_status != "pass":
        return "skip", f"{step_status or 'not run'}: only a passing step's bandwidth is compared"
    if change == "regression":
        return "bad", said
    return "good", said or "busbw within the threshold of the good end's"


def judge_end(end: str, status: str, error_class: str | None) -> tuple[Verdict, str]:
    """An end's verdict: the good end must pass, the bad end must not (else the search has nothing to find:
    skip, and answer says so)."""
    said = f"{status or 'not run'}{f' ({error_class})' if error_class else ''}"
    holds = status == "pass" if end == "good" else status in STATUSES and status not in ("pass", "n/a")
    return (end if holds else "skip"), (said if holds else f"{said}: the {end} end does not hold here")


def bounds(p: Plan, steps: Mapping[str, Step]) -> tuple[int, int]:
    """The last version known good (from the good end) and the first known bad after it."""
    index = {v: i for i, v in enumerate(p.versions)}
    good = max((index[v] for v, s in steps.items() if s.verdict == "good" and v in index), default=0)
    bad = min((index[v] for v, s in steps.items() if s.verdict == "bad" and v in index and index[v] > good),
              default=len(p.versions) - 1)
    return good, bad


def next_version(p: Plan, steps: Mapping[str, Step]) -> str | None:
    """The version to try next: an end not yet tried, else the untried one nearest the middle of what is
    still unknown (skipped and n/a ones go around); None when nothing is left to try."""
    for end in (p.good, p.bad):
        if end not in steps:
            return end
    if steps[p.good].verdict != "good" or steps[p.bad].verdict != "bad":
        return None  # the ends do not hold: answer says so
    lo, hi = bounds(p, steps)
    na = dict(p.na)
    open_ = [i for i in range(lo + 1, hi) if p.versions[i] not in steps and p.versions[i] not in na]
    if not open_:
        return None
    middle = (lo + hi) / 2
    return p.versions[min(open_, key=lambda i: (abs(i - middle), i))]


def answer(p: Plan, steps: Mapping[str, Step]) -> str:
    """The result in one line: the first bad release and the last good one, or what is left undecided."""
    for end, want in ((p.good, "good"), (p.bad, "bad")):
        step = steps.get(end)
        if step is not None and step.verdict != want:
            return (f"the {want} end {p.axis} {end} is {step.verdict} here ({step.why}): nothing to bisect. Fix: "
                    f"give --{want} a release that is {want} for this cell.")
    if next_version(p, steps) is not None:
        return f"not finished: {len(steps)} of at most {p.worst_case_steps} steps done"
    lo, hi = bounds(p, steps)
    unsure = list(p.versions[lo + 1:hi])
    first_bad, last_good = p.versions[hi], p.versions[lo]
    if unsure:
        return (f"first bad: {p.axis} {first_bad} or one of {', '.join(unsure)} (skipped or n/a); last good "
                f"{last_good}")
    return f"first bad: {p.axis} {first_bad} (last good {last_good})"


def stack_at(stack: Stack, axis: str, version: str) -> Stack:
    """The stack with one axis moved to `version` (the nccl axis pins a pip wheel; the cuda axis moves the
    base image and torch's wheel index where they were the defaults for the old CUDA; the image axis takes
    another image, a bare tag one of the same repository)."""
    if axis == "nccl":
        return replace(stack, nccl=version, nccl_via="pip")
    if axis == "torch":
        return replace(stack, torch=version)
    if axis == "cuda":
        base, index = default_base(stack.cuda), default_index(stack.cuda)
        return replace(stack, cuda=version, base=default_base(version) if stack.base == base else stack.base,
                       torch_index=default_index(version) if stack.torch_index == index else stack.torch_index)
    if axis == "image":
        image = image_ref(stack.image, version)
        return replace(stack, image=image, base=image, facts=None)
    return replace(stack, accelerate=version)


def image_ref(current: str, version: str) -> str:
    """A --versions entry as an image: a reference as given, a bare tag ("2026-12") one of the current
    image's repository."""
    if any(c in version for c in "/:@"):
        return version
    repo = current.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    return f"{repo}:{version}"


def order_steps(p: Plan, steps: Iterable[Step]) -> Sequence[Step]:
    """Steps in the plan's version order (for the summary table)."""
    index = {v: i for i, v in enumerate(p.versions)}
    return sorted(steps, key=lambda s: index.get(s.version, len(index)))
