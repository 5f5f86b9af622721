"""A declared fabric against what discovery sees: where the cabling or a host differs from the
declaration, port by port (the fabric in use stays the declared one)."""
from __future__ import annotations

from controller.discovery.tiers import TIER_WORDS
from controller.discovery.topology import Topology, _Problems
from controller.errors import InputError
from controller.model.clos import Clos, as_clos


def tier_word(fabric: Clos, switch: str) -> str:
    """How a problem names ``switch``'s tier: the upper switches of a two-tier plane are its
    spines, else ``TIER_WORDS``."""
    return "spine" if fabric.two_tier_spine(switch) else TIER_WORDS[fabric.tier_of[switch]]


def check_declared(declared: Clos, topology: Topology) -> list[dict]:
    """Where the network differs from a declared (wired) fabric, port by port.

    Kinds: ``wrong_port`` (a cable or a host on another port than declared; the dict also has
    ``expected`` and ``seen``, strings or None), ``missing_link`` (a declared switch link with
    no probe seen, both switches connected, not declared down), ``switch_missing`` (declared,
    not connected), ``unknown_switch`` (connected, not declared), ``unexpected_link`` (a cable
    between ports declared for nothing), ``unknown_host`` (a MAC not declared). A misplaced
    cable is reported once, at the port that is wrong: two swapped leaf ports give two
    ``wrong_port`` on that leaf, a cable moved to a free port one. A two-tier
    ``model.fabric.Fabric`` is checked as its ``as_clos`` (the service declares a ``Clos``).
    O(ports + links + hosts).

    >>> f = Clos.leaf_spine(1, 1, 1).wire(); t = Topology()   # l0:1 - s0:1, h0_0 on l0:2
    >>> _ = t.switch_up(0x10000, {1: True}, 0); _ = t.switch_up(0x20000, {1: True, 3: True}, 0)
    >>> _ = t.link_seen(0x20000, 3, 0x10000, 1, 0); _ = t.link_seen(0x10000, 1, 0x20000, 3, 0)
    >>> [(p["kind"], p["switch"], p["port"], p["seen"]) for p in check_declared(f, t)]
    [('wrong_port', 'l0', 3, 'spine s0 port 1')]
    """
    declared = as_clos(declared)
    if not declared.wired:
        raise InputError("discovery: the declared fabric has no wiring (dpids, ports)")
    names = declared.switch_of_dpid
    name = lambda d: names.get(d) or f"{d:#x}"
    # the text names each switch's tier: "aggregation switch a1_0 port 3", "spine s0 port 1"
    called = lambda d: f"{tier_word(declared, names[d])} {names[d]}" if d in names else name(d)
    at = lambda x: f"{called(x[0])} port {x[1]}"
    problems = _Problems(name)
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for (a, pa), (b, pb, _t) in sorted(topology.links.items()):
        seen.setdefault((a, pa), (b, pb))
        seen.setdefault((b, pb), (a, pa))
    decl: dict[tuple[int, int], tuple] = {}  # port -> (dpid, port) of a switch, or (None, host)
    for sw, peers in declared.ports.items():
        for other, port in peers.items():
            if other in declared.dpids:  # member m of a bundle: the m-th port at both ends
                back = declared.ports.get(other, {}).get(sw)
                mine = declared.ports_to(sw, other)
                backs = back if isinstance(back, list) else [back] * len(mine)
                for p, b in zip(mine, backs):
                    decl[(declared.dpids[sw], p)] = (declared.dpids[other], b)
            elif other in declared.hosts:
                decl[(declared.dpids[sw], port)] = (None, other)
    up = set(topology.switches)
    leaf_dpids = {declared.dpids[l] for l in declared.leaves}
    for sw in declared.switches():
        d = declared.dpids[sw]
        if d not in up:
            problems.add("switch_missing", d, None, f"{called(d)} ({d:#x}) is declared but not "
                                                    "connected")
    ports = sorted({x for x in decl if x[0] in up} | {x for x in seen if x[0] in names})
    for x in ports:
        want, got = decl.get(x), seen.get(x)
        if want is not None and want[0] is None:  # a host port
            if got is not None:
                problems.add("wrong_port", x[0], x[1], f"{at(x)}: declared for host {want[1]}, "
                             f"cabled to {at(got)}", expected=f"host {want[1]}", seen=at(got))
            continue
        if want == got:
            continue
        if got is None:  # a declared link without probes
            moved = seen.get(want)
            if moved is not None and moved[0] == x[0] or want[0] not in up or \
                    (names[x[0]], names[want[0]]) in declared.down or \
                    (names[want[0]], names[x[0]]) in declared.down:
                continue  # reported where the cable is, or known down
            if want in decl and x[0] not in leaf_dpids and (want[0] in leaf_dpids or want < x):
                continue  # one report per cable, at its leaf end
            state = "up" if topology.switches[x[0]].get(x[1]) else "down"
            problems.add("missing_link", x[0], x[1], f"{at(x)} ({state}) should reach "
                         f"{at(want)}; no probe seen")
        elif want is None:  # a cable on a port declared for nothing
            back = decl.get(got)
            if back is not None and back[0] == x[0]:
                problems.add("wrong_port", x[0], x[1], f"{at(x)}: cabled to {at(got)}, which "
                             f"is declared on {at(back)}", expected=None, seen=at(got))
            elif got[0] not in names:
                continue  # reported with the unknown switch
            elif not (decl.get(got) is None and got < x):
                problems.add("unexpected_link", x[0], x[1],
                             f"{at(x)} is cabled to {at(got)}, which is not declared")
        else:
            far = decl.get(got)
            if got[0] == want[0] and not (far is not None and far[0] == x[0]):
                continue  # right switch, wrong port at the far end: reported there
            problems.add("wrong_port", x[0], x[1], f"{at(x)}: expected {at(want)}, seen "
                         f"{at(got)}", expected=at(want), seen=at(got))
    for d in sorted(up - set(names)):
        near = sorted(at(y) for x, y in seen.items() if x[0] == d and y[0] in names)
        problems.add("unknown_switch", d, None, f"switch {d:#x} is connected but not declared"
                     + (f"; cabled to {', '.join(near)}" if near else ""))
    by_mac = {mac.lower(): (host, leaf)  # every plane's interface of every host
              for host, _, _, mac, leaf in declared.interfaces() if mac}
    for mac, h in sorted(topology.hosts.items()):
        (host, leaf), where = by_mac.get(mac, (None, None)), (h.dpid, h.port)
        if host is None:
            expected = decl.get(where, (0, None))
            problems.add("unknown_host", h.dpid, h.port, f"host {mac} ({h.ip}) seen on "
                         f"{at(where)}" + (f", declared for {expected[1]}"
                                           if expected[0] is None else ", not declared"))
            continue
        want = (declared.dpids[leaf], declared.ports[leaf][host])
        if where != want:
            problems.add("wrong_port", want[0], want[1], f"host {host} ({mac}) is declared on "
                         f"{at(want)}, seen on {at(where)}", expected=f"host {host}",
                         seen=f"host {host} on {at(where)}")
    return problems.sorted()
