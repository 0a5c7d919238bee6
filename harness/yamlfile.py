"""The YAML data files of the harness (matrix.yaml, the hints files): read with the line of every key and
with floats that remember how they were written, validated by strict pydantic models, and every
problem turned into one paragraph, `file:line at `key`: problem Fix: ...` (exit 2, no traceback).

Reading is safe on any input (issue 14: a 970-byte alias bomb ran for 65 s into a MemoryError, 20,000
nested brackets hit a RecursionError, /dev/zero a MemoryError, a FIFO blocked forever): only a regular
file of at most MAX_BYTES, strict UTF-8 without control characters, at most MAX_DEPTH levels of nesting
and MAX_NODES values with every alias counted as often as it is used (so a bomb or a recursive alias
stops before it grows), no duplicate key (both lines named), no tag beyond YAML's plain types. Each
refusal is the file's own error (MatrixError, HintsError: exit 2) with its line and the fix.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from .errors import FileError, MatrixError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "Ctx", "bad", "Float", "Strict", "key_text", "known_keys", "node_lines",
           "parse", "plain", "read", "short", "translate"]

# Limits, far above the real files (matrix.yaml: 2.3 KB, 155 values, 4 levels; harness/hints.yaml: 37 KB,
# 754 values) and low enough that the pure-Python parser ends in well under a second on any input. On
# the 2-core CI machine 1 MiB of blank lines took 1.2 s to scan and 32,000 list items 0.75 s; at these
# limits the worst inputs (512 KiB of blank lines, lists and mappings cut off at 10,000 values) take
# 0.13-0.28 s of CPU, the packaged hints.yaml (261 KiB, 3,972 values, 2026-12-07) 0.13 s. The limit was
# 256 KiB until the packaged hints file outgrew it; at 426 KB it was split into harness/hints.d/, one file per
# subsystem (the largest 61 KB), so each file keeps this bound.
MAX_BYTES = 512 * 1024
MAX_DEPTH = 32
MAX_NODES = 10_000
# The tags the plain YAML types resolve to; anything else (!!python/object, !!binary, !!set, a local !tag)
# is refused before it is constructed.
_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge",
                                                   "timestamp")}
_CONTROL = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")
_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class Strict(BaseModel):
    """Unknown keys are refused (a typo fails loudly), values are immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def bad(problem: str, fix: str) -> PydanticCustomError:
    """A validation error worded for a person, for validators to raise; `translate` shows the message
    and the fix."""
    # "fix" first: pydantic fills the template key by key, so a "{fix}" inside the problem stays as written
    return PydanticCustomError("harness", "{problem}", {"fix": fix, "problem": problem})


class Float(float):
    """A YAML float that remembers how it was written, so '12.10' can be quoted back to the user."""

    text: str


class _Refused(yaml.YAMLError):
    """A rule of this module broken at `line` (None: the file as a whole), with its fix."""

    def __init__(self, line: int | None, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.line, self.problem, self.fix = line, problem, fix


def _line(node_or_event: Any) -> int:
    return node_or_event.start_mark.line + 1


def short(value: Any, limit: int = 60) -> str:
    """repr() of a value cut to `limit` characters: a message stays one readable line whatever the input."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Loader(yaml.SafeLoader):
    """SafeLoader that stops composing past MAX_NODES values or MAX_DEPTH levels (counted as they are
    read, so 20,000 nested brackets end at level 33, not in a RecursionError), and whose constructors'
    own errors (an int of 5,000 digits, the date 2024-13-45) are refusals with their line."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = self.nodes = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # the scanner reads ahead for a possible `[...]: value` key; 20,000 `[` took it 0.45 s before the
        # composer's own limit was reached, so the flow level is bounded where it is counted
        if self.flow_level >= MAX_DEPTH:
            raise _Refused(self.line + 1, f"nests deeper than {MAX_DEPTH} levels.", _SMALLER)
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):  # no new value; what it expands to is counted in _check_graph
            return super().compose_node(parent, index)
        line = _line(self.peek_event())
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Refused(line, f"holds more than {MAX_NODES} values (keys, items and scalars).", _SMALLER)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Refused(line, f"nests deeper than {MAX_DEPTH} levels.", _SMALLER)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError, TypeError) as exc:
            raise _Refused(_line(node), f"the value {short(node.value)} cannot be read ({short(str(exc), 120)}).",
                           "write a plain string or number (quote it to keep it a string).") from None


_SMALLER = "this is far beyond any real matrix or hints file; write it out plainly (see the limits in harness/yamlfile.py)."


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Float:
    value = Float(yaml.SafeLoader.construct_yaml_float(loader, node))
    value.text = node.value
    return value


_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_node(node: yaml.Node) -> None:
    """One node on its own: a plain YAML type, and keys that are plain scalars."""
    if node.tag not in _PLAIN_TAGS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise _Refused(_line(node), f"uses the YAML tag {plain(tag)}; only plain strings, numbers, booleans, "
                       "lists and mappings are read.", "remove the tag (write the value plainly).")
    if isinstance(node, yaml.MappingNode):
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise _Refused(_line(key), "has a list or mapping as a key.", "use plain names as keys.")


def _check_graph(root: yaml.Node) -> None:
    """The document as it would unfold, measured without unfolding it: each node's size and depth with
    every alias counted as often as it is used (memoized per node, so a 9-levels-of-9 bomb costs 81
    steps, not 9**9), a recursive alias found, and each node's tag and keys checked once. Iterative:
    a chain of aliases can be deeper than Python's recursion limit."""
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values when unfolded, levels when unfolded)
    active: set[int] = set()  # nodes whose subtree is being measured: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, measured = stack.pop()
        key = id(node)
        if measured:
            kids = [done[id(k)] for k in _children(node)]
            size, depth = 1 + sum(k[0] for k in kids), 1 + max((k[1] for k in kids), default=0)
            active.discard(key)
            done[key] = (size, depth)
            if size > MAX_NODES:
                raise _Refused(_line(node), f"unfolds to more than {MAX_NODES} values once its aliases (*name) are "
                               "expanded (an alias bomb, or a file far beyond any real one).",
                               "write the values out, or use fewer aliases.")
            if depth > MAX_DEPTH:
                raise _Refused(_line(node), f"nests deeper than {MAX_DEPTH} levels once its aliases are expanded.", _SMALLER)
        elif key in active:
            raise _Refused(_line(node), "an alias (*name) refers to a collection that contains it, which would never "
                           "end.", "write the values out instead of the recursive alias.")
        elif key not in done:
            _check_node(node)
            active.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


def node_lines(node: yaml.Node | None, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """The 1-based line of every key path (a key's own line for a mapping entry). A key given twice in
    one mapping is refused with both lines: YAML would keep the last one silently (issue 14: a second
    `stacks:` replaced the whole matrix)."""
    out = {} if out is None else out
    if node is None:
        return out
    out[path] = _line(node)
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if key.value in first:
                where = key_text(path + (key.value,))
                raise _Refused(_line(key), f"the key `{where}` is given twice (lines {first[key.value]} and "
                               f"{_line(key)}); YAML would silently keep only the last one.",
                               "keep one of them (merge their contents if both are wanted).")
            first[key.value] = _line(key)
            node_lines(value, path + (key.value,), out)
            out[path + (key.value,)] = _line(key)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            node_lines(item, path + (i,), out)
    return out


def key_text(path: tuple) -> str:
    """('stacks', 'matrix', 'cuda', 0) -> 'stacks.matrix.cuda[0]'; a key that is not a printable name
    (a newline, an escape sequence, 10 KB of text) is shown as a short repr."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        name = plain(part)
        text += f".{name}" if text else name
    return text


def plain(value: Any) -> str:
    """A value as it reads in a message: as written when it is a short printable text, else short()."""
    text = str(value)
    return text if text.isprintable() and len(text) <= 60 else short(text)


class Ctx:
    """Where errors point: the file and the line of every key path; `error` builds the exception
    (MatrixError by default, any class with its signature), `key` renders a key path."""

    def __init__(self, path: Path, lines: dict[tuple, int], error: type[FileError] = MatrixError,
                 key: Callable[[tuple], str] = key_text) -> None:
        self.path, self.lines, self.make, self.key = path, lines, error, key

    def line(self, loc: tuple) -> int | None:
        for n in range(len(loc), -1, -1):
            if loc[:n] in self.lines:
                return self.lines[loc[:n]]
        return None

    def error(self, loc: tuple, problem: str, fix: str) -> FileError:
        return self.make(str(self.path), self.key(loc), " ".join(problem.split()), fix, self.line(loc))


def read(path: Path, error: type[FileError] = MatrixError) -> str:
    """The text of a data file, refused with `error` unless it is a regular file of at most MAX_BYTES
    of UTF-8 without control characters (a leading BOM is dropped). Opened without blocking, so a FIFO
    is refused instead of waited on; FileNotFoundError and other OSErrors are left to the caller."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        for test, kind in _FILE_KINDS:
            if test(mode):
                raise error(str(path), "", f"is {kind}, not a regular file.", "pass a YAML file.")
        chunks, size = [], 0
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_BYTES:
        raise error(str(path), "", f"is larger than {MAX_BYTES // 1024} KiB, far beyond any real one.",
                    "pass the right file (a matrix is a few KB of YAML, the packaged hints file about 260 KB).")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        utf16 = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise error(str(path), "", f"is not UTF-8 text{utf16}: byte 0x{data[exc.start]:02x} at line {line}, column "
                    f"{column} (byte offset {exc.start}) cannot be decoded.", "save the file as UTF-8.", line) from None
    text = text.removeprefix("\ufeff")
    bad = _CONTROL.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise error(str(path), "", f"contains the control character U+{ord(bad.group()):04X} at line {line}, column "
                    f"{column}; YAML allows none.", "remove it (a YAML file is plain text).", line)
    return text


def parse(text: str, path: Path, error: type[FileError] = MatrixError) -> tuple[Any, dict[tuple, int]]:
    """The document and the line of every key path; a syntax error or a broken limit is `error` with its line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check_graph(node)
        lines = node_lines(node)
        return loader.construct_document(node), lines
    except _Refused as exc:
        raise error(str(path), "", exc.problem, exc.fix, exc.line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise error(str(path), "", f"is not valid YAML ({problem}).", "correct the YAML syntax.", line) from None
    finally:
        loader.dispose()


def _loc(error: Mapping[str, Any]) -> tuple:
    """The key path of a pydantic error, without the union member names pydantic appends."""
    loc = tuple(error["loc"])
    while loc and loc[-1] in ("str", "int", "float"):
        loc = loc[:-1]
    return loc


def _unwrap(annotation: Any) -> Any:
    """The type inside Annotated[...] and X | None; of other unions, the pydantic model member if any."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [_unwrap(a) for a in typing.get_args(annotation) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        return members[0] if len(members) == 1 else (models[0] if models else annotation)
    return annotation


def known_keys(root: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the model allows at the mapping that holds loc[-1]; [] when that is not a model."""
    model: Any = root
    for part in loc[:-1]:
        model = _unwrap(model)
        if isinstance(model, type) and issubclass(model, BaseModel):
            model = model.model_fields[part].annotation if part in model.model_fields else None
        elif typing.get_origin(model) in (list, dict, tuple):
            model = typing.get_args(model)[0 if typing.get_origin(model) is tuple else -1]
        if model is None:
            return []
    model = _unwrap(model)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def translate(exc: ValidationError, ctx: Ctx, root: type[BaseModel], doc: str,
              special: Callable[[Mapping[str, Any], tuple], tuple[str, str] | None] | None = None) -> FileError:
    """The first problem (by line) of a ValidationError as one error naming file:line, key and fix.

    `doc` says where the format is described ("the matrix.yaml format in README.md"); `special` may
    word an error itself (problem, fix). A validator may raise PydanticCustomError whose context
    holds `fix`: its message is the problem and that is the fix."""
    errors = sorted(exc.errors(), key=lambda e: ctx.line(_loc(e)) or 0)
    first = errors[0]
    loc, kind = _loc(first), first["type"]
    worded = special(first, loc) if special else None
    if worded:
        problem, fix = worded
    elif "fix" in (first.get("ctx") or {}):
        problem, fix = first["msg"], first["ctx"]["fix"]
    elif kind == "extra_forbidden":
        known = known_keys(root, loc)
        hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
        fix = f"did you mean `{hint[0]}`? " if hint else ""
        fix += f"Known keys here: {', '.join(known)}." if known else "remove it."
        problem = f"unknown key `{plain(loc[-1])}`."
    elif kind == "missing":
        problem, fix = "is required but missing.", f"add `{plain(loc[-1])}:` (see {doc})."
    elif kind == "literal_error":
        problem = f"{short(first['input'])} is not allowed ({first['msg']})."
        fix = "use one of the values listed."
    else:
        problem = f"{first['msg']} (got {short(first.get('input'))})."
        fix = f"correct the value (see {doc})."
    if len(errors) > 1:
        fix += f" ({len(errors) - 1} more problem(s) after this one.)"
    return ctx.error(loc, problem, fix)
