"""The one codec between the harness's typed values and JSON: every record, rank state, stall, NCCL
summary and run fact is a frozen `Model` whose fields declare their JSON types and bounds once. From
that one declaration come the writer (`Model.to_json`), the strict reader of what the harness wrote
(`Model.read`: a value of the wrong type or out of its bounds is a RecordError naming where, the way
results.load_run reports a corrupt record) and the tolerant reader of what a rank, an image or an older
harness wrote (`Model.tolerant`: every part that does not fit its declaration is left out and said in
`problems`, the rest is kept). So whatever the harness writes it reads back, and what a broken system
under test writes can cost a fact, never the record.

Scalars are declared with the markers below (`Str`, `Text`, `Int`, `Num`, `Flag`, `one_of`, ...): JSON
has no tuples, no int/float distinction worth trusting and no NaN, and pydantic's own coercions (a
"3" read as 3, true as 1) are what a reader of evidence must not do. Containers and nested models are
pydantic's. There are no unions but `X | None`: a fact has one shape, and its absence is None.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError, core_schema


class RecordError(ValueError):
    """JSON that does not have the shape its declaration says."""


# ---------------------------------------------------------------- scalars: one marker per JSON type
@dataclass(frozen=True)
class Domain:
    """What a scalar may hold, for the validator and for tests that generate values (tests/strategies.py)."""

    kind: str  # "str", "text", "int", "num", "flag", "one-of", "json", "limit", "verified"
    low: float = -math.inf
    high: float = math.inf
    values: tuple[str, ...] = ()

    @property
    def should(self) -> str:
        if self.kind == "int":
            low = int(self.low) if self.low > -math.inf else -(1 << 63)
            high = int(self.high) if self.high < math.inf else 1 << 63
            return f"an integer from {low} to {high}"
        if self.kind == "num":
            return f"a number from {self.low:g} to {self.high:g}"
        return {"str": "a string", "text": "a string", "flag": "true or false", "json": "a JSON value",
                "limit": "an integer or \"unlimited\"", "verified": "true, false or a string",
                "one-of": f"one of {', '.join(self.values)}"}[self.kind]

    def ok(self, value: Any) -> bool:
        if self.kind in ("str", "text"):
            return isinstance(value, str)
        if self.kind == "int":
            return type(value) is int and self.low <= value <= self.high
        if self.kind == "num":
            return type(value) in (int, float) and math.isfinite(value) and self.low <= value <= self.high
        if self.kind == "flag":
            return isinstance(value, bool)
        if self.kind == "one-of":
            return value in self.values
        if self.kind == "limit":
            return value == "unlimited" or (type(value) is int and value >= 0)
        if self.kind == "verified":
            return isinstance(value, (bool, str))
        return _is_json(value)

    def check(self, value: Any) -> Any:
        if not self.ok(value):
            if self.kind == "one-of" and isinstance(value, str):
                raise PydanticCustomError("domain", "{value} is not one of {values}",
                                          {"value": repr(value), "values": ", ".join(self.values)})
            raise PydanticCustomError("domain", "should be {should}", {"should": self.should})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.check, serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v))


def _is_json(value: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


Str = Annotated[str, Domain("str")]  # a string
Text = Annotated[str, Domain("text")]  # a string of free text (messages, logs, values)
Flag = Annotated[bool, Domain("flag")]
Json = Annotated[Any, Domain("json")]  # any JSON value, kept as written (never read by the harness)
Limit = Annotated["int | str", Domain("limit")]  # a resource limit: bytes, or "unlimited"
Verified = Annotated["bool | str", Domain("verified")]  # a check's answer: True/False, or "timeout"...


def ints(low: int = -(1 << 63), high: int = 1 << 63) -> Domain:
    """An integer from `low` to `high`: `Annotated[int, ints(0, 10)]`."""
    return Domain("int", low, high)


def nums(high: float = math.inf, low: float = 0.0) -> Domain:
    """A finite number, 0 or more unless `low` says otherwise, kept as written: `Annotated[float, nums(1e6)]`."""
    return Domain("num", low, high)


def one_of(values: tuple[str, ...]) -> Domain:
    """A string of one of the closed sets of kinds.py: `Annotated[Status, one_of(STATUSES)]`."""
    return Domain("one-of", values=tuple(values))


Count = Annotated[int, ints(0)]
Seconds = Annotated[float, nums()]


# ---------------------------------------------------------------- models
M = TypeVar("M", bound="Model")


class Model(BaseModel):
    """A frozen value with one JSON layout. Fields are written in their declared order; `OMIT_DEFAULT`
    names fields left out while they hold their default (so records without them read and write back
    unchanged); `WRITTEN_ONLY` models (what a rank wrote) keep exactly the keys that were set."""

    model_config = ConfigDict(frozen=True, extra="ignore", validate_default=False, serialize_by_alias=True,
                              validate_by_name=True, validate_by_alias=True)
    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset()
    NULL_IS_DEFAULT: ClassVar[frozenset[str]] = frozenset()  # fields an older record wrote as null: read as default
    WRITTEN_ONLY: ClassVar[bool] = False
    POSITIONAL: ClassVar[tuple[str, ...]] = ()  # the fields positional arguments fill, when not the declared order

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: Any) -> Any:
        if cls.NULL_IS_DEFAULT and isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None or k not in cls.NULL_IS_DEFAULT}
        return data

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Positional arguments in the fields' order, as a dataclass takes them."""
        if args:
            names = list(type(self).POSITIONAL or type(self).model_fields)
            if len(args) > len(names):
                raise TypeError(f"{type(self).__name__} takes {len(names)} fields, {len(args)} given")
            kwargs = dict(zip(names, args)) | kwargs
        super().__init__(**kwargs)

    @model_serializer(mode="wrap")
    def _layout(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        fields = type(self).model_fields
        if self.WRITTEN_ONLY:
            declared = {f.alias or n: n for n, f in fields.items()}
            return {k: v for k, v in data.items() if k not in declared or declared[k] in self.model_fields_set}
        for name in self.OMIT_DEFAULT:
            if getattr(self, name) == fields[name].default:
                data.pop(fields[name].alias or name, None)
        return data

    def replace(self: M, **changes: Any) -> M:
        """A copy with `changes` (validated, as a new value is; the keys a rank wrote stay the ones set)."""
        names = self.model_fields_set if self.WRITTEN_ONLY else type(self).model_fields
        return type(self).model_validate({**{n: getattr(self, n) for n in names}, **(self.model_extra or {}),
                                          **changes})

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this value (plain dicts, lists, strings and numbers)."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data

    @classmethod
    def read(cls: type[M], data: Any, where: str = "") -> M:
        """Strict: the value `data` holds; RecordError naming the first part that does not fit."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise RecordError(f"{where or 'the record'} should be an object, not {shown(data)}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RecordError(explain(exc, where)) from None

    @classmethod
    def tolerant(cls: type[M], data: Any, problems: list[str] | None = None, where: str = "") -> M:
        """Lenient: the value `data` holds with every part that does not fit left out (each said in
        `problems`); for what a rank, an image or an older harness wrote. Never raises."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            if problems is not None and data is not None:
                problems.append(f"{where or 'the record'} should be an object, not {shown(data)}")
            return cls()
        try:
            return cls.model_validate(data)  # what fits, as it is (no copy)
        except ValidationError:
            data = copy.deepcopy(dict(data))  # the parts left out are removed from a copy, never the caller's
        for _ in range(200):  # each round leaves out at least one part; a record has far fewer bad parts
            try:
                return cls.model_validate(data)
            except ValidationError as exc:
                errors = exc.errors(include_url=False)
                if problems is not None:
                    problems.extend(explain_one(e, where) for e in errors)
                dropped = [_drop(data, tuple(e["loc"]), e["type"] == "model_type")  # every one, last first
                           for e in sorted(errors, key=lambda e: _order(e["loc"]), reverse=True)]
                if not any(dropped):
                    break
        return cls()


def _order(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((1, p) if isinstance(p, int) else (0, str(p)) for p in loc)


def _drop(data: Any, loc: tuple[Any, ...], emptied: bool = False) -> bool:
    """Remove the part at `loc` (a list item, or a key: `emptied`, an object of the wrong type that is a
    value of a mapping, becomes an empty object, so that a rank whose state is garbage is still a rank);
    False when nothing could be removed."""
    loc = tuple(p for p in loc if p != "[key]")
    parent = data
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    if not loc:
        return False
    last = loc[-1]
    try:
        if isinstance(parent, list) and isinstance(last, int):
            del parent[last]
        elif isinstance(parent, dict) and last in parent:
            if emptied and parent[last] != {} and _is_mapping_entry(loc):
                parent[last] = {}
            else:
                del parent[last]
        elif isinstance(parent, dict) and isinstance(last, int) and str(last) in parent:
            del parent[str(last)]
        else:
            return _drop(data, loc[:-1]) if len(loc) > 1 else False
    except (IndexError, TypeError):
        return False
    return True


def _is_mapping_entry(loc: tuple[Any, ...]) -> bool:
    """The part is a value in a mapping of the model (ranks.0), not a field of a model (ranks.0.error): its
    key is a digit string, which no field name is."""
    return isinstance(loc[-1], str) and loc[-1].isdigit()


# ---------------------------------------------------------------- error texts
def shown(value: Any) -> str:
    """A value in an error message: its JSON type and its JSON text, cut short."""
    kind = {dict: "object", list: "list", tuple: "list", str: "string", bool: "boolean",
            type(None): "null"}.get(type(value), "number")
    return f"{kind} {json.dumps(value, default=str)[:60]}"


def at(where: str, key: str) -> str:
    return f"{where}.{key}" if where and key else where or key


def path(where: str, loc: tuple[Any, ...]) -> str:
    out = where
    for part in loc:
        if part == "[key]":
            continue
        out = f"{out}[{part}]" if isinstance(part, int) else at(out, str(part))
    return out or "the record"


_SHOULD = {"dict_type": "an object", "model_type": "an object", "model_attributes_type": "an object",
           "list_type": "a list", "tuple_type": "a list", "missing": None}


def explain_one(error: Mapping[str, Any], where: str) -> str:
    loc = tuple(error["loc"])
    here = path(where, loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return f"{here} is missing"
    if kind == "domain" and "is not one of" in error["msg"]:
        return f"{here} {error['msg']}"
    if kind == "domain" or kind == "value_error" or kind == "invariant":
        text = error["msg"].removeprefix("Value error, ")
        return f"{here} {text}, not {shown(value)}" if text.startswith("should") else f"{here}: {text}"
    should = _SHOULD.get(kind)
    return f"{here} should be {should}, not {shown(value)}" if should else f"{here}: {error['msg']}"


def explain(exc: ValidationError, where: str) -> str:
    """The first error, as `where.key should be X, not Y`."""
    return explain_one(exc.errors(include_url=False)[0], where)  # in reading order


def invariant(text: str) -> PydanticCustomError:
    """An error of a whole value (a median outside its trials), raised by a model's own check."""
    return PydanticCustomError("invariant", text)
