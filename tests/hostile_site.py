"""A hostile site's `sitecustomize.py` (imported by every Python that has its folder on PYTHONPATH, as a
broken install or a hostile image would have it): in each rank of the harness's workload, it does what
the `HOSTILE` variable names (comma-separated), then lets the workload run. Written into the test's
folder by tests/test_hostile_ranks.py; it imports nothing of the harness. What each word does:

- noaccelerate: `import accelerate` fails in the rank (a broken install), as ModuleNotFoundError
- escapes: the same, with terminal control sequences (an OSC that sets the title, a CSI that clears the
  screen, BEL) and markdown (a javascript: link, emphasis, backticks) in the error's message
- links: rank 0's NCCL debug file is a link to a file outside the attempt folder (SECRET_FILE), rank
  1's a FIFO (opening one to read waits for a writer)
- hardlink: the rank's NCCL debug file is a hard link to SECRET_FILE (same file system)
- endless: the rank's NCCL debug file is a link to /dev/zero (the issue's MemoryError)
- floods: the rank writes FLOOD_MB MB to stdout, FLOOD_MB MB of NCCL-like lines to its NCCL debug file,
  and, as it exits (os._exit), FLOOD_MB MB of junk without a newline to its event file
"""

import os
import sys


def _out() -> str | None:
    argv = sys.argv
    if "RANK" not in os.environ or "--out" not in argv:
        return None  # not a rank of the workload (the launcher, a probe, the harness itself)
    return argv[argv.index("--out") + 1]


HOSTILE_TEXT = "\x1b]0;pwned\x07\x1b[2J [click](javascript:alert(1)) **bold** `code`"


def _no_accelerate(message: str = "No module named 'accelerate'") -> None:
    class Refuse:
        def find_spec(self, name, path=None, target=None):  # the meta path finder protocol
            if name == "accelerate" or name.startswith("accelerate."):
                raise ModuleNotFoundError(message, name=name)
            return None

    sys.meta_path.insert(0, Refuse())


def _replace(path: str, make) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    make(path)


def _flood(out: str, rank: str, mb: int) -> None:
    line = "host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read " + "x" * 120 + "\n"
    with open(os.path.join(out, f"nccl-rank{rank}.log"), "a") as log:
        for _ in range(mb * (1 << 20) // len(line)):
            log.write(line)
    block = "y" * (1 << 20)
    for _ in range(mb):
        sys.stdout.write(block + "\n")
    sys.stdout.flush()

    def junk() -> None:
        fd = os.open(os.path.join(out, f"events-rank{rank}.jsonl"), os.O_WRONLY | os.O_APPEND)
        for _ in range(mb):
            os.write(fd, b"z" * (1 << 20))
        os.close(fd)

    exit_now = os._exit  # the workload ends with os._exit (workload/run.py): no atexit handler runs

    def junk_then_exit(code: int) -> None:
        junk()
        exit_now(code)

    os._exit = junk_then_exit


def main() -> None:
    out = _out()
    if out is None:
        return
    rank, words = os.environ["RANK"], os.environ.get("HOSTILE", "").split(",")
    nccl = os.path.join(out, f"nccl-rank{rank}.log")
    if "noaccelerate" in words:
        _no_accelerate()
    if "escapes" in words:
        _no_accelerate("No module named 'accelerate' " + HOSTILE_TEXT)
    if "links" in words:
        if rank == "0":
            _replace(nccl, lambda p: os.symlink(os.environ["SECRET_FILE"], p))
        else:
            _replace(nccl, os.mkfifo)
    if "hardlink" in words:
        _replace(nccl, lambda p: os.link(os.environ["SECRET_FILE"], p))
    if "endless" in words:
        _replace(nccl, lambda p: os.symlink("/dev/zero", p))
    if "floods" in words:
        _flood(out, rank, int(os.environ.get("FLOOD_MB", "100")))


main()
