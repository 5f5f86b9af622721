"""What the controller computes incrementally or keeps between operations equals what a
computation from scratch gives: the links seen down (``state.failed_links``, an index of link
ends kept per fabric) against the definition, link by link; a fabric's static entries
computed together (link-state answers kept per plane) against each switch alone."""
from __future__ import annotations

import random

import pytest

from controller.enforcement.clos_rules import clos_all_static, clos_static_rules
from controller.model.clos import Clos
from controller.model.fabric import Fabric
from controller.service.state import SwitchSeen, failed_links


def bundled_fat_tree() -> Clos:
    f = Clos.fat_tree(4, 2)
    f.bundles[("l0", "a0_1")] = 2
    f.bundles[("a0_0", "c0_1")] = 3
    return f.wire()


def failed_by_definition(declared, switches, now, dead_after) -> set:
    """Every link, both ends: a member is down where an end port says so or the end switch
    has been disconnected for ``dead_after`` seconds."""
    out = set()
    for lower, upper in declared.links():
        n = len(declared.ports_to(lower, upper))
        failed = set()
        for sw, peer in ((lower, upper), (upper, lower)):
            s = switches.get(declared.dpids.get(sw))
            if s is None:
                continue
            dead = not s.connected and now - s.since >= dead_after
            failed |= {m for m, port in enumerate(declared.ports_to(sw, peer))
                       if dead or s.ports.get(port) is False}
        if len(failed) == n:
            out.add((lower, upper))
        else:
            out |= {(lower, upper, m) for m in failed}
    return out


@pytest.mark.parametrize("fabric", [
    Fabric.generate(3, 4, 2, wiring=True), Clos.fat_tree(4, 2).wire(), bundled_fat_tree(),
    Clos.leaf_spine(2, 3, 1, bundle=2).wire()], ids=["leaf-spine", "fat-tree", "bundled",
                                                      "leaf-spine-bundled"])
def test_failed_links_equal_the_definition_link_by_link(fabric):
    rng = random.Random(7)
    names = list(fabric.dpids)
    for _ in range(60):
        switches = {}
        for name in rng.sample(names, rng.randint(0, len(names))):
            ports = {p: rng.random() > 0.15 for p in ports_up(fabric, name)}
            connected = rng.random() > 0.1
            switches[fabric.dpids[name]] = SwitchSeen(connected, ports, rng.choice([0.0, 9.0]))
        got = failed_links(fabric, switches, now=10.0, dead_after=3.0)
        assert got == failed_by_definition(fabric, switches, 10.0, 3.0)


def ports_up(fabric, name) -> dict:
    return {p: True for ps in fabric.ports[name].values()
            for p in (ps if isinstance(ps, list) else [ps])}


@pytest.mark.parametrize("down, switches", [
    (set(), set()), ({("a0_0", "c0_0")}, set()), ({("l0", "a0_1"), ("a2_1", "c1_1")}, set()),
    ({("a0_0", "c0_1", 1)}, set()), (set(), {"c1_0"}), ({("l5", "a2_0")}, {"a1_1"}),
], ids=["healthy", "core-link", "two-links", "member", "core-switch", "link-and-agg"])
def test_static_entries_of_one_computation_equal_each_switch_alone(down, switches):
    """``clos_all_static`` keeps its planes' link-state answers (``PlaneView(keep=True)``)
    across the switches; each switch computed alone, as before, gives the same."""
    f = bundled_fat_tree().with_down(down)
    f.down_switches = set(switches)
    for ecmp in ("per-tier", "polarised"):
        together = clos_all_static(f, ecmp)
        for sw in f.switches():
            assert together[f.dpids[sw]] == clos_static_rules(f, sw, ecmp), (sw, ecmp)
