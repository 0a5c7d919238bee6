"""The facts of a run (run.json) that reports read: its host, engine, matrix and cells."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, model_validator

from .cellfields import CellFields
from .codec import Json, Model, RecordError, Str, Text, shown
from .kinds import GpuApi

__all__ = ["EngineJson", "HostJson", "MatrixJson", "RunJson", "RunFacts"]


class EngineJson(Model):
    """The engine's own facts (Engine.facts): these five are read; the rest (api, nodes, ...) kept as written."""

    model_config = ConfigDict(frozen=True, extra="allow")
    WRITTEN_ONLY: ClassVar[bool] = True
    name: Str | None = None
    product: Str | None = None  # docker engine: "docker" or "podman" (its Docker-compatible service); None before
    version: Str | None = None
    runtimes: tuple[Str, ...] = ()
    flags: tuple[Str, ...] = ()  # the `invoke matrix` flags that chose the engine; () in older runs


class HostJson(Model):
    """The host a run happened on (hostinfo.facts), with its engine's facts."""

    model_config = ConfigDict(frozen=True, extra="allow")
    WRITTEN_ONLY: ClassVar[bool] = True
    hostname: Str | None = None
    os: Str | None = None
    kernel: Str | None = None
    driver: Str | None = None
    gpus: tuple[Str, ...] = ()  # GPU names on the host
    topo: Text | None = None  # nvidia-smi topo -m
    topo_p2p_read: Text | None = None  # nvidia-smi topo -p2p r
    harness_version: Str | None = None
    git_commit: Str | None = None
    engine: EngineJson | None = None


class MatrixJson(Model):
    """The matrix file a run expanded, and the thresholds and sizes it ran with."""

    model_config = ConfigDict(frozen=True, extra="allow")
    WRITTEN_ONLY: ClassVar[bool] = True
    path: Str | None = None
    sha256: Str | None = None
    timeouts: dict[str, Json] = {}
    bandwidth_sizes: tuple[Json, ...] = ()


class RunJson(Model):
    """run.json, as pipeline writes it and reports read it; early run.json files held the hostname only
    (as `host`) and their `cells` only ids."""

    run_id: Str | None = None
    started: Str | None = None
    host: HostJson = HostJson()
    engine: Str | None = None  # the engine's name (also in host.engine, where runs before it lack it)
    gpus: tuple[Str, ...] = ()  # the GPU ids the cells used (--gpus)
    # how the GPU cells' containers got the GPUs (Engine.gpu_api); not written for runs without (CPU-only, host,
    # slurm) nor by harnesses before it
    gpu_api: GpuApi | None = None
    harness_version: Str | None = None
    matrix: MatrixJson = MatrixJson()
    cells: tuple[Json, ...] = ()  # CellFields of every cell (ids in early runs), read one by one (RunFacts)
    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"gpu_api"})

    @model_validator(mode="before")
    @classmethod
    def _hostname_only(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("host"), str):
            return {**data, "host": {"hostname": data["host"]}}
        return data


class RunFacts(Model):
    """The facts of a run (run.json) that reports read; None where the file lacks them."""

    run_id: str | None = None
    started: str | None = None
    hostname: str | None = None
    os: str | None = None
    driver: str | None = None
    host_gpus: tuple[str, ...] = ()  # GPU names on the host
    gpus: tuple[str, ...] = ()  # the GPU ids the cells used (--gpus)
    gpu_api: GpuApi | None = None  # how containers got the GPUs; None: no container GPUs, or a run before it
    engine: str | None = None
    engine_product: str | None = None  # docker engine: which service answered its API (docker, podman)
    engine_version: str | None = None
    engine_runtimes: tuple[str, ...] = ()
    engine_flags: tuple[str, ...] = ()  # the `invoke matrix` flags that chose the engine; () in older runs
    harness_version: str | None = None
    git_commit: str | None = None
    matrix_path: str | None = None
    matrix_sha256: str | None = None
    cell_ids: tuple[str, ...] = ()  # every cell of the run, in order
    cells: dict[str, CellFields] = {}  # id -> fields, where run.json has them

    @classmethod
    def from_json(cls, run: Any, problems: list[str] | None = None) -> RunFacts:
        """Never raises: a fact of the wrong type reads as missing, and is said in `problems` when given
        (results.load_run names run.json as corrupt with them)."""
        seen: list[str] = []
        if not isinstance(run, Mapping):
            seen.append(f"run.json should be an object, not {shown(run)}")
        data = RunJson.tolerant(run if isinstance(run, Mapping) else {}, seen)
        ids: list[str] = []
        cells: dict[str, CellFields] = {}
        for i, entry in enumerate(data.cells):
            where = f"cells[{i}]"
            if isinstance(entry, str):
                ids.append(entry)
                continue
            cell_id = entry.get("id") if isinstance(entry, Mapping) else None
            if not isinstance(cell_id, str) or not cell_id:
                seen.append(f"{where} has no cell id" if cell_id is None or cell_id == "" else
                            f"{where}.id should be a string, not {shown(cell_id)}")
                continue
            ids.append(cell_id)
            try:
                cells[cell_id] = CellFields.read(entry, where)
            except RecordError as exc:
                seen.append(str(exc))
        if problems is not None:
            problems.extend(seen)
        host, engine = data.host, data.host.engine or EngineJson(name=data.engine)
        return cls(run_id=data.run_id, started=data.started, hostname=host.hostname, os=host.os, driver=host.driver,
                   host_gpus=host.gpus, gpus=data.gpus, gpu_api=data.gpu_api, engine=engine.name, engine_product=engine.product,
                   engine_version=engine.version,
                   engine_runtimes=engine.runtimes, engine_flags=engine.flags,
                   harness_version=host.harness_version or data.harness_version, git_commit=host.git_commit,
                   matrix_path=data.matrix.path, matrix_sha256=data.matrix.sha256, cell_ids=tuple(dict.fromkeys(ids)),
                   cells=cells)
