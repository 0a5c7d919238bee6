"""matrix.yaml: expansion, ids, n/a pruning, selection. Pure and fast."""

from __future__ import annotations

import pytest

from harness import launch, matrix, selection
from harness.errors import HarnessError, MatrixError

MINIMAL = """
version: 1
stacks:
  matrix:
    cuda: ["12.4.1", "12.1.1"]
    torch: ["2.5.1", "2.1.2"]
    accelerate: ["1.2.1"]
variants: [default, p2p-off]
launchers: [accelerate, torchrun]
"""


def test_default_gpu_matrix_has_runnable_and_na_cells():
    m = matrix.load(matrix.DEFAULT_GPU_MATRIX)
    ids = [c.id for c in m.cells]
    assert len(ids) == len(set(ids))
    assert "cu12.4.1-torch2.5.1-acc1.15.0+p2p-off" in ids
    assert "cu12.4.1-torch2.5.1-acc1.15.0-nccl2.23.4+default" in ids
    assert "cu12.4.1-torch2.5.1-acc1.15.0-nccl2.21.5sys+default" in ids
    assert "cu12.1.1-torch2.1.2-acc0.24.1+default+torchrun" in ids
    na = {c.id: c.na_reason for c in m.cells if c.na_reason}
    assert na["cu12.1.1-torch2.8.0-acc1.15.0+default"] == "torch 2.8 has no cu121 wheel (it has cu126, cu128, cu129)"
    assert {c.variant.name for c in m.cells} == {"default", "p2p-off", "p2p-nvl", "shm-off", "net-only", "ib-off"}
    # torchrun only where the file asks for it
    assert {c.variant.name for c in m.cells if c.launcher == "torchrun"} == {"default", "p2p-off"}
    accs = {c.stack.accelerate for c in m.runnable}
    assert {"0.24.1", "0.27.2", "0.30.1", "1.15.0"} <= accs


def test_cpu_matrix_runs_gloo_stacks_with_two_accelerates():
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    assert all(c.stack.is_cpu and c.na_reason is None for c in m.cells)
    assert {c.stack.accelerate for c in m.cells} >= {"1.15.0", "0.34.2"}
    assert {c.stack.torch for c in m.cells} == {"2.13.0"}
    assert m.ranks == 2
    assert m.cells[0].stack.base == "harness-base:bookworm"
    assert m.cells[0].stack.python == "3.11"


def test_variant_env_and_ids(write_matrix):
    m = matrix.load(write_matrix(MINIMAL))
    cell = next(c for c in m.cells if c.id == "cu12.4.1-torch2.5.1-acc1.2.1+p2p-off+torchrun")
    assert cell.variant.env_dict == {"NCCL_P2P_DISABLE": "1"}
    assert cell.launcher == "torchrun"
    assert cell.stack.torch_index == "https://download.pytorch.org/whl/cu124"
    assert cell.stack.base == "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    assert cell.stack.python == "3.10"


def test_builtin_variants_are_the_documented_ones():
    env = {n: dict(e) for n, e in matrix.BUILTIN_VARIANTS.items()}
    assert env["net-only"] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert env["p2p-nvl"] == {"NCCL_P2P_LEVEL": "NVL"}
    assert env["ib-off"] == {"NCCL_IB_DISABLE": "1"}
    assert env["shm-off"] == {"NCCL_SHM_DISABLE": "1"}


def test_user_defined_variant(write_matrix):
    m = matrix.load(
        write_matrix(
            MINIMAL.replace("variants: [default, p2p-off]", "variants: [ring]")
            + "define:\n  variants:\n    ring: {env: {NCCL_ALGO: Ring, NCCL_NCHANNELS: 4}, description: ring only}\n"
        )
    )
    assert {c.variant.name for c in m.cells} == {"ring"}
    assert m.cells[0].variant.env_dict == {"NCCL_ALGO": "Ring", "NCCL_NCHANNELS": "4"}


def test_incompatible_stacks_are_na_with_reason_not_dropped(write_matrix):
    m = matrix.load(write_matrix(MINIMAL))
    na = {c.stack.id: c.na_reason for c in m.cells if c.na_reason}
    assert na == {"cu12.4.1-torch2.1.2-acc1.2.1": "torch 2.1 has no cu124 wheel (it has cu118, cu121)"}
    assert len(m.cells) == 4 * 2 * 2


def test_github_style_include_and_exclude():
    axes = {"cuda": ["12.1.1", "12.4.1"], "torch": ["2.1.2", "2.5.1"]}
    out = matrix.expand_axes(
        axes,
        include=[
            {"torch": "2.5.1", "nccl": "2.21.5"},  # extends every combination with torch 2.5.1
            {"cuda": "12.8.1", "torch": "2.7.1"},  # matches nothing: a new combination
        ],
        exclude=[{"cuda": "12.4.1", "torch": "2.1.2"}],
    )
    assert out == [
        {"cuda": "12.1.1", "torch": "2.1.2"},
        {"cuda": "12.1.1", "torch": "2.5.1", "nccl": "2.21.5"},
        {"cuda": "12.4.1", "torch": "2.5.1", "nccl": "2.21.5"},
        {"cuda": "12.8.1", "torch": "2.7.1"},
    ]


def test_include_with_another_value_of_an_axis_adds_a_stack(write_matrix):
    text = MINIMAL.replace(
        '    accelerate: ["1.2.1"]\n',
        '    accelerate: ["1.2.1"]\n  include:\n    - {cuda: "12.4.1", torch: "2.5.1", accelerate: "0.24.1"}\n',
    )
    m = matrix.load(write_matrix(text))
    stacks = {s.id for s in m.stacks}
    assert {"cu12.4.1-torch2.5.1-acc1.2.1", "cu12.4.1-torch2.5.1-acc0.24.1"} <= stacks
    assert len(stacks) == 5


def test_nccl_forms(write_matrix):
    text = MINIMAL.replace('    accelerate: ["1.2.1"]\n', '    accelerate: ["1.2.1"]\n    nccl: ["bundled", "2.21.5", "system:2.20.5"]\n')
    m = matrix.load(write_matrix(text))
    vias = {(s.nccl, s.nccl_via) for s in m.stacks}
    assert vias == {("bundled", "bundled"), ("2.21.5", "pip"), ("2.20.5", "system")}
    assert "cu12.4.1-torch2.5.1-acc1.2.1-nccl2.20.5sys" in {s.id for s in m.stacks}


def test_cell_level_exclude_with_globs(write_matrix):
    m = matrix.load(write_matrix(MINIMAL + 'exclude:\n  - {launcher: torchrun, variant: "p2p-*"}\n'))
    assert not [c for c in m.cells if c.launcher == "torchrun" and c.variant.name == "p2p-off"]
    assert [c for c in m.cells if c.launcher == "torchrun" and c.variant.name == "default"]


def test_sizes_accept_units(write_matrix):
    m = matrix.load(write_matrix(MINIMAL + 'bandwidth:\n  sizes: ["4K", "1M", 512, "2GiB"]\n'))
    assert m.bandwidth_sizes == (4096, 1 << 20, 512, 2 << 30)


def test_the_sweep_runs_all_reduce_unless_the_file_names_more_and_the_workload_is_told(write_matrix):
    m = matrix.load(write_matrix(MINIMAL))
    assert m.bandwidth_collectives == ("all_reduce",)
    assert "--collectives" not in launch.workload_args(m, "/out", "cpu", {})
    m = matrix.load(write_matrix(MINIMAL + "bandwidth:\n  collectives: [all_reduce, broadcast, all_gather]\n"))
    assert m.bandwidth_collectives == ("all_reduce", "broadcast", "all_gather")
    args = launch.workload_args(m, "/out", "cpu", {})
    assert args[args.index("--collectives") + 1] == "all_reduce,broadcast,all_gather"
    assert "--collectives" not in launch.bandwidth_args(m)  # shared with the NCCL-only control, which times all-reduce
    for shipped in (matrix.DEFAULT_CPU_MATRIX, matrix.DEFAULT_GPU_MATRIX):  # the issue's "all four in both"
        assert matrix.load(shipped).bandwidth_collectives == ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


@pytest.mark.parametrize(("listed", "words"), [
    ("[all_gather]", "leaves out all_reduce, the compatibility table's column. Fix: keep all_reduce in the list."),
    ("[all_reduce, alltoall]", "names 'alltoall', which the sweep does not know. Fix: write any of all_reduce, "
                               "all_gather, reduce_scatter, broadcast."),
    ("[all_reduce, broadcast, broadcast]", "names a collective twice. Fix: name each once."),
    ("all_reduce", "bandwidth.collectives"),
])
def test_a_bad_list_of_collectives_is_refused_naming_the_key_and_the_fix(write_matrix, listed, words):
    path = write_matrix(MINIMAL + f"bandwidth:\n  collectives: {listed}\n")
    with pytest.raises(MatrixError) as err:
        matrix.load(path)
    assert f"{path}:" in str(err.value) and "bandwidth.collectives" in str(err.value) and words in str(err.value)


@pytest.mark.parametrize(
    "filters, expected",
    [
        ((["torch=2.5.*"], []), 8),
        ((["*+p2p-off"], []), 4),
        ((["torch=2.5.*", "*+p2p-off"], []), 10),
        (([], ["launcher=torchrun"]), 8),
        ((["cuda=12.1.1"], ["variant=default", "launcher=torchrun"]), 2),
        ((["stack=cu12.4.1-*"], []), 8),
    ],
)
def test_select_only_is_or_exclude_wins(write_matrix, filters, expected):
    m = matrix.load(write_matrix(MINIMAL))
    only, exclude = filters
    cells = selection.select(
        m.cells, [selection.parse_filter(f, "--only") for f in only], [selection.parse_filter(f, "--exclude") for f in exclude]
    )
    assert len(cells) == expected


@pytest.mark.parametrize("bad", ["tourch=2.5.1", "=2.5", "torch=", ""])
def test_malformed_filter_names_the_flag(bad):
    with pytest.raises(HarnessError) as err:
        selection.parse_filter(bad, "--only")
    assert "--only" in str(err.value) and "Fix:" in str(err.value)
    assert err.value.code == 2


def test_filter_typo_suggests_the_key():
    with pytest.raises(HarnessError, match="did you mean `torch`"):
        selection.parse_filter("tourch=2.5.1", "--only")
