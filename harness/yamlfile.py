"""The YAML data files of the harness (matrix.yaml, hints.yaml): read with the line of every key and
with floats that remember how they were written, validated by strict pydantic models, and every
problem turned into one paragraph, `file:line at `key`: problem Fix: ...` (exit 2, no traceback).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import FileError, MatrixError

__all__ = ["Ctx", "Float", "Strict", "key_text", "known_keys", "node_lines", "parse", "translate"]


class Strict(BaseModel):
    """Unknown keys are refused (a typo fails loudly), values are immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Float(float):
    """A YAML float that remembers how it was written, so '12.10' can be quoted back to the user."""

    text: str


class _Loader(yaml.SafeLoader):
    pass


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Float:
    value = Float(yaml.SafeLoader.construct_yaml_float(loader, node))
    value.text = node.value
    return value


_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def node_lines(node: yaml.Node | None, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """The 1-based line of every key path (a key's own line for a mapping entry)."""
    out = {} if out is None else out
    if node is None:
        return out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            node_lines(value, path + (key.value,), out)
            out[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            node_lines(item, path + (i,), out)
    return out


def key_text(path: tuple) -> str:
    """('stacks', 'matrix', 'cuda', 0) -> 'stacks.matrix.cuda[0]'."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


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
        return self.make(str(self.path), self.key(loc), problem, fix, self.line(loc))


def parse(text: str, path: Path, error: type[FileError] = MatrixError) -> tuple[Any, dict[tuple, int]]:
    """The document and the line of every key path; a syntax error is `error` with its line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        raw = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(str(path), "", f"is not valid YAML ({problem}).", "correct the YAML syntax.", line) from None
    finally:
        loader.dispose()
    return raw, node_lines(node)


def _loc(error: dict) -> tuple:
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
              special: Callable[[dict, tuple], tuple[str, str] | None] | None = None) -> FileError:
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
        problem = f"unknown key `{loc[-1]}`."
    elif kind == "missing":
        problem, fix = "is required but missing.", f"add `{loc[-1]}:` (see {doc})."
    elif kind == "literal_error":
        problem = f"{first['input']!r} is not allowed ({first['msg']})."
        fix = "use one of the values listed."
    else:
        problem = f"{first['msg']} (got {first.get('input')!r})."
        fix = f"correct the value (see {doc})."
    if len(errors) > 1:
        fix += f" ({len(errors) - 1} more problem(s) after this one.)"
    return ctx.error(loc, problem, fix)
