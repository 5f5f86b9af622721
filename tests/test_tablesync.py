"""Switches of the declared fabric that connect are probed (LLDP) once the queued switches were
read and repaired (``tablesync.holds``, ``probes_out``), not while their tables are read: at a
k = 16 restart the probes, their packet-ins and the answers they brought competed with the
reads for both CPUs (issue 74). Over fake switches, on a declared k = 4 fat-tree."""
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches
from tests.helpers import FakeClock
from topologies.clos import fattree_fabric


def service(declared: bool = True):
    f = fattree_fabric(4)
    sw = FakeSwitches(f.dpids.values(), f)
    clock = FakeClock()
    svc = RouteService(sw, f if declared else None, clock=clock, sleep=clock.sleep)
    batch = [(d, {p: True for p in f.ports[name].values()}, None) for name, d in f.dpids.items()]
    return f, sw, svc, batch


def test_a_fabric_that_connects_is_probed_once_its_switches_are_read():
    f, sw, svc, batch = service()
    assert svc.note_switches(batch) == {}
    assert sw.packets_out == [] and svc.finder.holding  # every switch still to be read
    svc.sync_queued()
    assert set(svc.installed) == set(f.dpids.values())
    assert not svc.finder.holding
    assert {d for d, _, _ in sw.packets_out} == set(f.dpids.values())  # every switch probed
    assert len(sw.packets_out) == svc.finder.sent["lldp_connect"] > 0


def test_a_switch_whose_read_fails_does_not_hold_the_others_probes():
    f, sw, svc, batch = service()
    bad = f.dpids[f.leaves[0]]
    sw.offline.add(bad)  # its read fails: tried again after a back-off
    svc.note_switches(batch)
    svc.sync_queued()
    assert bad not in svc.installed and bad in svc.reconciler.retry
    assert not svc.finder.holding and sw.packets_out  # the others' went (its own too)


def test_without_a_declared_fabric_switches_are_probed_at_once():
    """Discovery finds the fabric from the probes: nothing to read before them."""
    _, sw, svc, batch = service(declared=False)
    svc.note_switches(batch)
    assert sw.packets_out and not svc.finder.holding


def test_switches_noted_together_bring_their_links_back_in_one_change():
    """``links_back``: the fabric is recomputed once for the switches noted together (once per
    switch was O(switches^2): 0.24 s of a k = 16 start under the lock), one event naming them."""
    f, sw, svc, batch = service()
    svc.note_switches(batch)
    svc.sync_queued()
    leaf = f.leaves[0]
    agg = next(up for low, up in f.links() if low == leaf)
    down = [(f.dpids[low], f.port(low, up), False, None) for low, up in f.links()
            if low in (leaf, agg)]  # the leaf's uplinks, the aggregation switch's to cores
    svc.ports_changed(down)
    assert len(svc.fabric.down) == len(down)
    before = len(svc.state.events)
    again = [b for b in batch if b[0] in (f.dpids[leaf], f.dpids[agg])]  # their ports up again
    assert svc.note_switches(again) == {}
    assert svc.fabric.down == set()
    events = [e for e in svc.state.events[before:] if e.get("links_up")]
    assert len(events) == 1 and len(events[0]["links_up"]) == len(down)
    assert events[0]["cause"] == f"2 switches connected: {', '.join(sorted([leaf, agg]))}"


def test_reading_is_a_switch_read_or_queued_not_one_in_a_back_off():
    """``Reconciler.reading``: what the held probes (``probes_out``) and the silence rounds
    wait for, one definition for both."""
    from controller.enforcement.reconcile import Reconciler
    rec = Reconciler(installer=None, counters={})
    assert not rec.reading()
    rec.pending.add(1)
    assert rec.reading()
    rec.retry[1] = (1, 5.0)  # in a back-off: not waited for
    assert not rec.reading()
    rec.syncing.add(2)
    assert rec.reading()
