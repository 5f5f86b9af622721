"""The two-tier planners' view of one leaf-spine plane: who is connected to whom, which
leaf-spine links are down, as spine indices and bitmasks.

Not a document model: every fabric document loads as a ``model.clos.Clos``
(``load_fabric``), and a Clos of one two-tier plane without bundles hands its planners this
view (``Clos.as_leaf_spine``, its only maker: ``Clos.generate(...).as_leaf_spine()`` in
the two-tier planners' tests and benchmarks). Spines and leaves are kept in declaration
order; a spine's position in ``spines`` is its id for every tie-break ("lowest spine id").
Usable spines of a leaf pair are kept as bitmasks (bit j = spine j) so planners
can intersect them cheaply.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.errors import InputError

DERIVED = "_derived"  # the fabric object's attribute holding values computed from it once


class HostLookup:
    """What every fabric model answers about hosts and ports (``Fabric`` and
    ``model.clos.Clos``): needs ``hosts`` (host -> leaf), ``host_leaves`` (host -> its leaf
    in each plane), ``host_ip`` and ``ports``."""

    def derived(self, name: str, build):
        """``build(self)``, computed once per fabric object and kept on it (a model is
        immutable in use; ``__post_init__`` drops what was kept)."""
        cache = self.__dict__.setdefault(DERIVED, {})
        if name not in cache:
            cache[name] = build(self)
        return cache[name]

    def port(self, switch: str, peer: str) -> int:
        """The port of ``switch`` to ``peer`` (a bundle's first member)."""
        p = self.ports[switch][peer]
        return p[0] if isinstance(p, list) else p

    def ports_to(self, switch: str, peer: str) -> tuple[int, ...]:
        """Every port of ``switch`` to ``peer``, in member order (one for a single link)."""
        p = self.ports[switch][peer]
        return tuple(p) if isinstance(p, list) else (p,)

    def peer(self, switch: str, port: int) -> str | None:
        for name, p in self.ports.get(switch, {}).items():
            if p == port or (isinstance(p, list) and port in p):
                return name
        return None

    def member(self, switch: str, port: int) -> int:
        """The member index of ``port`` in its bundle (0 for a single link)."""
        p = self.ports[switch][self.peer(switch, port)]
        return p.index(port) if isinstance(p, list) else 0

    def leaf_of(self, host: str) -> str:
        try:
            return self.hosts[host]
        except KeyError:
            raise InputError(f"unknown host {host!r}") from None

    def leaves_named(self, host: str) -> str:
        """The host's leaf, as messages name it (on several planes: one per plane)."""
        return " / ".join(self.host_leaves[host])

    def address(self, host: str) -> str:
        """The host's address for hashing: its declared IP, else its name."""
        return self.host_ip.get(host, host)

    def addresses_at(self, switch: str) -> dict[str, str]:
        """host -> its address in the plane of ``switch`` (what that switch matches); one
        plane here (``model.clos.Clos`` has several)."""
        return self.host_ip

    def interfaces(self) -> list[tuple[str, int, str | None, str | None, str]]:
        """(host, plane, IPv4 address, MAC, leaf) of every host interface: one per host here
        (a multi-plane ``model.clos.Clos`` host has one per plane)."""
        return [(h, 0, self.host_ip.get(h), self.host_mac.get(h), leaf)
                for h, leaf in self.hosts.items()]

    def plane_of_switch(self, switch: str | None) -> int:
        return 0

    def ip_of(self, host: str, plane: int = 0) -> str:
        """The host's address on ``plane``; one plane here."""
        return self.host_ip[host]

    def mac_of(self, host: str, plane: int = 0) -> str:
        return self.host_mac[host]

    def part_plane(self, where) -> int:
        """The plane of a route part (a spine index here, a path of switches on a Clos)."""
        return 0


@dataclass
class Fabric(HostLookup):
    """The two-tier model of one plane, the two-tier planners' (a leaf-spine ``Clos``'s
    ``as_leaf_spine``); a route part is a spine index. Every fabric document loads as a
    ``model.clos.Clos`` (``load_fabric``), and the controller serves this model as one
    (``as_clos``)."""
    is_clos = False  # the model's one answer to "which model is this" (``Clos.is_clos``)
    spines: list[str]
    leaves: list[str]
    hosts: dict[str, str]  # host -> leaf
    link_gbps: float = 100.0
    down: set[tuple[str, str]] = field(default_factory=set)  # failed (leaf, spine) links
    extra: dict = field(default_factory=dict)  # unknown top-level keys, kept for extensions

    def __post_init__(self) -> None:
        self.__dict__.pop(DERIVED, None)
        self.spine_index = {s: j for j, s in enumerate(self.spines)}
        self.leaf_index = {l: i for i, l in enumerate(self.leaves)}
        all_spines = (1 << len(self.spines)) - 1
        self.up_mask = [all_spines] * len(self.leaves)
        for leaf, spine in self.down:
            i, j = self.leaf_index[leaf], self.spine_index[spine]
            self.up_mask[i] &= ~(1 << j)
        self.host_ip: dict[str, str] = dict(self.extra.get("host_ip", {}))
        self.host_mac: dict[str, str] = dict(self.extra.get("host_mac", {}))
        self.dpids: dict[str, int] = dict(self.extra.get("dpids", {}))
        self.ports: dict[str, dict[str, int]] = {k: dict(v) for k, v in
                                                  self.extra.get("ports", {}).items()}
        self.switch_of_dpid = {d: name for name, d in self.dpids.items()}
        self.hosts_of_leaf: dict[str, list[str]] = {l: [] for l in self.leaves}
        for host, leaf in self.hosts.items():
            self.hosts_of_leaf[leaf].append(host)

    # ---- wiring -------------------------------------------------------------------------
    @property
    def wired(self) -> bool:
        return bool(self.dpids)

    def to_dict(self) -> dict:
        doc = {"spines": list(self.spines), "leaves": list(self.leaves), "hosts": dict(self.hosts),
               "link_gbps": self.link_gbps,
               "down": sorted([list(x) for x in self.down],
                              key=lambda p: (self.leaf_index[p[0]], self.spine_index[p[1]]))}
        doc.update(self.extra)
        return doc

    # ---- shape (what ``model.clos.Clos`` answers too) ------------------------------------
    def as_leaf_spine(self) -> Fabric:
        """This fabric as the two-tier model: itself (``Clos.as_leaf_spine``: its plane's, or
        None when the two-tier planners do not plan it)."""
        return self

    @property
    def host_leaves(self) -> dict[str, tuple[str, ...]]:
        """host -> its leaf in each plane: one plane here (``Clos.host_leaves``)."""
        return self.derived("host_leaves", lambda f: {h: (l,) for h, l in f.hosts.items()})

    def summary(self) -> str:
        """One line: spines, leaves, hosts and the spines with no link up (``leaf_spine_line``,
        as ``Clos.summary`` for a single two-tier plane)."""
        return leaf_spine_line(self.spines, self.leaves, len(self.hosts),
                               lambda leaf, spine: (leaf, spine) not in self.down)

    plane_count = 1  # planes: one (``Clos.plane_count``)

    @property
    def tier_of(self) -> dict[str, int]:
        """switch -> its tier: 0 a leaf, 1 a spine (``Clos.tier_of``, where 2 is a core)."""
        return self.derived("tier_of", lambda f: {**dict.fromkeys(f.leaves, 0),
                                                  **dict.fromkeys(f.spines, 1)})

    def leaves_by_pod(self, plane: int = 0) -> list[list[str]]:
        """The leaves of ``plane`` (only 0 here), pod by pod: one pod (``Clos.leaves_by_pod``)."""
        if plane != 0:
            raise IndexError(f"plane {plane} of a fabric of one plane")
        return [list(self.leaves)]

    # ---- queries ------------------------------------------------------------------------
    def usable_mask(self, leaf_a: int, leaf_b: int) -> int:
        """Spines whose links a->s and s->b are both up, as a bitmask."""
        return self.up_mask[leaf_a] & self.up_mask[leaf_b]

    def alive_spines(self) -> list[int]:
        """Spines with at least one link up, in id order."""
        alive = 0
        for m in self.up_mask:
            alive |= m
        return [j for j in range(len(self.spines)) if alive >> j & 1]

    def uniform(self) -> bool:
        """True when every leaf sees the same spines: no single link down, only whole spines."""
        return len(set(self.up_mask)) <= 1

    def link_bps(self, tier: str = "leaf") -> float:
        """Capacity of every link in bytes per second (one speed: any ``tier``, as
        ``Clos.link_bps`` takes it)."""
        return self.link_gbps * 1e9 / 8

    @property
    def tiers(self) -> int:
        """Switch tiers: two (``Clos.tiers`` is 2 or 3)."""
        return 2

    def switches(self) -> list[str]:
        return self.spines + self.leaves

    def links(self) -> list[tuple[str, str]]:
        """Every switch link as (lower, upper): (leaf, spine)."""
        return [(leaf, spine) for leaf in self.leaves for spine in self.spines]

    def with_down(self, down: Iterable[tuple[str, str]]) -> Fabric:
        """A copy with another set of failed links (the model is immutable in use)."""
        return Fabric(list(self.spines), list(self.leaves), dict(self.hosts), self.link_gbps,
                      set(down), dict(self.extra))


def leaf_spine_line(spines: list[str], leaves: list[str], hosts: int, up) -> str:
    """A leaf-spine in one line, on both models (``Fabric.summary``, ``Clos.summary`` of a
    single two-tier plane): spines, leaves, hosts and the spines failed, those without a link
    up to any leaf (``up(leaf, spine)``: some member of that link is up). O(leaves x spines).

    >>> leaf_spine_line(["s0", "s1"], ["l0", "l1"], 4, lambda leaf, spine: spine == "s0")
    '2 spines, 2 leaves, 4 hosts (1 spines failed)'
    """
    failed = sum(not any(up(leaf, s) for leaf in leaves) for s in spines)
    return (f"{len(spines)} spines, {len(leaves)} leaves, {hosts} hosts"
            + (f" ({failed} spines failed)" if failed else ""))


def spine_list(mask: int) -> list[int]:
    """Bit positions set in ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
