"""The shape of the code: data flows one way through the harness's modules. Each module imports only
from its own stage or the stages before it (every import counts: at the top, inside a function, or
under TYPE_CHECKING), there is no import circle, the workload imports nothing of the harness, and only
the engines know which engine is which. The stages are the README's Layout."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "harness"

# in data-flow order; a module may import from its own stage and the ones above it
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("basics", ("harness", "escape", "errors", "kinds", "progress", "proc", "owner", "codec", "statefile")),
    ("what was asked for", ("yamlfile", "ladder", "compat", "matrixfile", "imagefacts", "matrix", "selection")),
    ("the images", ("wheelhouse", "engines.dockerclient", "userimages", "baseimage", "images")),
    ("records and their store", ("payloads", "flight", "nativestack", "evidence", "rankfiles", "nccl_log", "cellfields", "record", "runfacts", "results")),
    ("where ranks run", ("launch", "hostinfo", "engines.base", "engines.container", "engines.host", "engines.docker",
                         "engines.noderuntime", "engines.slurmjob", "engines.slurm", "engines.collector", "engines",
                         "reaper")),
    ("one attempt, one cell", ("supervise", "outcome", "runner", "schedule")),
    ("what reads records", ("textmatch", "hintsfile", "hints", "advice", "report", "bugreport", "compare", "publish",
                            "bisection", "fleet")),
    ("the faces", ("pipeline", "bisectrun", "fleetrun", "doctor", "commands", "tasks", "cli", "__main__")),
]
STAGE = {module: n for n, (_, modules) in enumerate(STAGES) for module in modules}


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name.removeprefix("harness.") if name != "harness" else "harness"] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The harness modules `name` imports, everywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = [] if package in ("", "harness") else package.split(".")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                target = (node.module or "").removeprefix("harness.") if (node.module or "").startswith("harness") \
                    else ""
                target = "harness" if target == "harness" else target
            for candidate in (target, *(f"{target}.{a.name}" if target else a.name for a in node.names)):
                if candidate in known and candidate != name:
                    found.add(candidate)
                elif not candidate and node.level == 1 and package in ("", "harness"):
                    found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("harness.") for a in node.names if a.name.removeprefix("harness.") in known}
    return found - {name}


MODULES = _modules()
GRAPH = {name: _imports(name, path, set(MODULES)) for name, path in MODULES.items()}


def test_every_module_has_a_stage():
    assert sorted(m for m in MODULES if m not in STAGE and not m.startswith("workload")) == []


@pytest.mark.parametrize("name", sorted(m for m in MODULES if not m.startswith("workload")))
def test_a_module_imports_only_from_its_stage_and_the_ones_before(name):
    later = {dep: STAGES[STAGE[dep]][0] for dep in GRAPH[name] if dep in STAGE and STAGE[dep] > STAGE[name]}
    assert later == {}, f"{name} ({STAGES[STAGE[name]][0]}) imports from later stages: {later}"


def test_the_workload_imports_nothing_of_the_harness():
    outside = {name: sorted(d for d in deps if not d.startswith("workload"))
               for name, deps in GRAPH.items() if name.startswith("workload")}
    assert {k: v for k, v in outside.items() if v} == {}


def test_there_is_no_import_circle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []


def test_only_the_engines_tell_one_engine_from_another():
    found = []
    for name, path in MODULES.items():
        if name.startswith("engines"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                kinds = ast.unparse(node.args[1])
                if "Engine" in kinds or (isinstance(node.args[0], ast.Name) and node.args[0].id == "engine"):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
