"""The facts hints are decided by, as the rank measures them (issue 23 item 1; workload/fingerprint.py):
whether /dev/shm takes a file (a permissions problem and a size problem read alike in NCCL's words),
whether the libcuda mapped is a CUDA forward-compatibility copy, NVML's compute modes or its version
mismatch, and the lowest compute capability; each read back by the harness (payloads.Fingerprint) and
turned into the hint's fact (hints.facts). The read-only /dev/shm is a real one: a tmpfs mounted ro."""

from __future__ import annotations

import pytest

from harness import hints
from harness.payloads import Fingerprint
from harness.workload import fingerprint

from .conftest import mounted_tmpfs


@pytest.fixture
def read_only_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / "shm", "ro,size=1m,mode=1777") as mnt:
        yield mnt


def test_a_shm_the_rank_can_write_to_is_said_writable_and_left_clean(tmp_path):
    info = fingerprint.shm_info(str(tmp_path))
    assert info["writable"] is True and info["bytes"] > 0 and len(info["mode"]) == 4
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


def test_a_read_only_shm_is_said_not_writable_with_the_error(read_only_tmpfs):
    info = fingerprint.shm_info(str(read_only_tmpfs))
    assert info["writable"] is False and "Read-only file system" in info["write_error"]
    assert info["mode"] == "1777"  # its mode says anyone may write: only the attempt tells


def test_a_missing_shm_is_no_fact():
    assert fingerprint.shm_info("/nonexistent/shm") is None


@pytest.mark.parametrize("mapped, compat", [
    ("/usr/local/cuda-12.4/compat/libcuda.so.550.54.15", True),
    ("/usr/local/cuda/compat/lib.real/libcuda.so.1", True),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", False),
])
def test_the_mapped_libcuda_says_whether_it_is_a_compat_copy(tmp_path, mapped, compat):
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f10 r-xp 00000000 08:01 123 {mapped}\n7f20-7f30 r-xp 00000000 08:01 124 /usr/lib/libc.so.6\n")
    assert fingerprint.libcuda(str(maps)) == {"path": mapped, "compat": compat, "all": [mapped]}
    empty = tmp_path / "none"
    empty.write_text("")
    assert fingerprint.libcuda(str(empty)) is None


def test_nvml_is_no_fact_where_there_is_no_nvidia_library():
    try:
        import ctypes

        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        assert fingerprint.nvml_facts() is None
    else:  # a GPU host: its answer has the shape hints read
        found = fingerprint.nvml_facts()
        assert set(found) >= {"version_mismatch"}


def test_the_facts_reach_the_hints_as_written_by_a_rank():
    fp = {"shm": {"bytes": 64 << 20, "writable": False, "mode": "0755"},
          "libcuda": {"path": "/usr/local/cuda/compat/libcuda.so.1", "compat": True},
          "nvml": {"compute_modes": ["default", "exclusive_process"], "version_mismatch": False},
          "gpus": [{"index": 0, "capability": "8.0"}, {"index": 1, "capability": "7.5"}]}
    parsed = Fingerprint.model_validate(fp)
    assert (parsed.shm_writable, parsed.compat_loaded, parsed.compute_modes, parsed.min_capability) == \
        (False, True, ("default", "exclusive_process"), "7.5")
    record = {"schema": 1, "cell": {"id": "c"}, "outcome": {"status": "fail"},
              "attempts": [{"attempt": 1, "outcome": {"status": "fail"},
                            "raw": {"phases": {"fingerprint": {"fingerprint": fp}}}}]}
    f = hints.facts(record)
    assert (f.shm_writable, f.compat_loaded, f.compute_modes, str(f.min_capability), f.nvml_mismatch) == \
        (False, True, ("default", "exclusive_process"), "7.5", False)


def test_an_older_record_without_them_leaves_them_unknown():
    f = hints.facts({"schema": 1, "cell": {"id": "c"}, "outcome": {"status": "fail"},
                     "attempts": [{"attempt": 1, "raw": {"phases": {"fingerprint": {"fingerprint": {"shm": {"bytes": 1}}}}}}]})
    assert (f.shm_writable, f.compat_loaded, f.compute_modes, f.min_capability, f.nvml_mismatch) == \
        (None, None, (), None, None)
