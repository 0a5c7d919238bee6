"""The harness's own files, damaged for real (issue 22): wheel locks, the file-hash cache, publish's
sidecars, the Slurm job notes and builds.json, each written here the way a tampering hand, a FIFO or a
bad disk leaves it. A lock is refused with one paragraph naming the file, the key and the fix (exit 4);
a cache, a sidecar, a note and builds.json count as absent (and are said where that hides something).
Never a traceback, never a wait on a FIFO. Also: a --run-id that names a file is blamed on --run-id.

The wheel lock and the hash cache are read only by a build (and --dry-run), which needs a Docker engine:
they are driven through images.prepare, the step both take, with the store's files written for real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import images, matrix, wheelhouse
from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_OK, guarded
from harness.images import BuildResult
from harness.pipeline import write_builds

from .conftest import REPO

GOLDEN = Path(__file__).parent / "fixtures" / "golden-run"
HINTS = Path(__file__).parent / "fixtures" / "golden-hints.yaml"


def _harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _damage(path: Path, how: bytes | str | None) -> None:
    """Leave `path` damaged: these bytes or this text, a FIFO (None), or a folder ("<folder>")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if how is None:
        os.mkfifo(path)
    elif how == "<folder>":
        path.mkdir()
    elif isinstance(how, bytes):
        path.write_bytes(how)
    else:
        path.write_text(how)


# ------------------------------------------------------------------------------------ wheel locks
HUGE = '{"wheels": ["a-1.0-py3-none-any.whl"], "pad": "' + "x" * (2 << 20) + '"}'
LOCKS: dict[str, tuple[bytes | str | None, str]] = {
    "wheels a number": ('{"wheels": 5}', "wheels should be a list, not number 5"),
    "wheels a string": ('{"wheels": "torch-2.13.0-py3-none-any.whl"}', "wheels should be a list, not string"),
    "a wheel a number": ('{"wheels": [1]}', "wheels[0] should be a string, not number 1"),
    "a wheel up and out": ('{"wheels": ["../outside-1.0-py3-none-any.whl"]}',
                           "wheels[0] should be a wheel's file name in the store (no folder, no `..`, ending in .whl)"),
    "a wheel by absolute path": ('{"wheels": ["{outside}"]}', "wheels[0] should be a wheel's file name in the store"),
    "a wheel in a folder": ('{"wheels": ["sub/a-1.0-py3-none-any.whl"]}', "wheels[0] should be a wheel's file name"),
    "a hidden wheel": ('{"wheels": [".a-1.0-py3-none-any.whl"]}', "wheels[0] should be a wheel's file name"),
    "no wheels": ('{"requirements": ["torch==2.13.0"]}', "wheels is missing"),
    "a list": ("[]", "not a JSON object but list []"),
    "not JSON": ('{"wheels": [', "not JSON"),
    "not UTF-8": (b'{"wheels": ["\xff"]}', "not UTF-8 text"),
    "a FIFO": (None, "not a regular file"),
    "a folder": ("<folder>", "not a regular file"),
    "over 1 MiB": (HUGE, "larger than 1048576 bytes"),
}


@pytest.mark.parametrize("name", LOCKS)
def test_a_damaged_wheel_lock_is_one_paragraph_naming_it_and_the_fix(tmp_path, capsys, name):
    how, said = LOCKS[name]
    outside = tmp_path / "outside-1.0-py3-none-any.whl"  # what a lock pointing out of the store would have built in
    outside.write_bytes(b"not in the store")
    stack = matrix.Stack(**{"cuda": "cpu", "torch": "2.13.0", "accelerate": "1.15.0", "base": "harness-base:bookworm",
                            "python": "3.11", "template": "cpu", "torch_index": "https://download.pytorch.org/whl/cpu"})
    store = tmp_path / "store"
    key = wheelhouse.lock_key(images.requirements(stack), stack.python, stack.torch_index)
    lock = store / wheelhouse.LOCKS / f"{key}.json"
    _damage(lock, how.replace("{outside}", str(outside)) if isinstance(how, str) else how)
    log = tmp_path / "pip.log"
    code = guarded(lambda: images.prepare(stack, images.BuildOptions(wheelhouse=store), log).tag and 0)
    err = capsys.readouterr().err
    assert code == EXIT_INFRA, err
    assert err.startswith(f"error: {lock}: not a wheel lock: {said}") and err.count("\n") == 1, err
    assert "Fix: delete it: the next build resolves that requirement list again" in err
    assert not log.exists()  # pip never ran: a damaged lock is not silently resolved again


def test_a_lock_the_store_wrote_reads_back():
    lock = wheelhouse.WheelLock(requirements=("torch==2.13.0",), python="3.11", index="",
                                wheels=("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",))
    assert wheelhouse.WheelLock.read(json.loads(json.dumps(lock.to_json()))) == lock


# ------------------------------------------------------------------------------------ the hash cache
ENTRY = [1, 2, "0" * 64]
CACHES: dict[str, bytes | str | None] = {
    "a list": "[1, 2]",
    "an entry a number": json.dumps({"/x": 5}),
    "an entry too short": '{"{big}": [{size}]}',
    "an entry's sha a number": '{"{big}": [{size}, {mtime}, 3]}',  # size and mtime match: the entry is used
    "an entry's sha not hex": '{"{big}": [{size}, {mtime}, "../../etc/passwd"]}',
    "an entry's size a string": '{"{big}": ["{size}", {mtime}, "%s"]}' % ("0" * 64),
    "not JSON": "{",
    "not UTF-8": b"\xff\xfe",
    "a FIFO": None,
    "over 16 MiB": json.dumps({"/x": ENTRY, "pad": "x" * (17 << 20)}),
}


@pytest.mark.parametrize("name", CACHES)
def test_a_damaged_hash_cache_is_a_cache_hashed_again(tmp_path, monkeypatch, name):
    monkeypatch.setattr(images, "HASH_CACHE", tmp_path / "cache" / "file-hashes.json")
    big = tmp_path / "big.whl"
    big.write_bytes(b"a" * (images.BIG_FILE + 1))
    how, st = CACHES[name], big.stat()
    if isinstance(how, str):
        how = how.replace("{big}", str(big.resolve())).replace("{size}", str(st.st_size)).replace("{mtime}", str(st.st_mtime_ns))
    _damage(images.HASH_CACHE, how)
    import hashlib

    assert images.file_sha(big) == hashlib.sha256(big.read_bytes()).hexdigest()
    cache = json.loads(images.HASH_CACHE.read_text())  # written back whole, a regular file again
    assert cache[str(big.resolve())][2] == hashlib.sha256(big.read_bytes()).hexdigest()


def test_good_entries_of_a_partly_damaged_hash_cache_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "HASH_CACHE", tmp_path / "file-hashes.json")
    images.HASH_CACHE.write_text(json.dumps({"/kept": ENTRY, "/bad": [1, 2]}))
    big = tmp_path / "big.whl"
    big.write_bytes(b"b" * (images.BIG_FILE + 1))
    images.file_sha(big)
    assert set(json.loads(images.HASH_CACHE.read_text())) == {"/kept", str(big.resolve())}


# ------------------------------------------------------------------------------------ publish's sidecars
SIDECARS: dict[str, bytes | str | None] = {
    "a list": '["counts"]',
    "counts a string": '{"run": "x", "started": "t", "counts": "3 pass"}',
    "a count a string": '{"run": "x", "started": "t", "counts": {"pass": "3"}}',
    "a count negative": '{"run": "x", "started": "t", "counts": {"pass": -1}}',
    "started a number": '{"run": "x", "started": 5, "counts": {"pass": 1}}',
    "not JSON": "{",
    "not UTF-8": b"\xff",
    "a FIFO": None,
    "a folder": "<folder>",
    "over 1 MiB": '{"pad": "' + "x" * (2 << 20) + '"}',
}


def test_damaged_sidecars_of_other_runs_never_stop_a_publish(tmp_path):
    """Every run published earlier with a damaged sidecar: the next publish exits 0, lists those runs
    without a summary and names each file with the fix; the run being published gets its own (a FIFO
    where its sidecar goes is replaced, not waited on)."""
    results, docs = tmp_path / "results", tmp_path / "docs"
    shutil.copytree(GOLDEN, results / "good")
    host = docs / "rtx-box"
    for n, how in enumerate(SIDECARS.values()):
        _damage(host / f"old{n}.json", how)
        (host / f"old{n}.md").write_text("# an earlier run\n")
    _damage(host / "good.json", None)
    proc = _harness("publish", "--run", "good", "--to", str(docs), "--results", str(results),
                    env={"HARNESS_HINTS": str(HINTS), "DOCKER_HOST": "unix:///nonexistent"})
    assert proc.returncode == EXIT_OK and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for n, name in enumerate(SIDECARS):
        line = next((l for l in proc.stderr.splitlines() if l.startswith(f"{host / f'old{n}.json'}: ")), None)
        assert line is not None and "not a published run's summary" in line, (name, proc.stderr[-3000:])
        assert line.endswith("Fix: publish that run again (its sidecar is written anew), or delete the file."), line
    index = (docs / "index.md").read_text()
    assert [l for l in index.splitlines() if l.startswith("- [old")] == [
        f"- [old{n}](rtx-box/old{n}.md)" for n in sorted(range(len(SIDECARS)), key=str, reverse=True)]
    good = next(l for l in index.splitlines() if l.startswith("- [good]"))
    assert good.endswith("(2026-01-15T10:00:00+0000): 1 build-error, 1 fail, 1 hang, 1 n/a, 2 pass"), good
    assert json.loads((host / "good.json").read_text())["run"] == "good"


# ------------------------------------------------------------------------------------ job notes
NOTES: dict[str, bytes | str | None] = {"a FIFO": None, "a folder": "<folder>", "over 4 KiB": "h/b/1/2" * 1000,
                                         "not UTF-8": b"\xff\xfe", "not a marker": "nonsense"}


def test_damaged_job_notes_are_passed_over_by_every_command(tmp_path):
    """The notes in the cache folder that send a command's sweep to Slurm: a FIFO among them hung every
    command (report included) for ever."""
    cache = tmp_path / "cache"
    for n, how in enumerate(NOTES.values()):
        _damage(cache / "nccl-harness" / "slurm-owners" / f"{n}-{n}", how)
    (tmp_path / "results" / "r1" / "cells").mkdir(parents=True)
    proc = _harness("report", "--results", str(tmp_path / "results"),
                    env={"XDG_CACHE_HOME": str(cache), "DOCKER_HOST": "unix:///nonexistent"})
    assert proc.returncode == EXIT_OK and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout.startswith("# ")


# ------------------------------------------------------------------------------------ builds.json
@pytest.mark.parametrize("how", ['{"images": {}, "cells": []}', '{"images": [], "cells": {}}', "[]", "{", None],
                         ids=["cells a list", "images a list", "a list", "not JSON", "a FIFO"])
def test_a_damaged_builds_json_on_resume_is_written_anew(tmp_path, how):
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    cells = list(m.runnable)
    stack = cells[0].stack.id
    path = tmp_path / "builds.json"
    _damage(path, how)
    write_builds(path, m, cells, {stack: BuildResult(stack, "nccl-harness/a:1", "built", seconds=1.0)}, add=True)
    record = json.loads(path.read_text())
    assert {k: v["status"] for k, v in record["images"].items()} == {stack: "built"} and record["cells"] == {}


# ------------------------------------------------------------------------------------ --run-id
def test_a_run_id_that_names_a_file_is_blamed_on_run_id(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "taken").write_text("not a run\n")
    proc = _harness("matrix", "--engine", "host", "--matrix", "matrix-cpu.yaml", "--results", str(tmp_path),
                    "--run-id", "taken")
    assert proc.returncode == EXIT_BAD_INPUT and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == (f"error: --run-id taken: {tmp_path / 'taken'} is a file, not a run folder. "
                                            "Fix: pass another --run-id (or move that file away).")
    # a --results that is a file is still --results's fault
    proc = _harness("matrix", "--engine", "host", "--matrix", "matrix-cpu.yaml", "--results", str(tmp_path / "taken"),
                    "--run-id", "r")
    assert proc.returncode == EXIT_BAD_INPUT and proc.stderr.splitlines()[-1].startswith(f"error: --results {tmp_path / 'taken'}:")
