"""srv6 mode on several planes (issue 73): each plane's lists leave by the host's interface of
that plane, the documents say each list's plane, the duties watch every plane."""
from __future__ import annotations

import ipaddress

import pytest

from controller.enforcement.srv6 import SidPlan
from controller.enforcement.srv6_config import host_config
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from controller.service import duties


def two_planes(k: int = 4) -> Clos:
    c = Clos.fat_tree(k, planes=2)
    return c.wire(wire(c))


def test_each_planes_locators_route_by_its_own_interface():
    f = two_planes()
    plan = SidPlan.of(f)
    nets = {q: plan.plane_prefixes(q) for q in range(2)}
    for s in f.switches():
        loc = ipaddress.IPv6Network(plan.locator(s))
        inside = [q for q, ns in nets.items() if any(loc.subnet_of(n) for n in ns)]
        assert inside == [f.plane_of[s]], (s, inside)
    lines = host_config(plan, "h0_0")
    for q in range(2):
        dev = f"h0_0-eth{q}"
        routed = {line.split()[2] for line in lines if line.startswith("route replace fcbb")
                  and line.endswith(f"dev {dev}")}
        assert routed == {str(n) for n in nets[q]}, (q, routed)
    assert not any(str(plan.block) in line for line in lines)  # not the whole block on one


def test_duties_watch_every_link_of_every_plane():
    f = two_planes()
    got = {h: duties.of(f, h) for h in f.host_leaves}
    crossed = duties.crossings(f, got)
    assert min(len(h) for h in crossed.values()) >= duties.COVER
    for paths in got.values():
        for path, _dst in paths:
            assert len({f.plane_of[s] for s in path}) == 1  # a path stays in its plane


def test_the_agent_steers_and_probes_each_plane_by_its_interface_and_address():
    from types import SimpleNamespace

    from controller.agent import options, probe, steering
    from controller.errors import InputError
    doc = {"block": "fcbb:bbbb::/32", "addresses": ["10.0.0.1", "10.16.0.1"], "flows": [
        {"dst_ip": "10.16.1.1", "form": "usid", "sids": ["fcbb:bbbb:6:8:f001::"], "plane": 1,
         "backup": {"form": "usid", "sids": ["fcbb:bbbb:7:8:f001::"]}},
        {"dst_ip": "10.0.1.1", "form": "usid", "sids": ["fcbb:bbbb:3:2:f001::"]}],
        "probes": [{"path": ["l0_p1", "s0_p1", "l1_p1"], "dst_ip": "10.16.1.2", "form": "usid",
                    "sids": ["fcbb:bbbb:6:8:f002::"], "plane": 1}]}
    read = steering.read(doc)
    both = {"h-eth0", "h-eth1"}.__contains__  # the host's interfaces: --dev's default
    want = steering.wanted(read.steers, {}, options.devices(SimpleNamespace(dev=None, host="h"),
                                                            both))
    routes = sorted(w.route for w in want.values())
    assert routes[0].startswith("10.0.1.1/32") and " dev h-eth0 " in routes[0]
    assert routes[1].startswith("10.16.1.1/32") and " dev h-eth1 " in routes[1]
    src = probe.sources(read.steers, read.probes, read.plane_ips)
    assert set(src.values()) == {"10.16.0.1"} and len(src) == 3  # plane 1's lists only
    one = options.devices(SimpleNamespace(dev=None, host="h"), {"h-eth0"}.__contains__)
    with pytest.raises(InputError, match="on plane 1: this agent has 1 interface"):
        steering.wanted(read.steers, {}, one)  # a host without plane 1's interface
    bad = {**doc, "flows": [{**doc["flows"][0], "plane": 99}]}
    with pytest.raises(InputError, match="plane 99 is not an integer"):
        steering.read(bad)



def test_a_plane_without_an_address_keeps_its_place_in_the_document():
    """The agent reads ``addresses`` by position (plane q's is the q-th): a host without an
    address on one plane gets null there, not a list that shifts later planes down."""
    from types import SimpleNamespace

    from controller.agent import steering
    from controller.service.segments import segments_view
    c = Clos.fat_tree(4, planes=3)
    wiring = wire(c)
    ips = wiring["host_ip"]["h0_0"]
    wiring["host_ip"]["h0_0"] = [ips[0], "", ips[2]]
    f = c.wire(wiring)
    doc = segments_view(SimpleNamespace(fabric=f, routing=None, jobs={}, version=1), "h0_0")
    assert doc["addresses"] == [ips[0], None, ips[2]]
    assert steering.read({**doc, "flows": [], "probes": []}).plane_ips == {0: ips[0],
                                                                          2: ips[2]}
