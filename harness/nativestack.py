"""Every thread's native stack of a hung rank, as eu-stack or gdb printed it, read (issue 24 item 2): the
threads that matter first. py-spy shows the Python threads only; NCCL's proxy and progress threads and
torch's watchdog are C++ threads, and a rank stuck in a collective waits in one of a few native frames
(cudaStreamSynchronize, NCCL's proxy, gloo's transport). Pure: text in, text out."""

from __future__ import annotations

import re
from dataclasses import dataclass

# (what it is, frames that say it), in the order a reader wants them: where NCCL's own threads are, then
# where the rank's thread waits on the GPU or on gloo, then torch's watchdog
MATTERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("NCCL proxy/progress thread", re.compile(r"ncclProxy|proxyProgress|proxyService|ncclProxyService")),
    ("waits on the GPU", re.compile(r"\bcu(?:da)?(?:Stream|Device|Event|Ctx)Synchronize|cuStreamQuery|cudaStreamWaitEvent")),
    ("inside an NCCL call", re.compile(r"\bnccl(?!CommWatchdog)[A-Z]\w*")),
    ("inside gloo", re.compile(r"\bgloo::")),
    ("torch's watchdog/monitor", re.compile(r"ncclCommWatchdog|[Ww]atchdog|HeartbeatMonitor")),
    ("inside a collective", re.compile(r"c10d::|ProcessGroup")),
)
_THREAD = re.compile(r"^(?:TID (\d+):|Thread (\d+) \(.*?LWP (\d+)\)[^:]*:)\s*$")
_IDLE = re.compile(r"gloo::transport::tcp::Loop::run|ProcessGroupGloo::runLoop|StoreDaemon|TCPStoreMaster")
_PID = re.compile(r"^PID (\d+) ")
_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+\s+(?:in\s+)?)?(.*)$")


@dataclass(frozen=True)
class Thread:
    tid: int
    frames: tuple[str, ...]  # innermost first: the function (and where gdb says, its library)
    main: bool = False  # the process's main thread (eu-stack: the tid that is the pid; gdb: thread 1)

    @property
    def matters(self) -> str | None:
        """What this thread is, by its first frame that says it; None for an ordinary thread. The loops
        every rank has (gloo's event loop, torch's idle gloo workers, the store's daemon: seen on the
        H200, LibUVStoreDaemon::run in epoll) say nothing by themselves."""
        frames = [f for f in self.frames if not _IDLE.search(f)]
        return next((what for what, frame in MATTERS if any(frame.search(f) for f in frames)), None)

    def rank(self) -> int:
        what = self.matters
        return next(i for i, (name, _) in enumerate(MATTERS) if name == what) if what else len(MATTERS)


def threads(text: str) -> tuple[Thread, ...]:
    """The threads of one dump, in the tool's order."""
    found: list[Thread] = []
    tid, main, frames, pid = None, False, list[str](), None
    for line in text.splitlines():
        line = line.strip()
        if (head := _PID.match(line)) is not None:
            pid = int(head.group(1))
        elif (head := _THREAD.match(line)) is not None:
            if tid is not None:
                found.append(Thread(tid, tuple(frames), main))
            tid = int(head.group(1) or head.group(3))
            main, frames = (tid == pid) if head.group(1) else head.group(2) == "1", []
        elif (frame := _FRAME.match(line)) is not None and tid is not None:
            frames.append(frame.group(2).strip())
    if tid is not None:
        found.append(Thread(tid, tuple(frames), main))
    return tuple(found)


def ordered(text: str) -> tuple[Thread, ...]:
    """The threads that matter first (MATTERS' order), the rest as the tool listed them."""
    return tuple(sorted(threads(text), key=Thread.rank))


def where(text: str) -> str | None:
    """Where the rank's main thread waits, in a few words: "inside gloo: gloo::...::waitRecv", or "in no
    collective (innermost: clock_nanosleep)"; None when the text holds no main thread. The main thread,
    not any thread: NCCL's proxy and gloo's event loop are there, idle, in every rank that made a group."""
    main = next((t for t in threads(text) if t.main), None)
    if main is None or not main.frames:
        return None
    what = main.matters
    if what is None:
        return f"in no collective (innermost: {_short(main.frames[0])})"
    pattern = dict(MATTERS)[what]
    return f"{what}: {_short(next(f for f in main.frames if pattern.search(f)))}"


def shown(text: str, most: int = 6, frames: int = 12) -> str:
    """The dump as a report shows it: the `most` threads that matter first, each with its innermost
    `frames` frames, then a count of the rest; the text as it is when it holds no thread."""
    found = ordered(text)
    if not found:
        return text.strip()
    out = []
    for thread in found[:most]:
        out.append(f"thread {thread.tid}" + (f" ({thread.matters})" if thread.matters else "") + ":")
        out += [f"  #{i} {_short(f)}" for i, f in enumerate(thread.frames[:frames])]
        if len(thread.frames) > frames:
            out.append(f"  ... {len(thread.frames) - frames} more frames")
    if len(found) > most:
        out.append(f"({len(found) - most} more threads)")
    return "\n".join(out)


def _short(frame: str) -> str:
    """A frame without its argument lists (gdb prints every argument's value, and C++ names their types;
    gdb's "f(int) () from LIB" has two), its library or file by base name, capped."""
    where = re.search(r"\s+(at|from)\s+(\S+)$", frame)
    if where:
        frame = frame[:where.start()]
    for _ in range(2):
        if not frame.endswith(")"):
            break
        depth = 0
        for i in range(len(frame) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(frame[i], 0)
            if depth == 0:
                frame = frame[:i].rstrip()
                break
    place = f" {where.group(1)} {where.group(2).rsplit('/', 1)[-1]}" if where else ""
    return (frame + place)[:160]
