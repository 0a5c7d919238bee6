"""Builds and cells overlapped: a cell starts as soon as its image is ready, while the next images build,
under the rules of before (a slot of Engine.concurrent_cells, GPUs never held by two running cells, the
matrix's order otherwise). schedule.startable is the pure step, specified by a table."""

from __future__ import annotations

import pytest

from harness.schedule import Waiting, startable

G01 = frozenset({"0", "1"})
G0, G1 = frozenset({"0"}), frozenset({"1"})


@pytest.mark.parametrize("waiting, ready, running, slots, starts", [
    # nothing ready: nothing starts
    ([Waiting("a"), Waiting("b")], set(), [], 1, ()),
    # one slot: the first ready cell
    ([Waiting("a"), Waiting("a")], {"a"}, [], 1, (0,)),
    # a cell whose image is building is passed by a later one whose image is ready
    ([Waiting("a"), Waiting("b"), Waiting("b")], {"b"}, [], 1, (1,)),
    ([Waiting("a"), Waiting("b"), Waiting("b")], {"b"}, [], 2, (1, 2)),
    # the slots bound it: --jobs (Engine.concurrent_cells), running cells counted
    ([Waiting("a")] * 4, {"a"}, [], 3, (0, 1, 2)),
    ([Waiting("a")] * 4, {"a"}, [frozenset()], 3, (0, 1)),
    ([Waiting("a")] * 4, {"a"}, [frozenset()] * 3, 3, ()),
    # GPUs: never held by two running cells; cells holding none (CPU, or each on nodes of its own) never wait for GPUs
    ([Waiting("a", G01), Waiting("a", G01)], {"a"}, [], 2, (0,)),
    ([Waiting("a", G0), Waiting("a", G1)], {"a"}, [], 2, (0, 1)),
    ([Waiting("a", G01)], {"a"}, [G1], 2, ()),
    ([Waiting("a"), Waiting("a", G0)], {"a"}, [G01], 3, (0,)),
    # ... and a ready cell waiting for its GPUs is not passed by a later ready one: the order stays
    ([Waiting("a", G01), Waiting("a")], {"a"}, [G0], 3, ()),
    ([Waiting("a", G0), Waiting("a", G01), Waiting("a", G1)], {"a"}, [], 3, (0,)),
    # but a cell whose image is building never holds anything up
    ([Waiting("b", G01), Waiting("a", G01)], {"a"}, [], 2, (1,)),
])
def test_the_next_cells_to_start(waiting, ready, running, slots, starts):
    assert startable(waiting, ready, running, slots) == starts
