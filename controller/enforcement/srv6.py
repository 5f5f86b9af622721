"""SRv6 mode: a planned route part as a segment list that the source host pushes, over
switches that hold static segment IDs (SIDs) and nothing per flow.

Why from the hosts: production AI fabrics are plain IP (SONiC with static SIDs, no OpenFlow);
the path is chosen where the packet starts (RFC 8986 behaviours, uSID compression of RFC 9800).

The SID plan is computed once from the fabric model (``SidPlan.of``), so the same fabric
document gives the same addresses on every controller and in every switch configuration
(``srv6_config``):

* every switch has a node ID ``n`` (1, 2, ... in ``Clos.switches()`` order, below 0xE000) and
  a locator ``BLOCK:n::/48`` (block /32, 16-bit uSIDs): its uN SID (End with NEXT-C-SID);
* every link member a switch can send on has a local uA uSID ``0xE000 + i`` (End.X, from the
  local ID block) and, for the classic form, the End.X SID ``BLOCK:n:E00i::/64``;
* every host has a decapsulation SID at its leaf, ``BLOCK:leaf:F00j::/64`` (End.DX4 towards
  the host in Linux; uDT46 in SONiC): hosts keep IPv4, carried inside the encapsulation.

A path (leaf, ..., leaf) with its bundle members becomes one uSID per hop: the uN of the next
switch where one link joins them (the switch routes it over that link: its only shortest
path), the uA of the planned member where a bundle does; then the destination leaf's uN and
the host's function. Up to three tiers that is at most 6 uSIDs: one container
(``encap.red``, 40 bytes, no SRH). Longer lists, or ``classic``, are an SRH of full SIDs.

>>> from controller.model.clos import Clos
>>> c = Clos.fat_tree(4)
>>> plan = SidPlan.of(c)
>>> plan.node["l0"], plan.node["a0_0"], plan.node["c0_0"]
(1, 9, 17)
>>> s = segments(plan, ["l0", "a0_0", "c0_0", "a1_0", "l2"], None, "h2_0")
>>> s.form, s.sids, s.overhead
('usid', ['fcbb:bbbb:9:11:b:3:f001:0'], 40)
>>> segments(plan, ["l0", "a0_0", "l1"], None, "h1_0", classic=True).sids
['fcbb:bbbb:9::', 'fcbb:bbbb:2:f001::']
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from controller.errors import InputError
from controller.model.clos import Clos

BLOCK = "fcbb:bbbb::/32"  # the uSID block (RFC 9800's example block, SONiC's default lengths)
USID_BITS = 16
MAX_NODE = 0xDFFF  # node IDs stay below the local ID blocks
UA_BASE = 0xE000  # local uA uSIDs (End.X): 0xE000 + the member's index at its switch
DECAP_BASE = 0xF000  # a leaf's decapsulation functions: 0xF000 + 1 + the host's index there


@dataclass(frozen=True)
class Segments:
    """What a host pushes for one route part: ``usid`` (one container, ``encap.red``) or
    ``classic`` (an SRH of full SIDs, ``encap``), and the IPv6 addresses in order."""
    form: str
    sids: list[str]

    @property
    def overhead(self) -> int:
        """Bytes added to every packet: the outer IPv6 header, and an SRH for ``classic``."""
        return 40 if self.form == "usid" else 40 + 8 + 16 * len(self.sids)

    def to_doc(self) -> dict:
        return {"form": self.form, "sids": list(self.sids)}


@dataclass
class SidPlan:
    """Every static SID of a fabric, computed from the model alone (see the module text)."""
    fabric: Clos
    block: ipaddress.IPv6Network
    node: dict[str, int]  # switch -> node ID (its uN uSID)
    adjacency: dict[str, list[tuple[str, int]]]  # switch -> (neighbour, member) by uA index
    decap: dict[tuple[str, int], tuple[str, int]]  # (host, plane) -> (leaf, function)

    @classmethod
    def of(cls, fabric: Clos, block: str = BLOCK) -> SidPlan:
        net = ipaddress.IPv6Network(block)
        if net.prefixlen != 32:
            raise InputError(f"SRv6 block {block}: a /32 is needed (16-bit uSIDs after it)")
        switches = fabric.switches()
        if len(switches) > MAX_NODE:
            raise InputError(f"SRv6: {len(switches)} switches, at most {MAX_NODE} node IDs")
        node = {s: i + 1 for i, s in enumerate(switches)}
        adjacency = {}
        for s in switches:
            adj = []
            for n in fabric.neighbours(s):
                if n in node:  # a switch, not a host
                    adj += [(n, m) for m in range(_bundle(fabric, s, n))]
            if len(adj) > DECAP_BASE - UA_BASE:
                raise InputError(f"SRv6: switch {s} has {len(adj)} links, at most 4096 uA SIDs")
            adjacency[s] = adj
        decap = {}
        for leaf, hosts in fabric.hosts_on.items():
            plane = fabric.plane_of[leaf]
            for j, h in enumerate(sorted(hosts)):
                if j >= 0xFFF:
                    raise InputError(f"SRv6: leaf {leaf} has over 4094 hosts")
                decap[(h, plane)] = (leaf, DECAP_BASE + 1 + j)
        return cls(fabric, net, node, adjacency, decap)

    def address(self, *usids: int) -> str:
        """The block followed by ``usids`` (16 bits each), zeros after them. Kept once made:
        every host's document after a change asks for the same few (1,024 at k = 16)."""
        made = self.__dict__.setdefault("_addresses", {})
        text = made.get(usids)
        if text is None:
            value = int(self.block.network_address)
            for i, u in enumerate(usids):
                value |= u << (128 - 32 - USID_BITS * (i + 1))
            text = made[usids] = str(ipaddress.IPv6Address(value))
        return text

    def plane_prefixes(self, plane: int) -> list[ipaddress.IPv6Network]:
        """The fewest prefixes holding every locator of ``plane``'s switches (their node IDs
        are consecutive, ``fabric.switches()`` being plane by plane): what a host routes to
        that plane's leaf, so that a list of the plane leaves by the plane's interface.

        >>> from controller.model.clos import Clos
        >>> [str(n) for n in SidPlan.of(Clos.leaf_spine(2, 2, 1, planes=2)).plane_prefixes(1)]
        ['fcbb:bbbb:5::/48', 'fcbb:bbbb:6::/47', 'fcbb:bbbb:8::/48']
        """
        ids = [self.node[s] for s in self.fabric.planes[plane].switches()]
        low = ipaddress.IPv6Address(self.address(min(ids)))
        high = ipaddress.IPv6Address(int(ipaddress.IPv6Address(self.address(max(ids))))
                                     | ((1 << (128 - 48)) - 1))
        return list(ipaddress.summarize_address_range(low, high))

    def locator(self, switch: str) -> str:
        return f"{self.address(self.node[switch])}/48"

    def ua(self, switch: str, neighbour: str, member: int) -> int:
        """The local uA uSID of ``switch`` towards ``neighbour`` over ``member``."""
        try:
            return UA_BASE + self.adjacency[switch].index((neighbour, member))
        except (KeyError, ValueError):
            raise InputError(f"SRv6: no link {switch} -> {neighbour} member {member}") from None

    def decap_of(self, host: str, plane: int = 0) -> tuple[str, int]:
        got = self.decap.get((host, plane))
        if got is None:
            raise InputError(f"SRv6: host {host} has no leaf in plane {plane}")
        return got


def _neighbours(fabric: Clos, switch: str) -> frozenset:
    """``fabric.neighbours(switch)`` as a set, made once per fabric and switch."""
    sets = fabric.derived("srv6_neighbour_sets", lambda f: {})
    got = sets.get(switch)
    if got is None:
        got = sets[switch] = frozenset(fabric.neighbours(switch))
    return got


def _bundle(fabric: Clos, a: str, b: str) -> int:
    lower, upper = (a, b) if fabric.tier_of[a] < fabric.tier_of[b] else (b, a)
    return fabric.bundle(lower, upper)


def usids(plan: SidPlan, path, members, host: str) -> list[tuple[int, int]]:
    """The path as (switch node ID that processes it, uSID) pairs: one per hop, then the
    destination leaf's decapsulation (see the module text)."""
    fabric, path = plan.fabric, list(path)
    plane = fabric.plane_of.get(path[0], 0)
    leaf, function = plan.decap_of(host, plane)
    if path[-1] != leaf:
        raise InputError(f"SRv6: path ends at {path[-1]}, host {host} is on {leaf}")
    out = []
    hops = plan.__dict__.setdefault("_hops", {})  # (a, b) -> its uN unit, or None: a bundle
    for i, (a, b) in enumerate(zip(path, path[1:])):
        if (a, b) not in hops:
            if _bundle(fabric, a, b) > 1:
                hops[(a, b)] = None
            elif b not in plan.node or b not in _neighbours(fabric, a):
                raise InputError(f"SRv6: {a} -> {b} is not a link of the fabric")
            else:
                hops[(a, b)] = (plan.node[b], plan.node[b])
        unit = hops[(a, b)]
        if unit is None:
            member = members[i] if members is not None and i < len(members) else 0
            unit = (plan.node[a], plan.ua(a, b, member))
        out.append(unit)
    if not out or out[-1][1] != plan.node[leaf]:
        out.append((plan.node[leaf], plan.node[leaf]))
    out.append((plan.node[leaf], function))
    return out


def segments(plan: SidPlan, path, members, host: str, classic: bool = False,
             slots: int = 6) -> Segments:
    """The segment list of one route part: ``path`` (switch names, source leaf first) and its
    bundle ``members`` towards ``host``; one uSID container where it fits in ``slots``."""
    units = usids(plan, path, members, host)
    if not classic and len(units) <= slots:
        return Segments("usid", [plan.address(*(u for _, u in units))])
    sids = []
    for node, u in units[:-1]:
        if u == node:  # a uN: the switch's End SID
            sids.append(plan.address(node))
        else:  # a uA: its End.X SID under the switch's locator
            sids.append(plan.address(node, u))
    node, function = units[-1]
    if sids and sids[-1] == plan.address(node):
        sids.pop()  # the decapsulation SID is processed at that leaf too
    sids.append(plan.address(node, function))
    return Segments("classic", sids)

