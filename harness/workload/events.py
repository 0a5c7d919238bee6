"""Durable JSON-lines events: the contract between a rank and the host supervisor.

Each line goes out in one ``write()`` on an ``O_APPEND`` descriptor and is fsync'd at once, so the
host can tell how far a rank got even after SIGKILL, and a line is never half-mixed with another.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from typing import Any, Dict, Optional

SCHEMA_VERSION = 1


def _clean(value: Any) -> Any:
    """Replace non-finite floats (not valid JSON) with None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def encode_line(record: Dict[str, Any]) -> bytes:
    """One event as one newline-terminated UTF-8 JSON line (unknown objects become strings)."""
    text = json.dumps(_clean(record), default=str, allow_nan=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


class EventWriter:
    """Thread-safe appender of events to ``events-rank<R>.jsonl``."""

    def __init__(self, path: str, rank: int, world: int) -> None:
        self.path = path
        self.rank = rank
        self.world = world
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, event: str, **fields: Any) -> Dict[str, Any]:
        """Write one event now (durably) and return the record written."""
        record: Dict[str, Any] = {
            "v": SCHEMA_VERSION,
            "event": event,
            "rank": self.rank,
            "world": self.world,
            "wall": time.time(),
            "mono": time.monotonic(),
            "pid": os.getpid(),
        }
        record.update(fields)
        data = encode_line(record)
        with self._lock:
            if self._fd < 0:
                return record
            written = os.write(self._fd, data)
            while written < len(data):  # a regular file rarely writes short; never lose the tail
                written += os.write(self._fd, data[written:])
            os.fsync(self._fd)
        return record

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class Heartbeat:
    """Daemon thread that writes a heartbeat every ``interval`` s while a phase is set.

    It only ever takes the writer's lock for one write, so it cannot block the main thread for
    longer than an fsync; heartbeats that keep coming while a phase never ends mean "alive but
    stuck", which is what the supervisor needs to call a hang.
    """

    def __init__(self, writer: EventWriter, interval: float) -> None:
        self._writer = writer
        self._interval = max(0.05, float(interval))
        self._stop = threading.Event()
        self._phase: Optional[str] = None
        self._thread = threading.Thread(target=self._loop, name="harness-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def set_phase(self, phase: Optional[str]) -> None:
        self._phase = phase

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            phase = self._phase
            if phase is None:
                continue
            try:
                self._writer.emit("heartbeat", phase=phase, source="thread")
            except OSError:
                return  # the output folder went away: nothing useful left to do
