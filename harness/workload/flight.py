"""torch's flight recorder in the rank: which collective this rank entered and completed last (issue 24).

torch keeps a ring of the last collectives of every process group when its buffer size is set before
the group is made: ``TORCH_FR_BUFFER_SIZE`` where torch has ``_dump_fr_trace`` (torch 2.11 calls the
older ``TORCH_NCCL_TRACE_BUFFER_SIZE`` deprecated; seen on the H200), the older name before that. Seen
here on torch 2.13 (CPU, gloo): entries carry ``profiling_name`` (``gloo:all_reduce``),
``collective_seq_id``, ``state`` (gloo's stay ``scheduled``; NCCL's become ``started`` and
``completed``), ``input_sizes``, ``pg_id``; a dump taken from another thread answers while the main
thread waits inside a collective.

The supervisor asks at its stall verdict: it creates ``flight-request`` in the attempt folder, and this
rank's server thread writes ``flight-rank<R>.json`` there (JSON, never a pickle: the host reads it). A
rank that is stopped or gone cannot answer; the supervisor says so. Stdlib and torch only.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, List, MutableMapping, Optional

BUFFER_ENTRIES = "256"  # the last 256 collectives of each group: a cell runs a few hundred in all
KEPT = 24  # entries written per rank, the newest; enough to show where each rank is
REQUEST = "flight-request"
POLL_S = 0.1


def _c10d() -> Any:
    import torch

    return getattr(getattr(torch, "_C", None), "_distributed_c10d", None)


def _dumpers() -> List[Any]:
    """The recorder's dump functions in this torch: NCCL's (``_dump_nccl_trace``, where torch was built
    with NCCL) and the generic one (``_dump_fr_trace``, gloo's too). Seen on the H200 (torch 2.11, one
    NCCL rank): the NCCL collectives are in the first; on torch 2.13 CPU only the second exists."""
    c10d = _c10d()
    return [getattr(c10d, name) for name in ("_dump_nccl_trace", "_dump_fr_trace") if c10d is not None and hasattr(c10d, name)]


def buffer_var() -> Optional[str]:
    """The variable that turns the recorder on in this torch; None where it has none."""
    c10d = _c10d()
    if c10d is None:
        return None
    if hasattr(c10d, "_dump_fr_trace"):
        return "TORCH_FR_BUFFER_SIZE"
    if hasattr(c10d, "_dump_nccl_trace"):
        return "TORCH_NCCL_TRACE_BUFFER_SIZE"
    return None


def wanted(environ: MutableMapping[str, str]) -> Dict[str, str]:
    """The variable to set before init (none where the user already set either name, or torch has no
    recorder)."""
    var = buffer_var()
    if var is None or "TORCH_FR_BUFFER_SIZE" in environ or "TORCH_NCCL_TRACE_BUFFER_SIZE" in environ:
        return {}
    return {var: BUFFER_ENTRIES}


def _sizes(value: Any) -> List[List[int]]:
    try:
        return [[int(d) for d in shape] for shape in value or []]
    except (TypeError, ValueError):
        return []


def _entry(raw: Dict[str, Any]) -> Dict[str, Any]:
    group = raw.get("process_group")
    name = group[1] if isinstance(group, (list, tuple)) and len(group) > 1 else raw.get("pg_id")
    return {"op": str(raw.get("profiling_name") or "?"),
            "seq": int(raw.get("collective_seq_id") or 0),
            "p2p_seq": int(raw.get("p2p_seq_id") or 0),
            "group": str(name if name is not None else "?"),
            "state": str(raw.get("state") or "?"),
            "input_sizes": _sizes(raw.get("input_sizes")),
            "output_sizes": _sizes(raw.get("output_sizes"))}


def dump() -> Dict[str, Any]:
    """What the recorder holds now, the newest entries, as JSON-ready values."""
    import pickle

    import torch

    found = _dumpers()
    if not found:
        return {"torch": torch.__version__, "unavailable": "torch %s has no flight recorder" % torch.__version__}
    entries: List[Dict[str, Any]] = []
    seen = set()
    version, errors = "", []
    for fn in found:
        try:
            data = pickle.loads(fn())  # torch's own bytes, from this process
        except Exception as exc:  # noqa: BLE001 - a dump that fails is a fact to report
            errors.append("%s: %s" % (type(exc).__name__, exc))
            continue
        version = version or str(data.get("version", ""))
        for raw in data.get("entries") or []:
            entry = _entry(raw) if isinstance(raw, dict) else None
            key = entry and (entry["group"], entry["seq"], entry["p2p_seq"], entry["op"])
            if entry and key not in seen:
                seen.add(key)
                entries.append(entry)
    if errors and not entries:
        return {"torch": torch.__version__, "unavailable": "the dump failed: %s" % "; ".join(errors)}
    entries.sort(key=lambda e: (e["group"], e["seq"]))
    return {"torch": torch.__version__, "version": version, "entries": entries[-KEPT:], "total": len(entries)}


def _write(path: str, data: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def serve(out_dir: str, rank: int) -> threading.Thread:
    """A daemon thread answering the supervisor's request: ``flight-rank<R>.json`` once per request."""
    request = os.path.join(out_dir, REQUEST)
    answer = os.path.join(out_dir, "flight-rank%d.json" % rank)

    def loop() -> None:
        served = 0.0
        while True:
            time.sleep(POLL_S)
            try:
                asked = os.stat(request).st_mtime
            except OSError:
                continue
            if asked <= served:
                continue
            served = asked
            try:
                _write(answer, dict(dump(), rank=rank, at=time.time()))
            except Exception:  # noqa: BLE001 - the forensics of a hang must never end the rank
                pass

    thread = threading.Thread(target=loop, name="harness-flight", daemon=True)
    thread.start()
    return thread
