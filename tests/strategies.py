"""Hypothesis strategies for the harness's typed values, made from their declarations (harness/codec.py):
every field's type and its codec.Domain (bounds, closed sets) say what a value may hold, so a generated
value is one the harness could write. Used by tests/test_codec.py's round trips."""

from __future__ import annotations

import math
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st
from pydantic import ValidationError

from harness.codec import Domain, Model

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 40), 1 << 40) | _TEXT
                     | st.floats(allow_nan=False, allow_infinity=False),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6)


def _domain(domain: Domain) -> st.SearchStrategy[Any]:
    if domain.kind in ("str", "text"):
        return _TEXT
    if domain.kind == "int":
        return st.integers(max(int(domain.low), -(1 << 62)) if domain.low > -math.inf else -(1 << 62),
                           min(int(domain.high), 1 << 62) if domain.high < math.inf else 1 << 62)
    if domain.kind == "num":
        low = domain.low if domain.low > -math.inf else -1e12
        high = domain.high if domain.high < math.inf else 1e12
        return st.floats(low, high, allow_nan=False, allow_infinity=False) | st.integers(
            math.ceil(low), math.floor(high))
    if domain.kind == "flag":
        return st.booleans()
    if domain.kind == "one-of":
        return st.sampled_from(domain.values)
    if domain.kind == "limit":
        return st.just("unlimited") | st.integers(0, 1 << 50)
    if domain.kind == "verified":
        return st.booleans() | _TEXT
    return _JSON


def of_type(hint: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of a declared type (its Domain where it has one)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        domain = next((a for a in args[1:] if isinstance(a, Domain)), None)
        return _domain(domain) if domain is not None else of_type(args[0], depth)
    if origin in (Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else of_type(a, depth) for a in args))
    if origin is tuple:
        return st.lists(of_type(args[0], depth + 1), max_size=0 if depth > 2 else 3).map(tuple)
    if origin is dict:
        keys = st.integers(0, 64) if args[0] is int else _TEXT
        return st.dictionaries(keys, of_type(args[1], depth + 1), max_size=0 if depth > 2 else 3)
    if origin is Literal:
        return st.sampled_from(args)
    if isinstance(hint, type) and issubclass(hint, Model):
        return values(hint, depth + 1)
    if hint is Any:
        return _JSON
    return st.from_type(hint)


def values(model: type[Model], depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of `model`, each field set or left to its default, every value within its declaration."""
    hints = typing.get_type_hints(model, include_extras=True)

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        kwargs = {}
        for name, info in model.model_fields.items():
            if info.is_required() or draw(st.booleans()):
                kwargs[name] = draw(of_type(hints[name], depth))
        try:
            return model(**kwargs)
        except ValidationError:  # a value across fields out of its rule (a median outside its trials)
            from hypothesis import assume
            assume(False)
            raise

    return build()
