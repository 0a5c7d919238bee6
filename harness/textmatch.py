"""Regular expressions that a data file gives (the hints' `text` and `text_absent`), searched in text
that the system under test wrote (rank errors, launcher output, NCCL logs, thread dumps: of any size).

Python's re backtracks, and a search cannot be stopped once it has begun: `(a+)+b` takes 2**n steps
on n letters a (40 of them never ended), `.*.*x` n**3 (65 s on one line of 4,096 characters, seen
here) and `.*x` n**2 (0.74 s on 16,384). Two measures keep every search short, together:

- `hazard` refuses, when the file is read, the shapes that make a search take more than (the
  places where the pattern's start occurs) x (the text after each), with the fix. A repeat that can
  run more than once must repeat one plain part: no repeat inside it, no two ways through it that
  begin alike (`(a+)+`, `(.*a){20}`, `(a|a)*`, `(aa?)*`: exponential). A repeat may not take over
  what an earlier one could take when either is unbounded (`.*.*`, `\\s*\\s+`, `.*a.*x`,
  `\\S*.{0,80}`: each split of the line is tried), and an unbounded one may not begin the pattern
  (`.*x`: tried from every place). Bounded gaps (`a.{0,80}b`) are what the packaged hints use.
- `clip` bounds each text at MAX_TEXT characters (its head and its tail) before it is searched, so
  that what the check lets through stays bounded however large a log grows: at worst a search takes
  (MAX_TEXT / 2)**2 steps times the counts of its bounded gaps, and that only on a text that repeats
  the pattern's first word all along one line.

Why not a time limit on the search instead: re takes no timeout; a thread running a search cannot be
stopped (it would spin on after the command gave up); a signal does interrupt it (SIGALRM stopped
`(a+)+b` after 0.5 s here), but only on the main thread and by taking over the caller's own alarm;
and a subprocess per search costs far more than the searches of a whole report.

The check walks the parsed pattern (re's own parser, which already turns `(\\d|\\w)` into one class
and `ab|ac` into `a(b|c)`). Which characters two parts can share is asked of re itself, on every
character of the Basic Multilingual Plane and the pattern's own characters. It errs towards refusing
(`(a?)*b` and `\\b\\w+Error` are harmless and refused); every refusal says how to write it instead.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

if sys.version_info >= (3, 11):
    from re import _constants as sre
    from re import _parser as sre_parse

    _REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
    _GROUPS = {sre.SUBPATTERN, sre.ATOMIC_GROUP}
else:  # the same modules under their old names (deprecated from 3.11), without `a++` and `(?>a)`
    import sre_constants as sre
    import sre_parse

    _REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT}
    _GROUPS = {sre.SUBPATTERN}

__all__ = ["MAX_TEXT", "Hazard", "clip", "hazard"]

# Characters of one text a pattern is searched in: the whole text up to this, else its first and last
# halves. The texts hints read are bounded by lines (launcher output: 80, NCCL log tails: 40, thread
# dumps: 200), so this holds all of a real one; a rank's own error message or a line of megabytes is
# what it cuts. At worst (a 16 KiB line of the pattern's first word over and over) a search of the
# packaged hints takes about 0.2 s on it.
MAX_TEXT = 32 * 1024


def clip(text: str) -> tuple[str, ...]:
    """The parts of `text` a pattern is searched in: the text itself up to MAX_TEXT characters, else
    its head and its tail (MAX_TEXT // 2 each), as two texts, so that no match spans the cut."""
    if len(text) <= MAX_TEXT:
        return (text,)
    half = MAX_TEXT // 2
    return text[:half], text[-half:]


# ---------------------------------------------------------------- logs as people paste them
# What stands in front of a log line once it went through a launcher, a scheduler or a log collector
# (issue 23: the same NCCL or torch line behind each of these, in public threads): an ISO or syslog
# timestamp; torch's `[rank3]:` and torchrun's `[default0]:`; `srun -l`'s `0: `; mpirun's
# `[1,0]<stderr>:`; Ray's `(RayTrainWorker pid=123, ip=10.0.0.1)`; docker compose's `trainer-1  | `;
# a log level with its separator. Each is stripped, several in a row, before patterns are searched.
_PREFIX = re.compile(
    r"(?:\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?[ \t]{0,4}"  # 2024-01-02T03:04:05.1Z
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} (?:kernel: )?"  # syslog: Jan  2 03:04:05 host
    r"|\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]?[ \t]{1,4}"  # 03:04:05.123
    r"|\[(?:rank|default|Rank |RANK )?\d{1,6}\]: ?"  # [rank3]: [default0]:
    r"|\[\d{1,6},\d{1,6}\]<std(?:out|err)>: ?"  # mpirun --tag-output
    r"|\d{1,6}: "  # srun -l
    r"|\(\w{1,64} pid=\d{1,10}(?:, ip=[\d.:a-f]{1,45})?\) "  # Ray workers
    r"|[\w.-]{1,64}[ \t]{1,32}\| "  # docker compose service
    r"|(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|E|W|I)[ \t]{0,2}(?:\||:|-)[ \t]?"  # log levels (glog's E1202 too, below)
    r"|[EWI]\d{4} \d\d:\d\d:\d\d\.\d{1,9}[ \t]{1,4}\d{1,10} [\w.-]{1,64}:\d{1,6}\] "  # glog: E1202 03:04:05.123 42 x.cpp:7]
    r")")
# A JSON log record (Kubernetes' container logs, fluentd, journald's JSON, structured loggers): its
# message is what the line said.
_MESSAGE_KEYS = ("log", "message", "msg", "MESSAGE", "text")
_MAX_JSON_LINE = 64 * 1024


def _unwrapped(line: str) -> str:
    """The message of a JSON log record (its `log`, `message`, `msg`... string), else the line."""
    bare = line.strip()
    if not (bare.startswith("{") and bare.endswith("}")) or len(bare) > _MAX_JSON_LINE:
        return line
    try:
        record = json.loads(bare)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    return next((record[k] for k in _MESSAGE_KEYS if isinstance(record.get(k), str)), line)


def _stripped(line: str) -> str:
    for _ in range(4):  # a timestamp, then a rank, then a level...
        m = _PREFIX.match(line)
        if not m or not m.group(0):
            break
        line = line[m.end():]
    return line


def normalise(text: str) -> str:
    """A pasted log as the program wrote it: JSON log records unwrapped to their message, the
    prefixes launchers and collectors put in front of each line stripped, trailing spaces gone.
    Lines stay lines (a pattern anchored at a line's start still finds it)."""
    lines = [_stripped(part).rstrip() for line in text.splitlines() for part in _unwrapped(line).splitlines()]
    return "\n".join(lines)


def flattened(text: str) -> str:
    """The normalised text on one line, so that a message wrapped over two lines (a terminal's width,
    a logger's, a paste) matches a pattern written for it whole: line breaks and runs of spaces become
    one space."""
    return " ".join(normalise(text).split())


def searched(text: str) -> tuple[str, ...]:
    """What a hint's pattern is searched in for one text: the text as written, as normalised and as
    flattened (the ones that differ), each clipped."""
    forms = dict.fromkeys((text, normalise(text), flattened(text)))
    return tuple(dict.fromkeys(part for form in forms if form for part in clip(form)))


@dataclass(frozen=True)
class Hazard:
    """Why a pattern is refused (completes "the pattern 'x' ..."), and how to write it instead."""

    problem: str
    fix: str


_NESTED = Hazard(
    "repeats a part that itself repeats (like `(a+)+`, `(\\w+\\s)*` or `(.*a){20}`): on a text that almost matches, "
    "re tries exponentially many ways to split it (catastrophic backtracking), and the command would never end.",
    "repeat one plain part: one character class (`[\\w\\s]+` for `(\\w+\\s)+`), or the repeated text written out "
    "(`\\d+\\.\\d+\\.\\d+` for `(\\d+\\.){2}\\d+`).")
_AMBIGUOUS = Hazard(
    "repeats a part that has two ways through it beginning with the same character (like `(a|a)*`, `(\\w|\\d\\d)+` "
    "or `(aa?)*`): on a text that almost matches, re tries exponentially many of them (catastrophic backtracking), "
    "and the command would never end.",
    "make the ways through it begin with different characters, or repeat one character class (`\\w+` for "
    "`(\\w|\\d\\d)+`).")
_OVERLAP = Hazard(
    "has a repeat that can take what an earlier one could take, one of them unbounded (like `.*.*`, `\\s*\\s+`, "
    "`a.*b.*c` or `\\S*.{0,80}`): every split of a long line between them is tried, so a search takes the line's "
    "length squared or worse.",
    "bound the gaps as the packaged hints do (`a.{0,200}b.{0,200}c`), keep one of two repeats in a row, or put "
    "between them a character the earlier one cannot take (`[^)]*\\)`).")
_LEADING = Hazard(
    "begins with an unbounded repeat (like `.*foo` or `\\S+ failed`): a search tries it from every place in "
    "the text, which takes the text's length squared.",
    "begin with the text it looks for: a search finds it anywhere (`foo` for `.*foo`, `\\S failed` for "
    "`\\S+ failed`).")

_CATEGORIES = {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D", sre.CATEGORY_SPACE: r"\s",
               sre.CATEGORY_NOT_SPACE: r"\S", sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\W"}
_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.DOTALL, "s"), (re.ASCII, "a"))
_ANY = "(?s:.)"  # what a backreference may begin with: anything

Items = list[tuple[Any, Any]]  # a parsed (sub)pattern: (opcode, argument) pairs
Chars = frozenset[str]  # a set of characters, as the one-character regexes whose union it is


class _Refused(Exception):
    def __init__(self, hazard: Hazard) -> None:
        super().__init__(hazard.problem)
        self.hazard = hazard


def hazard(pattern: str, flags: int = 0) -> Hazard | None:
    """Why searching with `pattern` can take far longer than its text is long, or None; `pattern` must
    compile (re.error otherwise)."""
    parsed = sre_parse.parse(pattern, flags)
    try:
        _scan(list(parsed.data), parsed.state.flags, _State(leading=True), settled=True)
    except _Refused as refused:
        return refused.hazard
    return None


# ---------------------------------------------------------------- characters
def _char_class(op: Any, av: Any, flags: int) -> str | None:
    """A one-character item as a regex of its own, with its flags (`(?i:[a-f])`); None for other items."""
    if op is sre.LITERAL:
        body = re.escape(chr(av))
    elif op is sre.NOT_LITERAL:
        body = f"[^{re.escape(chr(av))}]"
    elif op is sre.ANY:
        body = "."
    elif op is sre.IN:
        parts = ["^" if o is sre.NEGATE else _CATEGORIES[a] if o is sre.CATEGORY
                 else f"{re.escape(chr(a[0]))}-{re.escape(chr(a[1]))}" if o is sre.RANGE else re.escape(chr(a))
                 for o, a in av]
        body = f"[{''.join(parts)}]"
    else:
        return None
    return _flagged(body, flags)


def _flagged(body: str, flags: int) -> str:
    return f"(?{''.join(letter for flag, letter in _FLAG_LETTERS if flags & flag)}:{body})"


@cache
def _plane() -> str:
    return "".join(map(chr, range(0x10000)))


@cache
def _share(a: str, b: str) -> bool:
    """Some character matches both one-character regexes (tried on the BMP and their own characters)."""
    own = "".join(ch for ch in a + b if ord(ch) > 0xFFFF)
    return re.search(f"(?={a}){b}", _plane() + own) is not None


def _overlap(a: Chars, b: Chars) -> bool:
    return any(_share(x, y) for x in a for y in b)


def _taken(items: Items, flags: int) -> Chars:
    """Every character `items` can take (lookarounds take none)."""
    chars: set[str] = set()
    for op, av in items:
        single = _char_class(op, av, flags)
        if single is not None:
            chars.add(single)
        elif op in _REPEATS:
            chars |= _taken(list(av[2]), flags)
        elif op in _GROUPS or op is sre.BRANCH or op is sre.GROUPREF_EXISTS:
            chars |= {c for alt, inner in _parts(op, av, flags) for c in _taken(alt, inner)}
        elif op is sre.GROUPREF:
            chars.add(_ANY)
    return frozenset(chars)


def _first(items: Items, flags: int) -> tuple[Chars, bool]:
    """The characters `items` can begin with, and whether they can match the empty string."""
    chars: set[str] = set()
    for op, av in items:
        found, empty = _first_of(op, av, flags)
        chars |= found
        if not empty:
            return frozenset(chars), False
    return frozenset(chars), True


def _first_of(op: Any, av: Any, flags: int) -> tuple[Chars, bool]:
    single = _char_class(op, av, flags)
    if single is not None:
        return frozenset({single}), False
    if op in _REPEATS:
        chars, empty = _first(list(av[2]), flags)
        return chars, empty or av[0] == 0
    if op in _GROUPS or op is sre.BRANCH or op is sre.GROUPREF_EXISTS:
        found = [_first(alt, inner) for alt, inner in _parts(op, av, flags)]
        return frozenset[str]().union(*(c for c, _ in found)), any(e for _, e in found)
    if op is sre.GROUPREF:
        return frozenset({_ANY}), True
    return frozenset(), True  # zero width: ^ $ \b \A \Z, lookarounds


def _parts(op: Any, av: Any, flags: int) -> list[tuple[Items, int]]:
    """The alternatives of a branch or conditional (`(?(1)a|b)`), or the one body of a group, each with
    its flags."""
    if op is sre.BRANCH:
        return [(list(alt), flags) for alt in av[1]]
    if op is sre.GROUPREF_EXISTS:
        return [(list(av[1]), flags), (list(av[2]) if av[2] else [], flags)]
    if op is sre.SUBPATTERN:
        return [(list(av[3]), (flags | av[1]) & ~av[2])]
    return [(list(av), flags)]  # an atomic group


# ---------------------------------------------------------------- rule 1 and 2: inside a repeat
def _has_repeat(items: Items) -> bool:
    for op, av in items:
        if op in _REPEATS and av[1] > 1:
            return True
        if op in _REPEATS or op in (sre.ASSERT, sre.ASSERT_NOT):
            inner = [list(av[2] if op in _REPEATS else av[1])]
        elif op in _GROUPS or op is sre.BRANCH or op is sre.GROUPREF_EXISTS:
            inner = [alt for alt, _ in _parts(op, av, 0)]
        else:
            continue
        if any(_has_repeat(alt) for alt in inner):
            return True
    return False


def _check_choices(items: Items, flags: int, after: Chars) -> None:
    """Refuse a choice in the body of a repeat whose ways can begin alike: alternatives, or an
    optional part and what comes after it (`after`: what follows these items, the repeat's next round
    included). Without that, and with no repeat inside (checked first), the body matches a text in at
    most one way, so the repeat's rounds split the text in one way only."""
    for i, (op, av) in enumerate(items):
        rest, empty = _first(items[i + 1:], flags)
        follow = rest | after if empty else rest
        if op in _REPEATS:  # here at most once: `x?` is the choice x or nothing
            ways = [(list(av[2]), flags)] + ([([], flags)] if av[0] == 0 else [])
        elif op in _GROUPS or op is sre.BRANCH or op is sre.GROUPREF_EXISTS:
            ways = _parts(op, av, flags)
        else:
            continue
        starts = []
        for way, inner in ways:
            chars, way_empty = _first(way, inner)
            starts.append(chars | follow if way_empty else chars)
        if any(_overlap(a, b) for n, a in enumerate(starts) for b in starts[n + 1:]):
            raise _Refused(_AMBIGUOUS)
        for way, inner in ways:
            _check_choices(way, inner, follow)


# ---------------------------------------------------------------- rule 3 and 4: repeats in a row
@dataclass(frozen=True)
class _Open:
    """A repeat that could still be taking characters here: the characters it repeats, whether it has
    no bound, and the mandatory parts it would have taken on the way (each as the characters it may be)."""

    chars: Chars
    unbounded: bool
    crossed: frozenset[Chars] = frozenset()


@dataclass(frozen=True)
class _State:
    """Where the walk is: the repeats still open, and whether nothing mandatory came yet (so that a
    search could begin anywhere before this place)."""

    open: frozenset[_Open] = frozenset()
    leading: bool = False

    def join(self, other: _State) -> _State:
        return _State(self.open | other.open, self.leading or other.leading)

    def cross(self, chars: Chars) -> _State:
        """Past a mandatory one-character part: the repeats that could have taken it stay open."""
        return _State(frozenset(replace(o, crossed=o.crossed | {chars}) for o in self.open if _overlap(o.chars, chars)))


def _always(op: Any, av: Any) -> bool:
    """Always matches, whatever the text (a repeat that may run zero times, alone or in a group)."""
    if op in _REPEATS:
        return bool(av[0] == 0)
    return op in _GROUPS and all(_always(o, a) for alt, _ in _parts(op, av, 0) for o, a in alt)


def _scan(items: Items, flags: int, state: _State, settled: bool) -> _State:
    """Walk `items` in order, refusing the first hazard; the state after them. `settled`: what follows
    them always matches, so a repeat at their end is never retried (`\\w*nccl\\w*` is harmless)."""
    for i, (op, av) in enumerate(items):
        rest_settled = settled and all(_always(o, a) for o, a in items[i + 1:])
        single = _char_class(op, av, flags)
        if single is not None:
            state = state.cross(frozenset({single}))
        elif op in _REPEATS:
            state = _repeat(av, flags, state, rest_settled)
        elif op in _GROUPS or op is sre.BRANCH or op is sre.GROUPREF_EXISTS:
            state = _join([_scan(alt, inner, state, rest_settled) for alt, inner in _parts(op, av, flags)])
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            _scan(list(av[1]), flags, state, False)  # what it looks at is searched too; it takes nothing
        elif op is sre.AT:
            state = _at(av, flags, state)
    return state


def _join(states: list[_State]) -> _State:
    joined = _State()
    for state in states:
        joined = joined.join(state)
    return joined


def _repeat(av: Any, flags: int, state: _State, settled: bool) -> _State:
    low, high, body = av[0], av[1], list(av[2])
    if high > 1:
        if _has_repeat(body):
            raise _Refused(_NESTED)
        _check_choices(body, flags, _first(body, flags)[0])
    if high <= 1 or low == high:  # at most once (`x?`), or a count that leaves no choice (`\d{3}`): walked once
        inner = _scan(body, flags, state, settled)
        return inner.join(state) if low == 0 else inner
    chars, empty, unbounded = _taken(body, flags), _first(body, flags)[1], high == sre.MAXREPEAT
    if not settled:
        if unbounded and state.leading:
            raise _Refused(_LEADING)
        # two bounded gaps in a row cost the product of their counts (`a.{0,80}b.{0,80}c`: 6,400 ways at
        # most); with an unbounded repeat on either side it is the line's length times that
        if any((unbounded or o.unbounded) and _overlap(o.chars, chars) and all(_overlap(chars, c) for c in o.crossed)
               for o in state.open):
            raise _Refused(_OVERLAP)
    after = _State(frozenset({_Open(chars, unbounded)}))
    return after.join(state) if low == 0 or empty else after.join(state.cross(chars))


def _at(code: Any, flags: int, state: _State) -> _State:
    """Past an anchor: `^` and `\\A` end what came before (a search starts there or at a line's start);
    `\\b` ends the repeats that cannot take both a word and a non-word character; others pass."""
    if code in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING):
        return _State()
    if code is sre.AT_BOUNDARY:
        word, other = frozenset({_flagged(r"\w", flags)}), frozenset({_flagged(r"\W", flags)})
        kept = frozenset(o for o in state.open if _overlap(o.chars, word) and _overlap(o.chars, other))
        return _State(kept, state.leading)
    return state
