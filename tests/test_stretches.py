"""The benchmarks' measure of the longest stretch between yields
(``emulation/harness/stretches.py``): marks split the time, skipped stretches are not
counted, the longest is named by the yield points around it."""
from controller.enforcement.desired import DesiredTables
from controller.model.clos import Clos
from emulation.harness import stretches
from emulation.harness.stretches import Stretches, YieldingSwitches


class Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.now


def test_the_longest_stretch_between_marks_is_kept_with_its_ends(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(stretches, "time", clock)
    s = Stretches()
    s.mark("before")  # not started: ignored
    s.start()
    clock.now += 0.010
    s.mark("a")
    clock.now += 0.030
    s.mark("b")
    clock.now += 0.500
    s.skip("fake")  # the fake switches' own work
    clock.now += 0.020
    out = s.stop()
    assert out == {"cpu_ms": 30.0, "wall_ms": 30.0, "at": "a -> b", "yields": 2}
    clock.now += 1.0
    s.mark("after")  # stopped: ignored
    assert s.longest[0] == 0.030


def test_an_unnamed_mark_names_the_controller_code_that_yielded(monkeypatch):
    """``pause`` as the service's ``on_progress``: the stretch names where the controller
    yielded (here the static entries' computation, after every switch: no time allowed)."""
    from controller.enforcement import pacing
    monkeypatch.setattr(pacing, "PAUSE_S", 0.0)
    s = Stretches()
    f = Clos.fat_tree(8).wire()
    s.start()
    DesiredTables(pause=s.pause).tables(f, [])
    out = s.stop()
    assert out["yields"] >= 2 and "clos_rules.py:" in out["at"] and "static_update" in out["at"]


def test_fake_switches_yield_at_installs_and_reads():
    f = Clos.fat_tree(4).wire()
    s = Stretches()
    sw = YieldingSwitches(f.dpids.values(), stretches=s)
    s.start()
    sw.install({})
    sw.read_tables(f.dpids["l0"])
    assert s.stop()["yields"] == 2
