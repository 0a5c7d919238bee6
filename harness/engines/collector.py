"""The forensics collector the slurm engine runs on every node of a hung cell's job (`srun --jobid=J
--overlap`, one task per node), with the nodes' Python and nothing but the standard library: its source
is passed with `python -c`, so a node needs no copy of the harness. On its node it finds the cell's
processes by the cell's token in their environment (Slurm exports the submission's environment to every
task, and launchers pass it on to the ranks), lists them with their state (T: stopped), sends each rank
SIGUSR1 (the workload's faulthandler writes its threads into the attempt folder, which every node
shares) and takes a `py-spy dump` of it (py-spy reads a stopped rank too) and every thread's native stack
(eu-stack or gdb, where the node has one), then writes what it found as
`<out>/node-forensics/<node>.json`, atomically. A rank is a process whose RANK variable names it and
whose pid, as the rank itself saw it (`pid-rank<N>`, innermost NSpid: a container's pid too), is the
rank's own, so two nodes' ranks with the same pid are never mixed up.

    python -c "$(cat collector.py)" HARNESS_CELL_TOKEN=TOKEN OUT_DIR
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys


def _environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [v.split(b"=", 1) for v in fh.read().split(b"\0") if b"=" in v]
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _state(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def _inner_pid(pid):
    """The pid as the process itself sees it (its innermost pid namespace: inside a container)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return int(pid)


def cell_processes(tag):
    """The live processes whose environment holds `tag` (VAR=value; engines/host.py's TOKEN_VAR)."""
    var, token = tag.split("=", 1)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            env = _environ(name)
            if env.get(var) != token:
                continue
            state = _state(name)
            if state == "Z":
                continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            found.append({"pid": int(name), "inner_pid": _inner_pid(name), "state": state, "cmd": cmd[:300],
                          "rank": env.get("RANK")})
        except (OSError, ValueError, IndexError):
            continue
    return found


def rank_pids(out):
    pids = {}
    for name in os.listdir(out):
        if name.startswith("pid-rank") and name[len("pid-rank"):].isdigit():
            try:
                # a rank's own file: no link followed, a FIFO never waited on, a few bytes read (harness/rankfiles.py)
                fd = os.open(os.path.join(out, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    pids[name[len("pid-rank"):]] = int(os.read(fd, 64).strip())
                finally:
                    os.close(fd)
            except (OSError, ValueError):
                continue
    return pids


# Every thread's native stack, NCCL's proxy and progress threads too (C++ threads py-spy never shows):
# elfutils' eu-stack, else gdb. Both read a stopped process and leave it stopped (seen here: a SIGSTOPped
# python, 0.03 s and 0.5 s; state T after). Also the host and docker engines' (harness/engines).
NATIVE_TOOLS = ("eu-stack", "gdb")
NATIVE_TIMEOUT_S = 20


def native_argv(tool, pid):
    if os.path.basename(tool) == "gdb":
        return [tool, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt"]
    return [tool, "-p", str(pid)]


def native_tool():
    return next((path for path in map(shutil.which, NATIVE_TOOLS) if path), None)


def native_stack(tool, pid):
    try:
        done = subprocess.run(native_argv(tool, pid), capture_output=True, text=True, timeout=NATIVE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({os.path.basename(tool)} failed: {exc})"
    return done.stdout + (f"\n(stderr) {done.stderr[-600:]}" if done.returncode and done.stderr else "")


# NCCL's RAS service (NCCL >= 2.24, on by default): every NCCL process of a job can say the job's state
# (its communicators, ranks missing or dead) on a local TCP port, in plain text: "CLIENT PROTOCOL N",
# answered "SERVER PROTOCOL M", then "STATUS" and the report until the connection closes (NVIDIA/nccl
# src/ras/client.cc, what `ncclras` does). The port is NCCL_RAS_ADDR's, else localhost:28028.
RAS_PORT = 28028
RAS_PROTOCOL = 2
RAS_TIMEOUT_S = 10
RAS_MAX_BYTES = 1 << 20


def nccl_ras(addr=None, timeout=RAS_TIMEOUT_S):
    """The RAS service's STATUS report, or "" where no NCCL process of this machine answers."""
    host, _, port = (addr or f"localhost:{RAS_PORT}").rpartition(":")
    try:
        with socket.create_connection((host or "localhost", int(port)), timeout=timeout) as sock:
            reader = sock.makefile("rb")
            sock.sendall(f"CLIENT PROTOCOL {RAS_PROTOCOL}\n".encode())
            hello = reader.readline(4096).decode(errors="replace")
            if not hello.upper().startswith("SERVER PROTOCOL"):
                return f"(the RAS port answered {hello.strip()[:200]!r}, not NCCL's RAS)"
            sock.sendall(b"STATUS\n")
            return reader.read(RAS_MAX_BYTES).decode(errors="replace")
    except (OSError, ValueError):
        return ""


def py_spy():
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


def collect(tag, out):
    processes = cell_processes(tag)
    pids = rank_pids(out)
    ranks = {p["rank"]: p for p in processes if p["rank"] in pids and p["inner_pid"] == pids[p["rank"]]}
    spy, dumps = py_spy(), {}
    for _rank, p in sorted(ranks.items()):
        try:
            os.kill(p["pid"], signal.SIGUSR1)
        except OSError:
            continue
    for rank, p in sorted(ranks.items()):
        if spy is None:
            break
        try:
            done = subprocess.run([spy, "dump", "--nonblocking", "--pid", str(p["pid"])], capture_output=True,
                                  text=True, timeout=20)
            dumps[rank] = done.stdout if done.returncode == 0 else f"(py-spy failed: {(done.stdout + done.stderr)[-300:]})"
        except (OSError, subprocess.TimeoutExpired) as exc:
            dumps[rank] = f"(py-spy failed: {exc})"
    tool, native = native_tool(), {}
    for rank, p in sorted(ranks.items()):
        if tool is not None:
            native[rank] = native_stack(tool, p["pid"])
    return {"processes": processes, "ranks": {r: p["pid"] for r, p in ranks.items()}, "py_spy": dumps,
            "py_spy_path": spy, "native": native, "native_tool": tool, "ras": nccl_ras() if ranks else ""}


def main(argv):
    tag, out = argv[1], argv[2]
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    found = {"node": node, **collect(tag, out)}
    folder = os.path.join(out, "node-forensics")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, node + ".json")
    with open(path + ".part", "w") as fh:
        json.dump(found, fh)
    os.replace(path + ".part", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
