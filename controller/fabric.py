"""The leaf-spine fabric: who is connected to whom, which leaf-spine links are down.

Spines and leaves are kept in declaration order; a spine's position in ``spines`` is its id for
every tie-break ("lowest spine id"). Usable spines of a leaf pair are kept as bitmasks (bit j =
spine j) so planners can intersect them cheaply.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from controller.errors import InputError

_FABRIC_KEYS = {"spines", "leaves", "hosts", "link_gbps", "down"}


@dataclass
class Fabric:
    spines: list[str]
    leaves: list[str]
    hosts: dict[str, str]  # host -> leaf
    link_gbps: float = 100.0
    down: set[tuple[str, str]] = field(default_factory=set)  # failed (leaf, spine) links
    extra: dict = field(default_factory=dict)  # unknown top-level keys, kept for extensions

    def __post_init__(self) -> None:
        self.spine_index = {s: j for j, s in enumerate(self.spines)}
        self.leaf_index = {l: i for i, l in enumerate(self.leaves)}
        all_spines = (1 << len(self.spines)) - 1
        self.up_mask = [all_spines] * len(self.leaves)
        for leaf, spine in self.down:
            i, j = self.leaf_index[leaf], self.spine_index[spine]
            self.up_mask[i] &= ~(1 << j)
        self.host_ip: dict[str, str] = dict(self.extra.get("host_ip", {}))
        self.hosts_of_leaf: dict[str, list[str]] = {l: [] for l in self.leaves}
        for host, leaf in self.hosts.items():
            self.hosts_of_leaf[leaf].append(host)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, doc: Mapping) -> "Fabric":
        """Validate a fabric document (see README, "Formats") and build the model."""
        if not isinstance(doc, Mapping):
            raise InputError("fabric: expected a JSON object")
        for key in ("spines", "leaves", "hosts"):
            if key not in doc:
                raise InputError(f"fabric: missing field '{key}'")
        spines = _names(doc["spines"], "spines")
        leaves = _names(doc["leaves"], "leaves")
        if not spines:
            raise InputError("fabric: 'spines' is empty")
        if not leaves:
            raise InputError("fabric: 'leaves' is empty")
        clash = set(spines) & set(leaves)
        if clash:
            raise InputError(f"fabric: name used for a spine and a leaf: {sorted(clash)[0]}")
        hosts_doc = doc["hosts"]
        if not isinstance(hosts_doc, Mapping):
            raise InputError("fabric: 'hosts' must map host names to leaf names")
        leaf_set = set(leaves)
        hosts: dict[str, str] = {}
        for host, leaf in hosts_doc.items():
            if not isinstance(host, str) or not host:
                raise InputError("fabric: host names must be non-empty strings")
            if leaf not in leaf_set:
                raise InputError(f"fabric: host {host} is attached to unknown leaf {leaf!r}")
            if host in leaf_set or host in spines:
                raise InputError(f"fabric: host name {host} is also a switch name")
            hosts[host] = leaf
        gbps = doc.get("link_gbps", 100)
        if isinstance(gbps, bool) or not isinstance(gbps, (int, float)) or not gbps > 0:
            raise InputError(f"fabric: link_gbps must be a positive number, got {gbps!r}")
        down = set()
        down_doc = doc.get("down", [])
        if not isinstance(down_doc, list):
            raise InputError("fabric: 'down' must be a list of [leaf, spine] pairs")
        spine_set = set(spines)
        for item in down_doc:
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise InputError(f"fabric: bad entry in 'down': {item!r} (expected [leaf, spine])")
            a, b = item
            if a in spine_set and b in leaf_set:  # accept either order
                a, b = b, a
            if a not in leaf_set or b not in spine_set:
                raise InputError(f"fabric: 'down' names an unknown link {item!r}")
            down.add((a, b))
        extra = {k: v for k, v in doc.items() if k not in _FABRIC_KEYS}
        return cls(spines, leaves, hosts, float(gbps), down, extra)

    @classmethod
    def generate(cls, spines: int, leaves: int, hosts_per_leaf: int, link_gbps: float = 100.0,
                 failed_spines: int = 0) -> "Fabric":
        """A regular fabric named as the Mininet topology names it (s<j>, l<i>, h<i>_<k>).

        ``failed_spines`` fails the highest spine ids, as the paper's evaluation does.
        """
        if spines < 1 or leaves < 1 or hosts_per_leaf < 0:
            raise InputError("fabric: need at least one spine and one leaf")
        if not 0 <= failed_spines <= spines:
            raise InputError(f"fabric: cannot fail {failed_spines} of {spines} spines")
        sp = [f"s{j}" for j in range(spines)]
        lv = [f"l{i}" for i in range(leaves)]
        hosts = {f"h{i}_{k}": f"l{i}" for i in range(leaves) for k in range(hosts_per_leaf)}
        down = {(l, s) for s in sp[spines - failed_spines:] for l in lv}
        return cls(sp, lv, hosts, float(link_gbps), down)

    def to_dict(self) -> dict:
        doc = {"spines": list(self.spines), "leaves": list(self.leaves), "hosts": dict(self.hosts),
               "link_gbps": self.link_gbps,
               "down": sorted([list(x) for x in self.down],
                              key=lambda p: (self.leaf_index[p[0]], self.spine_index[p[1]]))}
        doc.update(self.extra)
        return doc

    # ---- queries ------------------------------------------------------------------------
    def leaf_of(self, host: str) -> str:
        try:
            return self.hosts[host]
        except KeyError:
            raise InputError(f"unknown host {host!r}") from None

    def address(self, host: str) -> str:
        """The host's address for hashing: its declared IP, else its name."""
        return self.host_ip.get(host, host)

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

    def link_bps(self) -> float:
        """Capacity of every link in bytes per second."""
        return self.link_gbps * 1e9 / 8

    def with_down(self, down: Iterable[tuple[str, str]]) -> "Fabric":
        """A copy with another set of failed links (the model is immutable in use)."""
        return Fabric(list(self.spines), list(self.leaves), dict(self.hosts), self.link_gbps,
                      set(down), dict(self.extra))


def spine_list(mask: int) -> list[int]:
    """Bit positions set in ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _names(value, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"fabric: '{what}' must be a list of non-empty names")
    if len(set(value)) != len(value):
        dup = next(v for v in value if value.count(v) > 1)
        raise InputError(f"fabric: duplicate name {dup!r} in '{what}'")
    return list(value)
