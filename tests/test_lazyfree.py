"""topicsrv/lazyfree.py: big lists are emptied in slices between loop turns; without its task
nothing is kept."""

from __future__ import annotations

import trio
import trio.testing

from topicsrv.lazyfree import SLICE, LazyFree


def test_without_its_task_nothing_is_kept() -> None:
    lazy = LazyFree()
    items = list(range(SLICE * 3))
    lazy.add(items)
    assert not lazy.pending and len(items) == SLICE * 3  # the caller's list, untouched


async def test_a_big_list_is_emptied_one_slice_per_turn_and_a_small_one_is_not_kept() -> None:
    lazy = LazyFree()
    seen: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lazy.run)
        await trio.testing.wait_all_tasks_blocked()
        small = list(range(10))
        lazy.add(small)
        assert not lazy.pending
        big = list(range(SLICE * 3 + 5))
        lazy.add(big)
        assert lazy.pending and len(big) == SLICE * 3 + 5
        while lazy.pending:  # another task: it runs between the slices
            seen.append(len(big))
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert big == [] and lazy.freed == SLICE * 3 + 5
    assert seen[0] == SLICE * 3 + 5 and len(seen) >= 4  # four slices, never all at once
    assert not lazy.running
