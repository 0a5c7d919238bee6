"""Which stacks cannot exist, and why: table-driven over the compatibility rules."""

from __future__ import annotations

import pytest

from harness import compat
from harness.matrix import Stack


def _stack(cuda="12.4.1", torch="2.5.1", accelerate="1.2.1", nccl_via="bundled", python="3.10") -> Stack:
    return Stack(cuda=cuda, torch=torch, accelerate=accelerate, nccl_via=nccl_via, python=python)


@pytest.mark.parametrize(
    "kw, reason",
    [
        ({}, None),
        ({"cuda": "12.1.1", "torch": "2.1.2"}, None),
        ({"cuda": "12.4.1", "torch": "2.1.2"}, "torch 2.1 has no cu124 wheel (it has cu118, cu121)"),
        ({"cuda": "12.8.1", "torch": "2.8.0"}, None),
        ({"cuda": "13.0.1", "torch": "2.8.0"}, "torch 2.8 has no cu130 wheel (it has cu126, cu128, cu129)"),
        ({"cuda": "12.1.1", "torch": "2.1.2", "python": "3.12"}, "torch 2.1 has no wheel for Python 3.12 (newest 3.11)"),
        ({"cuda": "12.6.3", "torch": "2.11.0", "python": "3.8"}, "torch 2.11 needs Python >= 3.10; the base image has 3.8"),
        ({"cuda": "12.1.1", "torch": "2.1.2", "accelerate": "1.2.1", "python": "3.8"},
         "Accelerate 1.2.1 needs Python >= 3.9; the base image has 3.8"),
        ({"cuda": "12.1.1", "torch": "2.1.2", "accelerate": "1.11.0", "python": "3.9"},
         "Accelerate 1.11.0 needs Python >= 3.10; the base image has 3.9"),
        ({"cuda": "11.8.0", "torch": "1.13.1", "accelerate": "1.6.0", "python": "3.10"}, "Accelerate 1.6.0 needs torch >= 2.0.0"),
        ({"cuda": "12.1.1", "torch": "2.1.2", "accelerate": "0.24.1", "python": "3.8"}, None),
        ({"cuda": "cpu", "torch": "2.13.0", "python": "3.11"}, None),
        ({"cuda": "cpu", "torch": "2.13.0", "nccl_via": "pip", "python": "3.11"}, "a pinned NCCL needs a CUDA stack; CPU cells use gloo"),
        # unknown (newer) versions are not pruned: the build will tell
        ({"cuda": "13.0.1", "torch": "2.14.1", "python": "3.12"}, None),
        ({"cuda": "13.0.1", "torch": "2.14.1", "python": "3.9"}, "torch 2.14 needs Python >= 3.10; the base image has 3.9"),
        ({"torch": "nightly"}, None),
    ],
)
def test_why_not(kw, reason):
    assert compat.why_not(_stack(**kw)) == reason


@pytest.mark.parametrize(
    "base, python",
    [
        ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "3.10"),
        ("nvidia/cuda:13.0.1-runtime-ubuntu24.04", "3.12"),
        ("harness-base:bookworm", "3.11"),
        ("my/own:image", None),
    ],
)
def test_python_of_base(base, python):
    assert compat.python_of_base(base) == python


def test_cuda_wheel_tag():
    assert compat.cuda_wheel_tag("12.4.1") == "cu124"
    assert compat.cuda_wheel_tag("13.0") == "cu130"
    assert compat.cuda_wheel_tag("12.10") == "cu1210"
