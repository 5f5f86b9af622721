"""Bundles (parallel links between two switches) in the controller: the wiring declares a
bundle's ports as a list in member order (``model.clos_wiring``), and the shared port helpers
(``model.fabric.HostLookup``) read it."""
import pytest

from controller.errors import InputError
from controller.model.clos import Clos


def bundled_fat_tree() -> Clos:
    """A k = 4 fat-tree with a two-link and a three-link bundle, of unequal sizes."""
    f = Clos.fat_tree(4, 2, link_gbps=0.02)
    f.bundles[("l0", "a0_1")] = 2
    f.bundles[("a0_0", "c0_1")] = 3
    return f.wire()


def test_wire_numbers_members_consecutively_and_round_trips():
    f = Clos.leaf_spine(2, 3, 2, bundle=2).wire()
    assert f.ports["l0"] == {"s0": [1, 2], "s1": [3, 4], "h0_0": 5, "h0_1": 6}
    assert f.ports["s1"] == {"l0": [1, 2], "l1": [3, 4], "l2": [5, 6]}
    assert f.port("l0", "s1") == 3 and f.ports_to("l0", "s1") == (3, 4)
    assert f.ports_to("l0", "h0_0") == (5,)
    assert f.peer("l0", 4) == "s1" and f.member("l0", 4) == 1 and f.member("l0", 5) == 0
    back = Clos.from_dict(f.to_dict())
    assert back.to_dict() == f.to_dict() and back.ports_to("s1", "l2") == (5, 6)
    t = bundled_fat_tree()
    assert t.ports["l0"] == {"a0_0": 1, "a0_1": [2, 3], "h0_0": 4, "h0_1": 5}
    assert t.ports["c0_1"]["a0_0"] == [1, 2, 3] and t.ports["c0_1"]["a1_0"] == 4
    assert Clos.from_dict(t.to_dict()).to_dict() == t.to_dict()


def test_single_links_are_wired_as_before():
    f = Clos.fat_tree(4, 2).wire()
    assert all(isinstance(p, int) for ports in f.ports.values() for p in ports.values())


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["ports"]["l0"].update(s1=3), ["l0", "2 port number(s) for s1", "3"]),
    (lambda d: d["ports"]["l0"].update(s1=[3, 4, 7]), ["l0", "2 port number(s) for s1"]),
    (lambda d: d["ports"]["l0"].update(s1=[3, 5]), ["l0", "port number twice"]),
    (lambda d: d["ports"]["l0"].update(h0_0=[5]), ["l0", "1 port number(s) for h0_0"]),
    (lambda d: d["ports"]["s0"].update(l1=[3, "x"]), ["s0", "no port number for l1"]),
])
def test_bundle_wiring_errors_name_the_switch(edit, words):
    doc = Clos.leaf_spine(2, 3, 2, bundle=2).wire().to_dict()
    edit(doc)
    with pytest.raises(InputError) as e:
        Clos.from_dict(doc)
    assert all(w in str(e.value) for w in words), str(e.value)
