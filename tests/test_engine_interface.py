"""The engine interface (harness/engines/base.py) is what callers use, and every engine implements all
of it: each member of Engine and Running exists on every engine (docker, host, slurm, the tests' fake)
with the Protocol's signature; the modules outside harness/engines call nothing else on an engine or a
started cell, use every member, and never ask which engine they hold; and a whole `invoke matrix` run
on the fake engine touches nothing else either."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import get_protocol_members

from harness import matrix, pipeline, reaper
from harness.engines.base import Engine, Running
from harness.engines.docker import DockerEngine, DockerRunning
from harness.engines.dockerclient import DockerClient
from harness.engines.host import HostEngine, HostRunning
from harness.engines.slurm import SlurmEngine, SlurmOptions, SlurmRunning
from harness.selection import Selection

from .fakeengine import FakeEngine, FakeRunning

HARNESS = Path(__file__).resolve().parent.parent / "harness"
ENGINE_MEMBERS = get_protocol_members(Engine)
RUNNING_MEMBERS = get_protocol_members(Running)


def _engines() -> list[Any]:
    docker = DockerEngine(DockerClient.__new__(DockerClient))  # no connection: only its members are read
    return [docker, HostEngine(), SlurmEngine(SlurmOptions()), FakeEngine()]


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def _check(cls: type, instance: Any, protocol: type, members: frozenset[str]) -> None:
    for member in sorted(members):
        declared = inspect.getattr_static(protocol, member)
        assert hasattr(instance, member), f"{cls.__name__} lacks {member}"
        found = inspect.getattr_static(cls, member, None)
        if isinstance(declared, property):  # a value: a property or an attribute, never a method
            assert not inspect.isfunction(found), f"{cls.__name__}.{member} is a method, the Protocol's a value"
            continue
        assert inspect.isfunction(found), f"{cls.__name__}.{member} is not a method"
        assert _params(found) == _params(declared), \
            f"{cls.__name__}.{member}{inspect.signature(found)} is not Engine's {inspect.signature(declared)}"


@pytest.mark.parametrize("engine", _engines(), ids=lambda e: type(e).__name__)
def test_every_engine_implements_every_member_with_the_protocols_signature(engine: Any) -> None:
    _check(type(engine), engine, Engine, ENGINE_MEMBERS)


@pytest.mark.parametrize("cls", [DockerRunning, HostRunning, SlurmRunning, FakeRunning], ids=lambda c: c.__name__)
def test_every_started_cell_implements_every_member_of_running(cls: type) -> None:
    _check(cls, cls, Running, RUNNING_MEMBERS)


def _callers() -> list[tuple[Path, ast.AST]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(HARNESS.rglob("*.py"))
            if "engines" not in path.relative_to(HARNESS).parts]


# the modules that hold an engine or a started cell (record.py's `engine` is run.json's facts)
CALLERS = ("pipeline.py", "runner.py", "supervise.py", "doctor.py", "commands.py", "reaper.py")


def _used(name: str) -> set[str]:
    """The attributes read on a variable called `name` in the modules that hold engines."""
    return {node.attr for path, tree in _callers() if path.name in CALLERS for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name}


def test_callers_use_exactly_the_protocols_members() -> None:
    assert _used("engine") == ENGINE_MEMBERS
    assert _used("running") == RUNNING_MEMBERS


ENGINE_CLASSES = {"DockerEngine", "HostEngine", "SlurmEngine", "DockerRunning", "HostRunning", "SlurmRunning"}


def test_no_caller_asks_which_engine_it_holds() -> None:
    asked = []
    for path, tree in _callers():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                text = ast.unparse(node)
                if any(word in text for word in ("engine", *ENGINE_CLASSES)):
                    asked.append(f"{path.name}:{node.lineno}: {text}")
    assert asked == []


class Recording:
    """An engine that forwards to the fake and writes down every attribute read on it, and on the cells
    it starts."""

    def __init__(self, inner: FakeEngine) -> None:
        self._inner = inner
        self.read: set[str] = set()
        self.read_running: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        value = getattr(self._inner, name)
        if name == "start":
            def start(spec: Any) -> Any:
                return _RecordingStart(value(spec), self.read_running)
            return start
        return value


class _RecordingStart:
    def __init__(self, context: Any, read: set[str]) -> None:
        self.context, self.read = context, read

    def __enter__(self) -> Any:
        return _RecordingRunning(self.context.__enter__(), self.read)

    def __exit__(self, *exc: Any) -> Any:
        return self.context.__exit__(*exc)


class _RecordingRunning:
    def __init__(self, inner: Any, read: set[str]) -> None:
        self._inner, self._read = inner, read

    def __getattr__(self, name: str) -> Any:
        self._read.add(name)
        return getattr(self._inner, name)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_matrix_run_on_the_fake_engine_reads_only_protocol_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     dry_run: bool) -> None:
    recording = Recording(FakeEngine())
    monkeypatch.setattr(pipeline.engines, "choose", lambda *args: recording)
    swept: list[Any] = []

    def sweep(progress: Any, docker: Any = None, **kw: Any) -> list[Any]:
        swept.append(docker)
        return []

    monkeypatch.setattr(reaper, "sweep", sweep)
    selection = Selection(matrix.DEFAULT_CPU_MATRIX, only=("variant=default", "launcher=torchrun"))
    code = pipeline.run(selection, pipeline.MatrixOptions(results=tmp_path, run_id="fake", dry_run=dry_run))
    assert code == 0
    assert swept == [None]  # the fake has no Docker client: the sweep is asked to find its own
    assert recording.read <= ENGINE_MEMBERS and recording.read_running <= RUNNING_MEMBERS
    if not dry_run:
        assert {"start", "concurrent_cells", "check_results", "facts"} <= recording.read
        assert {"poll", "leftovers", "output_tail"} <= recording.read_running  # kill: only a cell that did not exit
        assert (tmp_path / "fake" / "report.md").exists()
