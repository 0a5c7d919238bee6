"""The IPC peer check of a cell's check phase (harness/workload/p2pipc.py, issue 24 item 4) on real GPUs,
outside a cell: N processes, each on its GPU, publish their buffers' CUDA IPC handles in a TCPStore on
loopback and read each other's with the check's kernel, exactly as the ranks of a cell do through their
process group's store. Needs only torch (the workload's own imports).

    python bench/p2p_ipc.py --gpus 0 --procs 2 --out OUT     # one GPU: two processes share it
    python bench/p2p_ipc.py --gpus 0,1 --out OUT             # a real pair (issue 27)

With one GPU the two processes read each other's buffer on the same GPU (--same-gpu is implied): no peer
mapping then, but the CUDA IPC handle between processes, the driver-compiled kernel and the exact check
run for real. Scenarios, each --trials times (a fresh store prefix each):
- `pairs`: every process publishes and reads; every row must be `true` with 0 wrong.
- `absent`: one process never publishes (a rank that never reaches the check): the others' wait ends
  within --store-timeout with the store's error, as a cell's check records it.
OUT/p2p-ipc.json: every row, per pair the median read time with its min-max, and the scenarios' verdicts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _proc(rank: int, world: int, ordinal: int, port: int, prefix: str, same_gpu: bool, store_timeout: float,
          absent: int, out: mp.Queue) -> None:
    import torch
    import torch.distributed as dist

    from harness.workload import p2pipc

    torch.cuda.set_device(ordinal)
    torch.zeros(1, device="cuda:%d" % ordinal)  # the primary context, as the rank's init made it
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=store_timeout + 30))
    store = dist.PrefixStore(prefix, client)
    if rank == absent:
        out.put({"rank": rank, "absent": True})
        return
    t0 = time.monotonic()
    try:
        got = p2pipc.exchange(rank, world, ordinal, store, store_timeout_s=store_timeout, same_gpu=same_gpu)
        out.put({"rank": rank, "got": got, "seconds": time.monotonic() - t0})
    except Exception as exc:  # noqa: BLE001 - what a cell's check would record
        out.put({"rank": rank, "error": "%s: %s" % (type(exc).__name__, str(exc)[:300]),
                 "seconds": time.monotonic() - t0})


def scenario(gpus: list[int], procs: int, port: int, prefix: str, same_gpu: bool, store_timeout: float,
             absent: int = -1) -> list[dict]:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    ps = [ctx.Process(target=_proc, args=(r, procs, gpus[r % len(gpus)], port, prefix, same_gpu, store_timeout,
                                          absent, out)) for r in range(procs)]
    for p in ps:
        p.start()
    results = [out.get(timeout=store_timeout + 120) for _ in ps]
    for p in ps:
        p.join(30)
    return sorted(results, key=lambda r: r["rank"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0", help="GPU ordinals, comma-separated; process r uses gpus[r %% len]")
    ap.add_argument("--procs", type=int, default=0, help="processes (default: one per GPU, 2 on one GPU)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--store-timeout", type=float, default=5.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch.distributed as dist

    gpus = [int(g) for g in args.gpus.split(",")]
    procs = args.procs or max(2, len(gpus))
    same_gpu = len(set(gpus)) < procs
    args.out.mkdir(parents=True, exist_ok=True)
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    summary: dict = {"gpus": gpus, "procs": procs, "same_gpu": same_gpu, "trials": args.trials, "pairs": [],
                     "absent": []}
    for t in range(args.trials):
        summary["pairs"].append(scenario(gpus, procs, master.port, "pairs%d" % t, same_gpu, args.store_timeout))
    for t in range(min(2, args.trials)):
        summary["absent"].append(scenario(gpus, procs, master.port, "absent%d" % t, same_gpu, args.store_timeout,
                                          absent=procs - 1))
    rows = [row for trial in summary["pairs"] for r in trial for row in (r.get("got") or {}).get("pairs", [])
            if r["rank"] == 0]
    times: dict[str, list[float]] = {}
    for row in rows:
        times.setdefault("%s->%s" % (row["owner"], row["reader"]), []).append(row.get("seconds") or 0.0)
    ok = bool(rows) and all(row["result"] is True and row.get("wrong") == 0 for row in rows) \
        and len(rows) == args.trials * procs * (procs - 1)
    waited = [r for trial in summary["absent"] for r in trial if not r.get("absent")]
    absent_ok = bool(waited) and all("error" in r and r["seconds"] < args.store_timeout + 10 for r in waited)
    summary["verdict"] = {"pairs_ok": ok, "rows": len(rows), "absent_ends_in_time": absent_ok,
                          "read_seconds": {k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                                           for k, v in times.items()}}
    (args.out / "p2p-ipc.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary["verdict"], indent=1))
    for trial in summary["absent"][:1]:
        for r in trial:
            print("absent scenario, rank %s: %s" % (r["rank"], r.get("error") or ("absent" if r.get("absent") else r)))
    return 0 if ok and absent_ok else 1


if __name__ == "__main__":
    sys.exit(main())
