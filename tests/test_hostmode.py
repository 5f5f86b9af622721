"""Host mode on the fake switch tables: the leaves' static source-port pipeline, ports learned
from probes (never guessed), every planned flow reaching its planned spine with its chosen
source port, new ports after a failure, and the export for job launchers."""
import json

import pytest

from controller.enforcement.clos_hostmode import clos_host_static_rules as host_static_rules
from controller.enforcement.clos_rules import clos_static_rules
from controller.enforcement.desired import desired_tables
from controller.enforcement.echo import echo_entry
from controller.enforcement.hostmode import (
    PORT_MIN,
    HostPorts,
    PortMap,
    choose_ports,
    first_window,
    ip_checksum,
    make_probes,
    map_key,
    parse_probe,
    probe_packet,
)
from controller.enforcement.openflow import COOKIE_STATIC, Message
from controller.enforcement.rules import sport_buckets
from controller.model.clos import Clos, as_clos
from controller.model.jobs import Flow
from controller.service import api
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import FakeSwitches, trace


def wired(spines=4, leaves=4, hosts=2, down=()):
    """A wired leaf-spine as the controller serves it: the Clos of one plane."""
    f = as_clos(Clos.generate(spines, leaves, hosts, 0.01, wiring=True))
    return f.with_down(set(down)) if down else f


def live_uplinks(f, leaf):
    return [s for s in f.planes[0].aggs[0] if (leaf, s) not in f.down]


def key_of(f, src="h0_0", dst="h1_0", proto=17):
    """The leaf-scope map key of a flow: (leaf, the spines that reach the destination, as the
    pipeline's class, proto)."""
    return map_key(f, Flow("j", src, dst, 1.0, proto, 0, 4791 if proto == 17 else 80))


def via(f, src, dst, spine, share=1.0):
    """A route part over ``spine``: its path leaf, spine, leaf."""
    return ((f.hosts[src], spine, f.hosts[dst]), share)


def start(f, mode="host", store=None, **kw):
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    svc = RouteService(sw, f, mode=mode, store=store, **kw)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return sw, svc


def post(svc, doc):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def ring(jid, ranks, **extra):
    return {"id": jid, "collective": "ring_allreduce", "ranks": ranks, "bytes": 8e6,
            "proto": "udp", "dport": 4791, **extra}


def parts_of(route):
    """(spine, sport) of every part of a route."""
    if "split" in route:
        return [(p["spine"], p["sport"]) for p in route["split"]]
    return [(route["spine"], route["sport"])]


def assert_on_planned_spines(f, sw, routes):
    """Every part, sent with its chosen source port, crosses exactly its planned spine."""
    checked = 0
    for r in routes:
        for spine, sport in parts_of(r):
            path, reached, labels = trace(f, sw, r["src"], r["dst"], r["proto"], sport,
                                          r["dport"])
            assert reached == r["dst"] and labels == []
            if spine is None:
                assert len(path) == 1  # intra-leaf: delivered locally
            else:
                assert path == [f.hosts[r["src"]], spine, f.hosts[r["dst"]]], (r, sport, path)
                checked += 1
    return checked


def job_entries(sw):
    return sum(1 for rules in sw.rules.values() for r in rules.values()
               if r.cookie != COOKIE_STATIC)


# ---- the static pipeline ----------------------------------------------------------------------
@pytest.mark.parametrize("spines, down, buckets", [(4, (), 4), (4, [("l0", "s1")], 4),
                                                   (4, [("l0", "s1"), ("l0", "s2")], 2),
                                                   (3, (), 4), (1, (), 1)])
def test_leaf_pipeline_is_per_bucket_and_covers_every_live_uplink(spines, down, buckets):
    f = wired(spines, 2, 2, down)
    rules = host_static_rules(f, "l0")
    assert len(rules) == 2 * buckets == 2 * sport_buckets(len(live_uplinks(f, "l0")))
    outs = {a[1] for r in rules for a in r.actions}
    assert outs == {f.port("l0", s) for s in live_uplinks(f, "l0")}
    assert all(r.cookie == COOKIE_STATIC for r in rules)
    spine_rules = host_static_rules(f, "s0")
    assert len(spine_rules) == 1 and spine_rules[0].actions == (("controller",),)


def test_a_leaf_sends_no_port_to_a_spine_that_cannot_reach_the_destination():
    """Every source port of every host, towards every host, in both protocols, arrives: a
    destination leaf some uplinks cannot reach has buckets of its own (acknowledgements of
    planned flows use ports the controller never chose)."""
    f = wired(4, 4, 2, [("l0", "s1"), ("l2", "s0"), ("l2", "s3")])
    sw, svc = start(f)
    assert post(svc, ring("a", ["h0_0", "h1_0"]))[0] == 201  # installs the pipeline
    l1 = host_static_rules(f, "l1")
    # l1: 8 default entries, classes towards l0 (s0, s2, s3) and l2 (s1, s2): 8 + 1 and 4 + 1
    # entries in their tables, and one goto per destination leaf (its prefix, 10.0.i.0/30)
    assert len(l1) == 8 + 9 + 5 + 2
    for src in f.hosts:
        for dst in f.hosts:
            if src == dst:
                continue
            for proto, dport in ((17, 4791), (6, 80), (17, 53)):
                for sport in range(PORT_MIN, PORT_MIN + 8):
                    path, reached, _ = trace(f, sw, src, dst, proto, sport, dport, bucket=sport)
                    assert reached == dst, (src, dst, proto, sport, path)


def test_switch_state_does_not_grow_with_flows():
    f = wired()
    sw, svc = start(f, algorithm="greedy")
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    sizes = {d: len(r) for d, r in sw.rules.items()}
    flows = [{"src": f"h{i}_{k}", "dst": f"h{j}_{m}", "bytes": 1e6, "proto": "udp",
              "dport": 4791, "sport": 1000 + n}
             for n, (i, k, j, m) in enumerate((i, k, j, m) for i in range(4) for k in range(2)
                                              for j in range(4) for m in range(2) if i != j)]
    status, doc = post(svc, {"id": "many", "flows": flows})
    assert status == 201, doc
    assert {d: len(r) for d, r in sw.rules.items()} == sizes  # 48 more flows, same tables
    assert job_entries(sw) == 0
    # flow mode keeps its static tables exactly as before (no host pipeline): those of the
    # Clos of one plane the controller serves the leaf-spine as, and the echo entry
    g = wired()
    sw2, svc2 = start(g, mode="flow")
    for name in g.switches():
        assert set(sw2.rules[g.dpids[name]].values()) == set(
            clos_static_rules(as_clos(g), name, labels=False)[0]) | {echo_entry(g.dpids[name])}


# ---- probes and the learned map -----------------------------------------------------------------
@pytest.mark.parametrize("proto", [17, 6])
def test_probe_packet_round_trip_and_checksums(proto):
    data = probe_packet("02:00:00:00:00:01", "02:00:00:00:01:01", "10.0.0.1", "10.0.1.1",
                        proto, 50001, 4791 if proto == 17 else 9, 123456)
    h = parse_probe(data)
    assert h == {"token": 123456, "proto": proto, "sport": 50001,
                 "dport": 4791 if proto == 17 else 9, "dscp": 59, "ipv4_src": "10.0.0.1",
                 "ipv4_dst": "10.0.1.1"}
    assert ip_checksum(data[14:34]) == 0  # IPv4 header checksum valid
    if proto == 6:
        import ipaddress
        import struct
        pseudo = (ipaddress.IPv4Address("10.0.0.1").packed + ipaddress.IPv4Address(
            "10.0.1.1").packed + struct.pack("!BBH", 0, 6, len(data) - 34))
        assert ip_checksum(pseudo + data[34:]) == 0
    # a packet without the mark is no probe, nor is the mark without the payload
    assert parse_probe(data[:15] + bytes([0]) + data[16:]) is None
    assert parse_probe(data[:-8] + b"XXXXXXXX") is None


def test_ryu_parses_the_probe_packet():
    pytest.importorskip("ryu")
    from ryu.lib.packet import ipv4, packet, udp
    pkt = packet.Packet(probe_packet("02:00:00:00:00:01", "02:00:00:00:01:01", "10.0.0.1",
                                     "10.0.1.1", 17, 49999, 4791, 5))
    assert pkt.get_protocol(ipv4.ipv4).tos >> 2 == 59
    assert pkt.get_protocol(udp.udp).src_port == 49999


def test_map_comes_from_the_switch_not_from_a_guess():
    """Rewire one leaf's pipeline behind the controller's back (as a switch with another hash
    would behave): the probes see it, and every flow still reaches its planned spine."""
    f = wired()
    sw, svc = start(f, algorithm="greedy")
    assert post(svc, ring("warm", ["h0_1", "h1_1"]))[0] == 201  # installs the pipeline
    l0 = f.dpids["l0"]
    entries = [r for r in sw.rules[l0].values() if r.priority == 15]
    outs = [r.actions for r in entries]
    for r, acts in zip(entries, outs[1:] + outs[:1]):  # rotate the buckets' uplinks
        sw.rules[l0][r.key] = type(r)(r.dpid, r.table, r.priority, r.match, acts, r.goto,
                                      r.cookie)
    svc.host.maps.clear()  # forget what was learned: learn again from the switch
    status, doc = post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))
    assert status == 201, doc
    assert assert_on_planned_spines(f, sw, doc["routes"]) == 4


def test_lost_probes_refuse_the_job_and_change_nothing():
    f = wired()
    sw, svc = start(f)
    before = sw.snapshot()
    sw.lose_probes = 3
    status, doc = post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))
    assert status == 409 and "probes reached no spine" in doc["error"]
    assert sw.snapshot() == before and not svc.jobs
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201  # next time


# ---- every flow on its planned spine ----------------------------------------------------------
@pytest.mark.parametrize("spines, down", [(4, ()), (4, [("l0", "s1")]), (2, ()),
                                          (3, [("l2", "s0")])])
def test_every_flow_reaches_its_planned_spine(spines, down):
    f = wired(spines, 4, 2, down)
    sw, svc = start(f)
    jobs = [ring("r", ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h2_1"]),
            {"id": "tcp", "collective": "ring_allreduce", "ranks": ["h3_1", "h1_1", "h2_1"],
             "bytes": 4e6},
            {"id": "x", "flows": [{"src": "h0_0", "dst": "h3_1", "bytes": 1e6, "proto": "udp",
                                   "dport": 4791, "sport": s} for s in range(6)]
             + [{"src": "h1_0", "dst": "h1_1", "bytes": 1e6, "proto": "udp", "dport": 4791}]}]
    checked = 0
    for job in jobs:
        status, doc = post(svc, job)
        assert status == 201, doc
        assert doc["mode"] == "host"
    for job in jobs:
        routes = api.handle(svc, "GET", f"/v1/jobs/{job['id']}")[1]["routes"]
        checked += assert_on_planned_spines(f, sw, routes)
    assert checked == 6 + 3 + 6
    assert job_entries(sw) == 0
    # source ports are unique per host and protocol (no two connections share a socket)
    seen = set()
    for r in api.handle(svc, "GET", "/v1/routes")[1]["routes"]:
        for _spine, sport in parts_of(r):
            assert PORT_MIN <= sport <= 65535
            key = (r["src"], r["proto"], sport)
            assert key not in seen
            seen.add(key)


def test_split_parts_get_one_port_each():
    f = wired(2, 4, 2)
    sw, svc = start(f)
    # three flows out of l0 over two spines: split spreads 1.5 per uplink
    flows = [{"src": "h0_0", "dst": d, "bytes": 1e6, "proto": "udp", "dport": 4791}
             for d in ("h1_0", "h2_0", "h3_0")]
    status, doc = post(svc, {"id": "s", "flows": flows, "algorithm": "split"})
    assert status == 201, doc
    split = [r for r in doc["routes"] if "split" in r]
    assert split, doc["routes"]
    assert all(len({p["sport"] for p in r["split"]}) == len(r["split"]) for r in split)
    assert assert_on_planned_spines(f, sw, doc["routes"]) == sum(len(parts_of(r))
                                                                 for r in doc["routes"])


def test_ports_of_other_modes_are_not_reused():
    f = wired(2, 2, 1)
    sw, svc = start(f)
    flow_job = {"id": "f", "mode": "flow", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "proto": "udp", "dport": 4791,
         "sport": s} for s in (PORT_MIN, PORT_MIN + 1, PORT_MIN + 2)]}
    assert post(svc, flow_job)[0] == 201
    status, doc = post(svc, {"id": "h", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "proto": "udp", "dport": 4791,
         "sport": 7}]})
    assert status == 201, doc
    assert doc["routes"][0]["sport"] > PORT_MIN + 2
    assert assert_on_planned_spines(f, sw, doc["routes"]) == 1


def test_unsteerable_flows_are_refused_in_host_mode():
    f = wired(2, 2, 1)
    sw, svc = start(f)
    status, doc = post(svc, {"id": "u", "flows": [
        {"src": "h0_0", "dst": "h1_0", "bytes": 1e6, "proto": "udp", "dport": 5000}]})
    assert status == 400 and "h0_0 -> h1_0" in doc["error"] and "4791" in doc["error"]
    assert not svc.jobs and job_entries(sw) == 0


# ---- failures ----------------------------------------------------------------------------------
def test_link_failure_gives_new_ports_and_traffic_follows():
    f = wired(4, 4, 2)
    sw, svc = start(f, algorithm="greedy")
    status, doc = post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0", "h0_1", "h1_1"]))
    assert status == 201
    before = {(r["src"], r["dst"]): (r["spine"], r["sport"]) for r in doc["routes"]}
    victim = next(r for r in doc["routes"] if r["src"].startswith("h0_"))
    probes, keys = sw.probes, set(svc.host.maps)
    svc.port_changed(f.dpids["l0"], f.port("l0", victim["spine"]), False)
    event = svc.fabric_view()["events"][-1]
    assert event["links_down"] == [f"l0-{victim['spine']}"] and "host_error" not in event
    after = api.handle(svc, "GET", "/v1/jobs/a")[1]["routes"]
    assert assert_on_planned_spines(f, sw, after) == 6
    changed = {(c["src"], c["dst"]) for c in event["port_changes"]}
    assert changed  # flows through the dead link moved, so their ports changed
    for r in after:
        old_spine, old_port = before[(r["src"], r["dst"])]
        # where the old port leads now, through the new buckets: a flow changes port exactly
        # when that is not its planned spine any more
        now = trace(f, sw, r["src"], r["dst"], 17, old_port, 4791)[0][1]
        if now == r["spine"]:
            assert r["sport"] == old_port and (r["src"], r["dst"]) not in changed
        else:
            assert r["sport"] != old_port and (r["src"], r["dst"]) in changed
        assert not (r["src"].startswith("h0_") and r["spine"] == victim["spine"])
    # probed again: l0 (its buckets changed) and the other leaves' new class towards l0
    # (every spine but the dead one), one window each
    new = set(svc.host.maps) - keys
    assert new and all(k[0] == "l0" or victim["spine"] not in dict(k[1]) for k in new)
    assert sw.probes - probes == sum(first_window(svc.fabric, "leaf", k) for k in new)
    host = svc.fabric_view()["host_mode"]
    assert host["probes_sent"] == sw.probes and host["flows_with_ports"] == 6
    # the old port still goes somewhere alive (no blackhole while the host switches ports)
    path, reached, _ = trace(f, sw, victim["src"], victim["dst"], 17, victim["sport"], 4791)
    assert reached == victim["dst"] and victim["spine"] not in path


def test_restart_places_the_same_ports(tmp_path):
    f = wired()
    store = StateStore(str(tmp_path / "state.db"))
    sw, svc = start(f, store=store, algorithm="greedy")
    assert post(svc, ring("a", ["h0_0", "h1_0", "h2_0", "h3_0"]))[0] == 201
    ports = api.handle(svc, "GET", "/v1/jobs/a/ports")[1]
    svc2 = RouteService(sw, f, mode="host", store=StateStore(str(tmp_path / "state.db")),
                        algorithm="greedy")
    for d in f.dpids.values():
        svc2.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    assert api.handle(svc2, "GET", "/v1/jobs/a/ports")[1] == ports
    assert assert_on_planned_spines(f, sw, api.handle(svc2, "GET", "/v1/jobs/a")[1]["routes"]) == 4


def restarted(sw, f, path):
    """A controller started again from the state file ``path``, its switches connected."""
    svc = RouteService(sw, f, mode="host", store=StateStore(path), algorithm="greedy")
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return svc


def test_a_restart_keeps_ports_a_fresh_placement_would_not_choose(tmp_path):
    """One spine: job b took the ports after a's; a is deleted. Placed afresh, b would take
    a's freed (lower) ports, so its hosts would reconnect: the stored ports are kept."""
    f, path = wired(1, 4, 1), str(tmp_path / "state.db")
    sw, svc = start(f, store=StateStore(path), algorithm="greedy")
    ranks = ["h0_0", "h1_0", "h2_0", "h3_0"]
    assert post(svc, ring("a", ranks))[0] == 201 and post(svc, ring("b", ranks))[0] == 201
    freed = api.handle(svc, "GET", "/v1/jobs/a/ports")[1]
    assert api.handle(svc, "DELETE", "/v1/jobs/a")[0] == 200
    kept = api.handle(svc, "GET", "/v1/jobs/b/ports")[1]
    again = restarted(sw, f, path)
    assert api.handle(again, "GET", "/v1/jobs/b/ports")[1] == kept
    routes = api.handle(again, "GET", "/v1/jobs/b")[1]["routes"]
    assert assert_on_planned_spines(f, sw, routes) == 4
    assert not any(e.get("port_changes") for e in again.state.events)
    # what a fresh placement (no stored ports) gives b: a's freed ports, where they lead alike
    doc = StateStore(path).load()
    for job in doc["jobs"]:
        del job["host_ports"]
    StateStore(str(tmp_path / "fresh.db")).save(doc)
    anew = restarted(sw, f, str(tmp_path / "fresh.db"))
    assert api.handle(anew, "GET", "/v1/jobs/b/ports")[1] != kept
    assert api.handle(anew, "GET", "/v1/jobs/b/ports")[1].split("\n")[1:] == \
        freed.split("\n")[1:]


def test_the_pipeline_goes_with_the_last_host_job():
    f = wired(2, 2, 1)
    sw, svc = start(f)
    static = sw.snapshot()
    assert post(svc, ring("a", ["h0_0", "h1_0"]))[0] == 201
    assert sw.snapshot() != static
    assert api.handle(svc, "DELETE", "/v1/jobs/a")[0] == 200
    assert sw.snapshot() == static and not svc.host.maps


# ---- export --------------------------------------------------------------------------------------
def test_ports_export_for_job_launchers():
    f = wired(2, 2, 2)
    sw, svc = start(f)
    status, doc = post(svc, ring("a", ["h0_0", "h1_0", "h0_1"]))
    assert status == 201
    code, text = api.handle(svc, "GET", "/v1/jobs/a/ports")
    lines = text.splitlines()
    assert code == 200 and lines[0].startswith("# mlroute job a (mode host)")
    got = [line.split() for line in lines[1:]]
    assert got == [[f.host_ip[r["src"]], f.host_ip[r["dst"]], "udp", str(r["sport"]), "4791"]
                   for r in doc["routes"]]
    assert api.handle(svc, "GET", "/v1/jobs/none/ports")[0] == 404
    # flow mode exports the flows' own ports (split parts: their sub-connection ports)
    assert post(svc, {"id": "f", "mode": "flow", "flows": [
        {"src": "h0_1", "dst": "h1_1", "bytes": 1, "proto": "tcp", "sport": 7000,
         "dport": 80}]})[0] == 201
    assert api.handle(svc, "GET", "/v1/jobs/f/ports")[1].splitlines()[1] == \
        f"{f.host_ip['h0_1']} {f.host_ip['h1_1']} tcp 7000 80"


# ---- the pure part -------------------------------------------------------------------------------
def test_choose_ports_keeps_valid_ports_and_reports_shortage():
    f = wired(2, 2, 1)
    key = key_of(f)
    m = {key: PortMap({PORT_MIN + i: (f"s{i % 2}",) for i in range(4)}, 4)}
    fl = [(("j", k), Flow("j", "h0_0", "h1_0", 1.0, 17, k, 4791), (via(f, "h0_0", "h1_0",
                                                                       f"s{k % 2}"),))
          for k in range(3)]
    ports, missing = choose_ports(f, fl, m)
    assert ports == {("j", 0): (PORT_MIN,), ("j", 1): (PORT_MIN + 1,),
                     ("j", 2): (PORT_MIN + 2,)} and not missing
    # flow 0 moves to s1: it keeps nothing, the others keep theirs
    moved = [(fl[0][0], fl[0][1], (via(f, "h0_0", "h1_0", "s1"),))] + fl[1:]
    again, missing = choose_ports(f, moved, m, previous=ports)
    assert again[("j", 1)] == ports[("j", 1)] and again[("j", 2)] == ports[("j", 2)]
    assert again[("j", 0)] == (PORT_MIN + 3,) and not missing
    four = moved + [(("j", 9), Flow("j", "h0_0", "h1_0", 1.0, 17, 9, 4791),
                     (via(f, "h0_0", "h1_0", "s1"),))]
    _, missing = choose_ports(f, four, m, previous=again)
    assert missing == {key: 1}


def test_place_probes_once_for_the_busiest_host_and_widens_for_an_uneven_switch():
    f = wired(2, 2, 1)
    sw = FakeSwitches(f.dpids.values(), fabric=f)
    for dpid, (rules, _groups) in desired_tables(f, [], host=True).items():
        sw.install({dpid: [Message("flow_add", rule=r) for r in rules]})
    key = key_of(f)
    hp = HostPorts()
    n = 2 * first_window(f, "leaf", key)
    flows = [(("j", k), Flow("j", "h0_0", "h1_0", 1.0, 17, k, 4791), (via(f, "h0_0", "h1_0",
                                                                          "s0"),))
             for k in range(n)]  # every flow of one host on s0
    ports = hp.place(f, flows, sw.probe)
    assert len({p for v in ports.values() for p in v}) == n
    assert hp.probe_rounds == 1 and hp.maps[key].window == 2 * n  # n per spine, 2 buckets
    for (port,) in ports.values():
        assert trace(f, sw, "h0_0", "h1_0", 17, port, 4791)[0][1] == "s0"

    def uneven(probes):  # a switch whose hash gives s1 one port in four
        return {p.token: (f.dpids["s1" if p.sport % 4 == 3 else "s0"], f.port("s0", "l0"))
                for p in probes}
    hp = HostPorts()
    flows = [(("j", k), Flow("j", "h0_0", "h1_0", 1.0, 17, k, 4791), (via(f, "h0_0", "h1_0",
                                                                          "s1"),))
             for k in range(8)]
    ports = hp.place(f, flows, uneven)
    assert hp.probe_rounds == 2 and hp.maps[key].window == 32  # 16 gave s1 only 4 ports
    assert sorted(p for (p,) in ports.values()) == [PORT_MIN + 3 + 4 * i for i in range(8)]


def test_pair_scope_learns_per_host_pair():
    f = wired(2, 2, 2)
    sw, svc = start(f)
    assert post(svc, ring("w", ["h0_0", "h1_0"]))[0] == 201  # the pipeline in place
    hp = HostPorts(scope="pair")
    flows = [(("j", 0), Flow("j", "h0_0", "h1_0", 1.0, 17, 0, 4791),
              (via(f, "h0_0", "h1_0", "s1"),)),
             (("j", 1), Flow("j", "h0_1", "h1_1", 1.0, 17, 0, 4791),
              (via(f, "h0_1", "h1_1", "s0"),))]
    ports = hp.place(f, flows, sw.probe)
    assert set(hp.maps) == {("h0_0", "h1_0", 17), ("h0_1", "h1_1", 17)}
    assert hp.probes_sent == sum(first_window(f, "pair", k) for k in hp.maps)
    assert trace(f, sw, "h0_0", "h1_0", 17, ports[("j", 0)][0], 4791)[0][1] == "s1"
    assert trace(f, sw, "h0_1", "h1_1", 17, ports[("j", 1)][0], 4791)[0][1] == "s0"
    assert make_probes(f, ("h0_1", "h1_1", 17), [PORT_MIN], 1)[0].in_port == f.port("l0", "h0_1")


def test_host_pipeline_translates_and_reads_back():
    pytest.importorskip("ryu")
    from ryu.ofproto import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser

    from controller.shell import translate

    class Datapath:
        ofproto, ofproto_parser, id, xid = ofproto_v1_3, ofproto_v1_3_parser, 0x20000, 0

        def set_xid(self, msg):
            self.xid += 1
            msg.set_xid(self.xid)

    f = wired(3, 2, 1, [("l1", "s0")])  # l0 gets a class table towards l1 (goto, fallback)
    dp = Datapath()
    # a leaf forwards in table 1 what its host ports let in (source_check); classes from 3
    assert {r.table for r in host_static_rules(f, "l0")} == {1, 3}
    for name in ("l0", "s0"):
        for r in host_static_rules(f, name):
            msg = translate.encode(dp, Message("flow_add", rule=r))
            dp.set_xid(msg)
            msg.serialize()
            version, msg_type, length, xid = ofproto_parser.header(bytes(msg.buf))
            parsed = ofproto_parser.msg(dp, version, msg_type, length, xid, bytes(msg.buf))
            assert translate.rule_of(ofproto_v1_3, r.dpid, parsed) == r
