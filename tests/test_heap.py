"""The shell keeps full garbage collections short (``controller/shell/heap.py``): after a slow
one it freezes what survived, and once the frozen heap has doubled it thaws and collects
everything once, so dead frozen cycles cannot pile up."""
from __future__ import annotations

import gc

from controller.shell.heap import Heap


class FakeGc:
    """The ``gc`` calls ``Heap`` makes: ``collect()`` runs the callbacks of a full collection
    that took ``took`` seconds of ``clock``; ``live`` objects, ``frozen`` of them frozen."""

    def __init__(self, live: int = 100):
        self.callbacks: list = []
        self.live, self.frozen, self.now = live, 0, 0.0
        self.calls: list[str] = []

    def clock(self) -> float:
        return self.now

    def freeze(self) -> None:
        self.frozen = self.live
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.frozen = 0
        self.calls.append("unfreeze")

    def get_freeze_count(self) -> int:
        return self.frozen

    def collect(self, generation: int = 2, took: float = 0.05) -> int:
        self.calls.append(f"collect{generation}")
        for cb in list(self.callbacks):
            cb("start", {"generation": generation})
        self.now += took
        for cb in list(self.callbacks):
            cb("stop", {"generation": generation, "collected": 0, "uncollectable": 0})
        return 0


def heap(fake: FakeGc) -> Heap:
    h = Heap(fake, clock=fake.clock, slow_s=0.01, regrow=2.0)
    h.start()
    return h


def test_the_start_freezes_what_it_built_and_watches_full_collections():
    fake = FakeGc()
    h = heap(fake)
    assert fake.calls == ["freeze"] and h.base == 100 and len(fake.callbacks) == 1
    h.stop()
    assert fake.callbacks == []


def test_a_slow_full_collection_freezes_what_survived_at_the_next_round():
    fake = FakeGc()
    h = heap(fake)
    assert h.tick() is None  # nothing collected yet
    fake.live = 150
    fake.collect(took=0.05)
    assert h.tick() == "frozen" and fake.frozen == 150
    assert h.tick() is None  # once per slow collection


def test_fast_and_young_collections_freeze_nothing():
    fake = FakeGc()
    h = heap(fake)
    fake.collect(took=0.005)
    fake.collect(generation=0, took=0.5)
    fake.collect(generation=1, took=0.5)
    assert h.tick() is None and fake.calls == ["freeze", "collect2", "collect0", "collect1"]


def test_a_frozen_heap_grown_twice_is_thawed_and_collected_once():
    fake = FakeGc()
    h = heap(fake)
    fake.live = 201  # past twice the 100 frozen at the start
    fake.collect()
    assert h.tick() == "thawed"
    assert fake.calls[-4:] == ["freeze", "unfreeze", "collect2", "freeze"]
    assert h.base == 201 and h.thaws == 1
    assert h.tick() is None  # the thaw's own long collection asks for nothing more


def test_with_the_real_collector_a_slow_collection_freezes_the_heap():
    """Every full collection counts as slow here (``slow_s`` 0): the round freezes, and the
    permanent generation holds what was live. The process's heap is thawed after."""
    h = Heap(slow_s=0.0, regrow=1e9)
    try:
        h.start()
        held = [[i] for i in range(1000)]  # tracked objects made after the start
        gc.collect()
        assert h.slow and h.tick() == "frozen"
        assert gc.get_freeze_count() >= len(held)
    finally:
        h.stop()
        gc.unfreeze()
