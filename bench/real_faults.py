"""Real faults on real GPUs, end to end: the verdict line, the key line, the victims and the hints the
report gives for each. Made for the GPU machine (host engine, two or more GPUs); every figure and
record lands in --out.

    python bench/real_faults.py --gpus 0,1 --out OUT [--scenarios cli,sigstop,watchdog]

1. `bad-ifname`: NCCL_SOCKET_IFNAME=nosuchif0 with P2P and SHM off, so NCCL must bootstrap over a
   socket interface that does not exist: rank 0 raises in init; the launcher stops rank 1.
   Expected: fail, class nccl, phase init, key line "no socket interface found", rank 1 a victim,
   a hint naming NCCL_SOCKET_IFNAME. The NCCL-only control (same variables, run after the failure)
   fails the same way in nccl-init: layer nccl.
2. `default` with whatever the host's environment sets (the H200 machine sets NCCL_NVLS_ENABLE=0):
   a pass, the host's variables reported as inherited, not as the launcher's change; with
   `--control always` its NCCL-only control's busbw beside the cell's at the largest size (within 5%).
3. rank 1 stopped with SIGSTOP at the start of `prepare`, the matrix file's own thresholds: a hang in
   prepare naming rank 1, whatever torch's watchdog does. The NCCL-only control (no rank stopped)
   passes with a busbw near the cell's own: layer above-nccl.
4. the same with the process-group timeout forced back to the old 90 s (below the 120 s prepare
   threshold), so that torch's watchdog fires first: still a hang in prepare.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, cell_matrix, host_matrix, stop_rank  # common puts the repo on sys.path

from harness import hints, matrix, report, results, runner  # noqa: E402
from harness.engines import host  # noqa: E402
from harness.engines.host import HostEngine  # noqa: E402
from harness.progress import Progress  # noqa: E402
from harness.selection import check_gpus  # noqa: E402


# without GPUs the CPU matrix's stack: a smoke test (gloo ignores the NCCL variables)
BAD_IFNAME = """  variants:
    bad-ifname:
      env: {NCCL_SOCKET_IFNAME: nosuchif0, NCCL_P2P_DISABLE: "1", NCCL_SHM_DISABLE: "1"}
      description: bootstrap over a socket interface that does not exist
"""


def _hint_lines(record) -> list[str]:
    found = []
    for item in hints.match(record):
        hint = getattr(item, "hint", item)
        certain = getattr(item, "certain", True)
        found.append(f"{'' if certain else 'possibly: '}{hint.id}: {hint.title}"
                     + (f" -- fix: {hint.fix}" if getattr(hint, "fix", "") else ""))
    return found


def _show(name: str, record, summary: dict) -> None:
    """One scenario's verdict, key line, hints, and what NCCL alone did (its layer)."""
    out = record.outcome
    line = {"status": out.status, "phase": out.phase, "error_class": out.error_class, "reason": out.reason,
            "seconds": round(out.seconds, 1), "key_line": out.detail.get("key_line"),
            "victims": out.detail.get("victims"), "ranks_behind": out.detail.get("ranks_behind"),
            "watchdog": out.detail.get("watchdog"), "hints": _hint_lines(record),
            "nccl": record.nccl_label, "env_origins": {k: list(v) for k, v in record.env_origins().items()},
            "launcher_changed": {k: [c.expected, c.actual] for k, c in record.launcher_changes.items()},
            "control": {**record.control.__dict__, "busbw": record.control.busbw}, "layer": record.layer,
            "nccl_alone": report.control_text(record), "control_vs_cell": _control_ratio(record)}
    summary[name] = line
    print(f"\n== {name}: {out.status.upper()} {out.error_class or ''} in {out.phase} ({out.seconds:.0f}s)\n   {out.reason}",
          flush=True)
    for hint in line["hints"]:
        print(f"   hint: {hint}", flush=True)
    if line["nccl_alone"]:
        print(f"   NCCL alone: {line['nccl_alone']} [layer {record.layer}]", flush=True)
    if line["control_vs_cell"]:
        print(f"   control busbw / cell busbw at the largest size: {line['control_vs_cell']:.3f}", flush=True)


def _control_ratio(record) -> float | None:
    """The control's busbw over the cell's own at the control's largest size (the in-image reference)."""
    control = record.control.busbw
    own = record.busbw_at(control[0]) if control else None
    return control[1] / own[1] if control and own and own[0] == control[0] and own[1] else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0,1", help="GPU ids, or none for a smoke test with gloo ranks on the CPU")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scenarios", default="cli,sigstop,watchdog",
                    help="which to run: cli (1 and 2), sigstop (3), watchdog (4); each of 3 and 4 takes about 2.5 min")
    args = ap.parse_args()
    gpus = () if args.gpus == "none" else check_gpus(args.gpus)
    args.out.mkdir(parents=True, exist_ok=True)
    res = args.out / "results"
    summary: dict = {"gpus": list(gpus), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}

    chosen = set(args.scenarios.split(","))
    mfile = cell_matrix(args.out / "real-faults.yaml", bool(gpus), ["default", "bad-ifname"], define=BAD_IFNAME)
    if "cli" in chosen:
        _cli(mfile, gpus, res, args.out, summary)
    # 3 and 4: a stopped rank under the matrix file's own thresholds
    m = matrix.load(mfile)
    cell = next(c for c in host.host_cells(m, host.host_stack()) if c.variant.name == "default"
                and c.launcher == "accelerate")
    cases = [("sigstop-prepare", ())] if "sigstop" in chosen else []
    if "watchdog" in chosen:
        cases.append(("sigstop-prepare-old-group-timeout", ("--init-timeout", str(int(m.timeouts.init)))))
    for name, extra in cases:
        on_event, on_start = stop_rank(1, "prepare", res / name)
        opts = runner.RunOptions(name, res, gpus, 2, extra_args=("--hold-at", "prepare", *extra),
                                 extra_env=(("HARNESS_TEST_FAULTS", "1"),))
        record = runner.run_cell(HostEngine(), cell, m, opts, on_event=on_event, on_start=on_start)
        _show(name, record, summary)
    (args.out / "real-faults.json").write_text(json.dumps(summary, indent=1, default=str))
    Progress().say(f"summary: {args.out / 'real-faults.json'}")
    return 0


def _cli(mfile: Path, gpus: tuple[str, ...], res: Path, out: Path, summary: dict) -> None:
    """Scenarios 1 and 2, through the real command line."""
    cmd = host_matrix(mfile, res, "cli", ",".join(gpus), "--control", "always")
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    (out / "cli.log").write_text(done.stdout + done.stderr)
    summary["cli_exit"] = done.returncode
    data = results.load_run(res / "cli")
    for cell_id, record in sorted(data.records.items()):
        _show(cell_id, record, summary)


if __name__ == "__main__":
    sys.exit(main())
