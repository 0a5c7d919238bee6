"""Outcomes are values: a status, a reason, a duration; they serialise to JSON and say nothing of how
they were produced."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("pass", "wrong", "hang", "fail", "slow", "build-error", "infra-error", "n/a", "interrupted")


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str = ""
    seconds: float = 0.0
    phase: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
