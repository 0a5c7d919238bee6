"""`invoke fleet` (issue 26): one canonical cell on every node of a partition at once (one job per node, whole
nodes), then across nodes in pairs, each an ordinary supervised cell of one ordinary run (report, compare and
publish read it); then every node and pair judged against the rest of the fleet (fleet.py, pure), the
suspects named with the line that drains them.

The nodes are placed by the cell's variant: the run's matrix is the cell's own with one variant per node
(node-<n>) and per pair (pair-<a>-<b>), each with the cell's variables, and the slurm engine submits each to
its nodes (`sbatch --nodelist`). Nodes that are down or drained are reported, not tried; a busy node's job
waits at most --wait seconds, then it is an infra-error for that node. The same command goes on after
Ctrl-C: cells recorded are not run again.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from . import fleet, proc, results
from .engines.slurm import SlurmOptions
from .engines.slurmjob import FIX
from .errors import EXIT_CELLS_FAILED, EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, HarnessError, InfraError, closest
from .fleet import Fleet, Judged, Member
from .matrix import Cell, Matrix, stack_entry
from .pipeline import MatrixOptions
from .pipeline import run as run_matrix
from .progress import Progress
from .record import CellRecord
from .selection import Selection, by_id, check_drop, resolve

__all__ = ["FleetOptions", "fleet_run", "node_states"]


@dataclass(frozen=True)
class FleetOptions:
    nodes: str = "all"  # all, or a node list as Slurm takes it (n1,n2 or n[1-3])
    cell: str | None = None  # default: the matrix's first cell of the default variant
    ranks_per_node: int = 2  # CPU cells' ranks on each node (a GPU cell's: --gpus-per-node)
    all_pairs: bool = False
    baseline: str | None = None  # an earlier fleet run: each node against itself
    drain: bool = False
    fleet_id: str | None = None
    threshold: float = 0.10
    wait_s: float = 600.0  # how long a job waits for a busy node
    as_json: bool = False


def node_states(partition: str | None) -> dict[str, str]:
    """Each node of the partition (the default one: every node sinfo lists) with its state, sinfo's %T."""
    if proc.which("sinfo") is None:
        raise InfraError(f"invoke fleet: sinfo is not on PATH. {FIX}")
    argv = ["sinfo", "-h", "-N", "-o", "%N %T"] + (["-p", partition] if partition else [])
    done = proc.run(argv, timeout=60)
    proc.check(done, "sinfo", FIX)
    states: dict[str, str] = {}
    for line in done.output.splitlines():
        words = line.split()
        if len(words) == 2:
            states.setdefault(words[0], words[1])
    return states


def _expand(spec: str) -> list[str]:
    """A Slurm node list (n1,n2 or n[1-3]) as names, through scontrol as Slurm expands it."""
    done = proc.run(["scontrol", "show", "hostnames", spec], timeout=60)
    if done.returncode != 0:
        raise HarnessError(f"--nodes {spec}: Slurm cannot read it as a node list ({done.output.strip()[-200:]}). Fix: "
                           "e.g. --nodes n1,n2 or --nodes 'n[1-4]', or --nodes all.")
    return list(dict.fromkeys(done.output.split()))


def _chosen(spec: str, states: dict[str, str], partition: str | None) -> dict[str, str]:
    where = f"partition {partition}" if partition else "the cluster"
    if not states:
        raise InfraError(f"invoke fleet: sinfo lists no node in {where}. Fix: --partition with one of `sinfo -s`'s.")
    if spec == "all":
        return states
    chosen = {}
    for node in _expand(spec):
        if node not in states:
            guess = closest(node, list(states))
            raise HarnessError(f"--nodes: {node} is not a node of {where}"
                               + (f"; did you mean {guess}?" if guess else "")
                               + f" Fix: one of {', '.join(states)} (sinfo -N), or --nodes all.")
        chosen[node] = states[node]
    return chosen


def _cell(selection: Selection, cell_id: str | None) -> tuple[Matrix, Cell]:
    m, cells = resolve(replace(selection, only=(), exclude=()), Progress())
    runnable = [c for c in cells if c.na_reason is None]
    if cell_id is None:
        if not runnable:
            raise HarnessError(f"{m.path}: no runnable cell. Fix: a matrix with a runnable cell, or --cell ID.")
        return m, next((c for c in runnable if c.variant.name == "default"), runnable[0])
    return m, by_id(m, cells, cell_id, "--cell")


def _matrix(m: Matrix, cell: Cell, placements: Sequence[tuple[str, ...]]) -> dict:
    """The cell's matrix file with its one stack and launcher and one variant per node and per pair."""
    original = yaml.safe_load(m.path.read_text())
    env = cell.variant.env_dict
    define = {fleet.variant_of(nodes): {"env": env, "description": f"{cell.variant.name} on {', '.join(nodes)}"}
              for nodes in placements}
    return original | {
        "description": f"invoke fleet of {cell.id} (from {m.path})",
        "stacks": {"include": [stack_entry(cell.stack)]},
        "variants": list(define),
        "define": {"variants": define},
        "launchers": [cell.launcher],
        "exclude": [],
    }


def _baseline(results_dir: Path, run_id: str) -> dict[tuple[str, ...], Member]:
    """The nodes of an earlier fleet run (its fleet.json), each with its record."""
    summary = results_dir / run_id / "fleet" / "fleet.json"
    try:
        data = json.loads(summary.read_text())
        entries = [(tuple(n["nodes"]), str(n["cell"])) for n in data["nodes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"--baseline {run_id}: {summary} is not a fleet run's summary ({exc}). Fix: give the id of "
                           "an earlier `invoke fleet` run (its folder has fleet/fleet.json).") from None
    run = results.load_run(results_dir / str(data.get("run", run_id)))
    return {nodes: fleet.member(nodes, cell_id, run.records.get(cell_id)) for nodes, cell_id in entries}


def _stopped(code: int, ident: str, progress: Progress) -> int:
    if code == EXIT_INTERRUPTED:
        progress.say(f"Interrupted: the cells recorded are kept in run {ident}; the same `invoke fleet` command with "
                     f"--fleet-id {ident} goes on from them.")
    return code


def fleet_run(selection: Selection, options: MatrixOptions, slurm: SlurmOptions, fo: FleetOptions) -> int:
    progress = Progress(verbose=options.verbose)
    check_drop(fo.threshold)
    if fo.ranks_per_node < 1:
        raise HarnessError(f"--ranks-per-node {fo.ranks_per_node}: must be at least 1. Fix: e.g. --ranks-per-node 2.")
    slurm.check()
    m, cell = _cell(selection, fo.cell)
    states = node_states(slurm.partition)
    chosen = _chosen(fo.nodes, states, slurm.partition)
    ok, out = fleet.usable(chosen)
    for node, state in out.items():
        progress.say(f"{node}: {state}: not tested (a job cannot start there now)")
    if not ok:
        said = ", ".join(f"{n} {s}" for n, s in out.items())
        raise InfraError(f"invoke fleet: none of {', '.join(chosen)} can take a job now ({said}). "
                         "Fix: resume the nodes (scontrol update NodeName=... State=RESUME) or choose others with --nodes.")
    pairs = fleet.pairs(ok, fo.all_pairs)
    placements: list[tuple[str, ...]] = [(n,) for n in ok] + list(pairs)
    ident = results.check_run_id(fo.fleet_id or f"fleet-{time.strftime('%Y%m%d-%H%M%S')}", "--fleet-id")
    progress.say(f"fleet {ident}: {cell.id} on {len(ok)} node(s) at once, then {len(pairs)} pair(s)"
                 + (" (every pair)" if pairs and (fo.all_pairs or len(ok) <= fleet.ALL_PAIRS_UP_TO) else
                    " (a ring)" if pairs else ""))
    # the derived matrices beside the run's records; a dry run writes nothing under the results folder
    folder = (Path(tempfile.mkdtemp(prefix="fleet-dry-run-")) if options.dry_run
              else results.run_dir(options.results, ident) / "fleet")
    results.make_dir(folder)
    placed = replace(slurm, nodes=len(ok), jobs=len(ok), placement=tuple((fleet.variant_of(p), p) for p in placements),
                     ranks_per_node=fo.ranks_per_node, nodelist=tuple(ok), pending_s=fo.wait_s)

    def measure(run_id: str, group: Sequence[tuple[str, ...]]) -> dict[str, CellRecord] | int:
        """The cells of `group` as one ordinary run: their records by variant, or the pipeline's exit code
        when it did not end (a dry run, Ctrl-C)."""
        path = folder / f"matrix-{run_id}.yaml"
        results.write_text(path, yaml.safe_dump(_matrix(m, cell, group), sort_keys=False))
        code = run_matrix(Selection(matrix=path), replace(options, engine="slurm", slurm=placed, ranks=fo.ranks_per_node,
                                                          jobs=len(ok), run_id=run_id, resume=True, rescue=False))
        if options.dry_run or code == EXIT_INTERRUPTED:
            return code
        return {r.cell.variant or "": r for r in results.load_run(options.results / run_id).records.values()}

    def members(records: dict[str, CellRecord], group: Sequence[tuple[str, ...]]) -> list[Member]:
        found = []
        for nodes in group:
            record = records.get(fleet.variant_of(nodes))
            found.append(fleet.member(nodes, (record.id or "") if record else "", record))
        return found

    first = measure(ident, placements)
    if isinstance(first, int):
        return _stopped(first, ident, progress)
    node_members, pair_members = members(first, [(n,) for n in ok]), members(first, pairs)
    nodes_judged = fleet.judge(node_members, fo.threshold)
    raw_pairs = fleet.judge(pair_members, fo.threshold)  # no node blamed yet: every failing or slow pair
    flagged = [j.member.nodes for j in (*nodes_judged, *raw_pairs) if j.flag in ("fails", "outlier", "link")]
    second: dict[tuple[str, ...], Member] = {}
    if flagged:  # every suspect measured again before it is named
        progress.say(f"{len(flagged)} suspect(s) measured again: {', '.join('–'.join(n) for n in flagged)}")
        again = measure(f"{ident}-again", flagged)
        if isinstance(again, int):
            return _stopped(again, ident, progress)
        second = dict(zip(flagged, members(again, flagged)))

    def confirmed(judged: list[Judged], peers: list[Member]) -> list[Judged]:
        calm = [p for p in peers if p.nodes not in second]
        return [fleet.confirm(j, second[j.member.nodes], calm, fo.threshold)
                if j.member.nodes in second and j.flag in ("fails", "outlier", "link") else j for j in judged]

    nodes_judged = confirmed(nodes_judged, node_members)
    bad = {j.member.nodes[0] for j in nodes_judged if j.suspect}
    pairs_judged = confirmed(fleet.judge(pair_members, fo.threshold, bad), pair_members)
    if fo.baseline:
        before = _baseline(options.results, fo.baseline)
        nodes_judged = [fleet.against_baseline(j, before.get(j.member.nodes), fo.threshold) for j in nodes_judged]
    f = Fleet(ident, cell.id, ident, tuple(nodes_judged), tuple(pairs_judged), tuple(out.items()), fo.threshold,
              fo.baseline, fo.drain)
    if fo.drain:
        for node, reason in f.drains():
            drained = proc.run(fleet.drain_argv(node, reason), timeout=60)
            progress.say(f"{'drained' if drained.returncode == 0 else 'NOT drained'}: {node}"
                         + ("" if drained.returncode == 0 else f" ({drained.output.strip()[-200:]})"))
    text = fleet.render(f)
    results.write_text(folder / "fleet.md", text)
    results.write_json(folder / "fleet.json", f.to_json())
    print(json.dumps(f.to_json(), indent=2) if fo.as_json else text, end="" if not fo.as_json else "\n")
    progress.say(f"Fleet summary: {folder / 'fleet.md'}")
    if f.suspects:
        return EXIT_CELLS_FAILED
    return EXIT_INFRA if f.untested else EXIT_OK
