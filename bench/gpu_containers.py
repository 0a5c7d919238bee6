"""GPU cells in containers, seen for real: a user's image as an `image:` stack on this machine's GPUs,
through whichever way the Docker engine gives containers GPUs (CDI or the NVIDIA runtime, probed). One
command, five checks, each with its figures in the JSON summary:

1. the matrix on the image: every cell passes, with the versions read inside the image, and the rank's
   own fingerprint (torch, NCCL as loaded) agreeing with them; run.json's GPU api;
2. `invoke doctor --gpus G`: which way works here;
3. a rank SIGSTOPped inside the container is a hang naming it, with forensics (bench/hang_latency.py);
4. a SIGKILLed harness leaves no container (its watchdog removes the cell's);
5. the `--dry-run` docker line, pasted into a shell, runs the same cell (its rank reaches the end).

    python3 bench/gpu_containers.py --image site/torch:h200 --gpus 0 --out DIR [--variants default,p2p-off,net-only]

Needs a running engine that can give containers GPUs, the image on it, and a docker CLI for step 5."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.engines.dockerclient import LABEL_RUN  # noqa: E402

MATRIX = """version: 1
description: the user's image on this machine's GPUs, in containers
stacks:
  include:
    - {{image: "{image}", name: {name}}}
variants: [{variants}]
bandwidth: {{sizes: ["8K", "1M", "256M", "2G"]}}
"""


def keep_host_nccl(variants: list[str]) -> str:
    """The variants redefined with the host's NCCL_NVLS_ENABLE, where it is set: a container does not
    inherit the host's environment, and the GPU machines must keep NVLink multicast off (FIELD-NOTES)."""
    from harness.matrix import BUILTIN_DESCRIPTIONS, BUILTIN_VARIANTS

    kept = {k: os.environ[k] for k in ("NCCL_NVLS_ENABLE",) if k in os.environ}
    if not kept:
        return ""
    lines = ["define:", "  variants:"]
    for name in variants:
        env = {**BUILTIN_VARIANTS.get(name, {}), **kept}
        lines.append(f"    {name}: {{env: {json.dumps(env)}, description: {json.dumps(BUILTIN_DESCRIPTIONS.get(name, name))}}}")
    return "\n".join(lines) + "\n"


def harness(*args: str, timeout: float = 590) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *without_empty_gpus(args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def without_empty_gpus(args: tuple[str, ...] | list[str]) -> list[str]:
    """`--gpus ""` (a CPU try-out of this script): no --gpus at all."""
    out = list(args)
    if "--gpus" in out and out[out.index("--gpus") + 1] == "":
        del out[out.index("--gpus"):out.index("--gpus") + 2]
    return out


def records(run: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((run / "cells").glob("*/record.json"))}


def run_matrix(matrix: Path, gpus: str, results: Path, out: Path) -> dict:
    started = time.monotonic()
    proc = harness("matrix", "--matrix", str(matrix), "--engine", "docker", "--gpus", gpus, "--results", str(results),
                   "--run-id", "site")
    (out / "matrix.log").write_text(proc.stderr + proc.stdout)
    run = results / "site"
    found = {}
    for cell_id, rec in records(run).items():
        raw = rec["attempts"][0]["raw"] if rec.get("attempts") else {}
        fp = raw.get("phases", {}).get("fingerprint", {}).get("fingerprint", {})
        rows = raw.get("phases", {}).get("bandwidth", {}).get("rows", [])
        big = max(rows, key=lambda r: r.get("bytes", 0)) if rows else {}
        cell = rec["cell"]
        found[cell_id] = {"status": rec["outcome"]["status"], "reason": rec["outcome"]["reason"],
                          "seconds": rec["outcome"].get("seconds"),
                          "read_inside": {k: cell.get(k) for k in ("cuda", "torch", "nccl", "accelerate", "python",
                                                                    "python_path", "distro", "image_id")},
                          "rank_saw": {"torch": fp.get("torch"), "accelerate": fp.get("accelerate"),
                                       "nccl_loaded": (fp.get("nccl_loaded") or {}).get("version")
                                       if isinstance(fp.get("nccl_loaded"), dict) else fp.get("nccl_loaded"),
                                       "gpus": [g.get("name") for g in fp.get("gpus", []) if isinstance(g, dict)]},
                          "busbw_gbs_at_largest": big.get("busbw_gbs"), "largest_bytes": big.get("bytes"),
                          "busbw_min_max": [big.get("busbw_min"), big.get("busbw_max")]}
    facts = json.loads((run / "run.json").read_text()) if (run / "run.json").exists() else {}
    return {"exit": proc.returncode, "wall_s": round(time.monotonic() - started, 1), "gpu_api": facts.get("gpu_api"),
            "cells": found}


def hang(matrix: Path, gpus: str, out: Path) -> dict:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "hang_latency.py"), *without_empty_gpus(
                           ["--engine", "docker", "--matrix", str(matrix), "--gpus", gpus, "--hangs", "2", "--healthy", "1",
                            "--threshold", "8", "--json", str(out / "hang.json")])], cwd=REPO, capture_output=True,
                          text=True, timeout=590)
    (out / "hang.log").write_text(proc.stdout + proc.stderr)
    summary = json.loads((out / "hang.json").read_text()) if (out / "hang.json").exists() else {}
    return {"exit": proc.returncode, **{k: summary.get(k) for k in ("hangs", "misclassified", "latency_p50_s",
                                                                   "latency_max_s", "false_hangs", "rows")}}


def killed(matrix: Path, gpus: str, results: Path) -> dict:
    import docker

    sdk = docker.from_env()
    mine = {"label": f"{LABEL_RUN}=killed"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", *without_empty_gpus(
                             ["matrix", "--matrix", str(matrix), "--engine", "docker", "--gpus", gpus, "--results",
                              str(results), "--run-id", "killed"])], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, seen = time.monotonic() + 120, []
    while time.monotonic() < deadline and not seen:
        seen = [c.name for c in sdk.containers.list(filters=mine)]
        time.sleep(0.2)
    time.sleep(3)  # the ranks are up inside
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at, left = time.monotonic(), seen
    while left and time.monotonic() - killed_at < 60:
        left = [c.name for c in sdk.containers.list(all=True, filters=mine)]
        time.sleep(0.2)
    return {"containers_while_running": seen, "left_after_kill": left,
            "gone_after_s": round(time.monotonic() - killed_at, 2)}


def pasted(matrix: Path, gpus: str, results: Path, out: Path) -> dict:
    dry = harness("matrix", "--matrix", str(matrix), "--engine", "docker", "--gpus", gpus, "--results", str(results),
                  "--run-id", "pasted", "--dry-run")
    (out / "dry-run.txt").write_text(dry.stdout + dry.stderr)
    line = next((l for l in dry.stdout.splitlines() if l.startswith("docker run ")), "")
    if not line:
        return {"exit": None, "line": None, "why": "no docker run line in the dry run"}
    mount = next(w.split(":", 1)[0] for w in shlex.split(line) if w.endswith(":/out"))
    Path(mount).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=590)
    (out / "pasted.log").write_text(proc.stdout + proc.stderr)
    events = [json.loads(l) for f in sorted(Path(mount).glob("events-rank*.jsonl")) for l in f.read_text().splitlines()
              if l.strip()]
    ended = [e.get("phase") for e in events if e.get("event") == "phase_end"]
    return {"exit": proc.returncode, "wall_s": round(time.monotonic() - started, 1), "line": line, "phases_ended": ended}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", required=True)
    ap.add_argument("--name", default="site")
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", default="doctor,matrix,hang,killed,pasted")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    matrix = args.out / "site.yaml"
    variants = args.variants.split(",")
    matrix.write_text(MATRIX.format(image=args.image, name=args.name, variants=", ".join(variants)) + keep_host_nccl(variants))
    results = Path("/tmp/gpu-containers-results")
    summary: dict = {"image": args.image, "gpus": args.gpus}
    steps = args.steps.split(",")
    def doctor() -> dict:
        doc = harness("doctor", "--gpus", args.gpus, timeout=300)
        return {"exit": doc.returncode, "text": doc.stdout + doc.stderr}

    # the doctor after the matrix: its probe container needs an image, and a GPU host may have none but the user's
    for step, fn in (("matrix", lambda: run_matrix(matrix, args.gpus, results, args.out)),
                     ("doctor", doctor),
                     ("hang", lambda: hang(matrix, args.gpus, args.out)),
                     ("killed", lambda: killed(matrix, args.gpus, results)),
                     ("pasted", lambda: pasted(matrix, args.gpus, results, args.out))):
        if step in steps:
            started = time.monotonic()
            try:
                summary[step] = fn()
            except Exception as exc:  # noqa: BLE001 - one step's failure must not lose the others' figures
                summary[step] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"{step} ({time.monotonic() - started:.0f} s): {json.dumps(summary[step])[:1500]}", flush=True)
            (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
