"""The NCCL-only control (harness/workload/control.py) on this host's GPUs, one rank per GPU, started the
way torchrun starts ranks (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT in each rank's
environment) but by this script, so nothing here imports torch. Prints which libnccl each rank loaded and
the busbw per size (max-over-ranks time, median of the trials, as the workload's sweep reports it).

    /opt/torch/.venv/bin/python bench/nccl_control.py --gpus 0,1 --out OUT [--sizes 1M,64M,1G]
        [--iters 20 --warmup 5 --trials 5] [--env NCCL_P2P_DISABLE=1 ...] [--timeout 300]

Run it with the Python whose site-packages hold the NCCL to test (torch's wheel copy under
nvidia/nccl/lib); `--env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libnccl.so.2` tests the system one instead.
Exit 0 when every rank passed with no wrong data, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTROL = REPO / "harness" / "workload" / "control.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _events(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _size(nbytes: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def _gbs(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def run(args: argparse.Namespace) -> int:
    gpus = [g for g in args.gpus.split(",") if g.strip()]
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)  # a fresh folder: the unique-id file of an earlier run must not be read
    out.mkdir(parents=True)
    port = str(_free_port())
    extra = dict(item.split("=", 1) for item in args.env)
    control_args = ["--out", str(out), "--sizes", args.sizes, "--iters", str(args.iters), "--warmup",
                    str(args.warmup), "--trials", str(args.trials)]
    procs = []
    for rank in range(len(gpus)):
        env = {**os.environ, **extra, "RANK": str(rank), "WORLD_SIZE": str(len(gpus)), "LOCAL_RANK": str(rank),
               "LOCAL_WORLD_SIZE": str(len(gpus)), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
               "CUDA_VISIBLE_DEVICES": ",".join(gpus), "PYTHONUNBUFFERED": "1"}
        log = open(out / f"rank{rank}.out", "w")
        procs.append(subprocess.Popen([args.python, str(CONTROL), *control_args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))
    started = time.monotonic()
    while any(p.poll() is None for p in procs) and time.monotonic() - started < args.timeout:
        time.sleep(0.2)
    timed_out = [r for r, p in enumerate(procs) if p.poll() is None]
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    seconds = time.monotonic() - started

    ranks = {r: _events(out / f"events-rank{r}.jsonl") for r in range(len(gpus))}
    ok = not timed_out
    for rank, events in ranks.items():
        ends = {e.get("phase"): e for e in events if e.get("event") == "phase_end"}
        load = ends.get("nccl-load", {})
        nccl, cudart = load.get("nccl", {}), load.get("cudart", {})
        last = events[-1] if events else {}
        print(f"rank {rank}: NCCL {nccl.get('version', '?')} {nccl.get('path', '?')}; cudart "
              f"{cudart.get('runtime_version', '?')} {cudart.get('path', '?')}; "
              f"{'exit ' + str(procs[rank].returncode) if rank not in timed_out else 'TIMED OUT'}; "
              f"last event {last.get('event')} {last.get('phase') or last.get('status') or ''}")
        for error in (e for e in events if e.get("event") == "error"):
            ok = False
            print(f"  error in {error.get('phase')} [{error.get('error_class')}]: {error.get('message')}")
        if not events or last.get("event") != "result" or last.get("status") != "ok":
            ok = False
            tail = (out / f"rank{rank}.out").read_text()[-1500:]
            print(f"  rank output (tail):\n{tail}")
    rows = next((e.get("rows") for e in ranks.get(0, []) if e.get("phase") == "nccl-allreduce"
                 and e.get("event") == "phase_end"), None) or []
    init = next((e for e in ranks.get(0, []) if e.get("phase") == "nccl-init" and e.get("event") == "phase_end"), {})
    print(f"\n{len(gpus)} ranks on GPUs {','.join(gpus)}, comm init {init.get('comm_init_s', 0):.2f}s, "
          f"whole run {seconds:.1f}s")
    print(f"{'size':>6} {'busbw GB/s':>11} {'(min-max)':>14} {'algbw GB/s':>11} {'time us':>10} "
          f"{'first call ms':>14} {'wrong':>6}")
    for row in rows:
        spread = f"{_gbs(row.get('busbw_min'))}-{_gbs(row.get('busbw_max'))}"
        print(f"{_size(row['bytes']):>6} {_gbs(row.get('busbw_gbs')):>11} {spread:>14} "
              f"{_gbs(row.get('algbw_gbs')):>11} {row['time_s'] * 1e6:>10.1f} {row['first_call_s'] * 1e3:>14.1f} "
              f"{row.get('wrong'):>6}")
        ok = ok and not row.get("wrong")
    print(f"\nevents and rank output in {out}")
    print("CONTROL PASSED" if ok and rows else "CONTROL FAILED")
    return 0 if ok and rows else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", required=True, help="comma-separated device ids, one rank each, e.g. 0,1")
    p.add_argument("--out", required=True, help="output folder (emptied first)")
    p.add_argument("--sizes", default="1M,64M,1G")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for every rank (repeatable), e.g. NCCL_P2P_DISABLE=1")
    p.add_argument("--python", default=sys.executable, help="the Python the ranks run (default: this one)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before the ranks are killed")
    args = p.parse_args()
    if any("=" not in item for item in args.env):
        p.error("--env takes NAME=VALUE")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
