"""Destination prefixes: the ``ipv4_dst`` matches that stand for a leaf's hosts, or a pod's.

A switch above the leaves forwards by the destination's leaf (or pod), not by the host, so it
needs one entry per leaf (or pod) when that leaf's addresses share a prefix no other host's
address falls in, rather than one per host of the fabric. The rule, per plane (a switch sees
its own plane's addresses only):

* a leaf is matched by the longest prefix common to its hosts' addresses if that prefix holds
  no address of a host of another leaf; otherwise by its addresses one by one (as before);
* a pod likewise by the longest prefix common to all its hosts' addresses if that holds no
  address of a host outside the pod; otherwise by its leaves' matches.

``topologies/clos.py`` (``Clos.wire``) gives leaf i the hosts
10.x.i.1, 10.x.i.2, ...: every leaf a prefix of its own, every pod (contiguous leaves) one too.
Addresses a fabric document declares get prefixes wherever they are contiguous in this sense,
and fall back per host, leaf by leaf, where they are not.

Matches of different groups never overlap, so their priorities need not order them: two
prefixes are nested or disjoint, and a used prefix holds its group's hosts and no other, so a
group's prefix inside another's would put its hosts in the other's, and the other's inside it
the other's hosts in it. A per-host entry of a leaf that fell back lies in no used prefix for
the same reason. A planned flow's exact ``ipv4_dst`` at a higher priority always wins. The
one nesting used on purpose is a pod's prefix under some of its own leaves' (``of_classes``):
a leaf switch puts the pod's below them, at a priority of its own.

Pure function of the addresses: with zero configuration hosts appear as they speak, and a new
host of leaf B inside leaf A's prefix turns A back to per-host entries in the next desired
tables (and B's prefix, if it holds A's hosts, too). An address outside every used prefix and
every host's address (a host not yet learned) is matched by no static entry above the leaves,
as before: dropped at the aggregation switch or spine; inside a prefix it is sent down to that
leaf, which drops it (nothing comes back up from a leaf).

Match values are in the form Ryu (and os-ken) report a flow stats entry's match, so the
reconciler finds the entries equal: a /32 as the address string, a shorter prefix as
(network, netmask) strings with the host bits zero (what Open vSwitch returns). A /0 (addresses
that share no leading bit) is never used: a switch drops an all-zero mask from the match.

Complexity: O(n log n) per plane for its n addresses (one sort, then per group two bisections
and a pass over its own addresses); ``dst_prefixes`` keeps the result on the fabric object (a
model is immutable in use; ``__post_init__`` drops it).

>>> cover({"l0": ["10.0.0.1", "10.0.0.2"], "l1": ["10.0.1.1", "10.0.1.2"]})
{'l0': [('10.0.0.0', '255.255.255.252')], 'l1': [('10.0.1.0', '255.255.255.252')]}
>>> cover({"l0": ["10.0.0.1", "10.0.0.3"], "l1": ["10.0.0.2"]})  # l0's /30 holds l1's host
{'l0': ['10.0.0.1', '10.0.0.3'], 'l1': ['10.0.0.2']}
>>> cover({"l0": ["10.0.0.1"]}, others=["10.0.0.2"])
{'l0': ['10.0.0.1']}
"""
from __future__ import annotations

import ipaddress
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CACHE = "_dst_prefixes"  # the fabric object's attribute holding ``DstPrefixes`` per plane


def _int(address: str) -> int:
    return int(ipaddress.IPv4Address(address))


def match_of(network: int, length: int) -> str | tuple[str, str]:
    """The ``ipv4_dst`` match value of a prefix, as a switch reports it back.

    >>> match_of(0x0A000100, 24), match_of(0x0A000105, 32)
    (('10.0.1.0', '255.255.255.0'), '10.0.1.5')
    """
    if length == 32:
        return str(ipaddress.IPv4Address(network))
    mask = (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF
    return (str(ipaddress.IPv4Address(network & mask)), str(ipaddress.IPv4Address(mask)))


def common_prefix(addresses: Iterable[int]) -> tuple[int, int]:
    """(network, length) of the longest prefix common to some addresses (integers).

    >>> common_prefix([0x0A000001, 0x0A000008])
    (167772160, 28)
    """
    values = list(addresses)
    lo, hi = min(values), max(values)
    length = 32 - (lo ^ hi).bit_length()
    return lo >> (32 - length) << (32 - length) if length else 0, length


def cover(groups: Mapping, others: Iterable[str] = ()) -> dict:
    """Per group (key -> its addresses), its ``ipv4_dst`` match values: [its common prefix]
    when that prefix holds no address of another group nor of ``others``, else its addresses
    in group order; a group without addresses gets []. O(n log n) for n addresses."""
    values = {k: [_int(a) for a in addrs] for k, addrs in groups.items()}
    universe = sorted([v for vs in values.values() for v in vs] + [_int(a) for a in others])
    out = {}
    for k, vs in values.items():
        if not vs:
            out[k] = []
            continue
        net, length = common_prefix(vs)
        top = net | ((1 << (32 - length)) - 1)
        inside = bisect_right(universe, top) - bisect_left(universe, net)
        out[k] = [match_of(net, length)] if length and inside == len(vs) else list(groups[k])
    return out


@dataclass(frozen=True)
class DstPrefixes:
    """The matches of one plane's leaves and pods (``cover``'s rule)."""
    leaf: dict  # leaf -> its matches
    pod: dict  # pod index -> its prefix, or its leaves' matches
    pod_of: dict = field(default_factory=dict)  # leaf -> its pod index
    members: dict = field(default_factory=dict)  # pod index -> its leaves, in order

    def of_leaves(self, leaves: Iterable[str]) -> list:
        """The matches of ``leaves`` (in their order): a pod all of whose leaves are among
        them by the pod's matches (its one prefix where it has one), the other leaves by
        their own. A leaf's degraded class after an aggregation switch is lost holds every
        leaf of that pod: one entry for the pod, not one per leaf of it.

        >>> d = plane_prefixes({"h0": "10.0.0.1", "h1": "10.0.1.1", "h2": "10.0.2.1"},
        ...                    {"l0": ["h0"], "l1": ["h1"], "l2": ["h2"]},
        ...                    {"l0": 0, "l1": 0, "l2": 1})
        >>> d.of_leaves(["l0", "l1", "l2"]), d.of_leaves(["l1"])
        ([('10.0.0.0', '255.255.254.0'), '10.0.2.1'], ['10.0.1.1'])
        """
        names = list(dict.fromkeys(leaves))
        count = Counter(self.pod_of.get(n) for n in names)
        out, done = [], set()
        for n in names:
            q = self.pod_of.get(n)
            if q is not None and count[q] == len(self.members.get(q, ())):
                if q not in done:
                    done.add(q)
                    out += self.pod.get(q, [])
            else:
                out += self.leaf.get(n, [])
        return out

    def of_classes(self, classes: list[list[str]], own: str | None = None) -> tuple[list, list]:
        """The matches of several classes of leaves (class c: ``classes[c]``, disjoint) as
        (pod-wide [(match, c)], per leaf [(match, c, or None for a leaf in no class)]), for a
        switch that puts the pod-wide matches below the per-leaf ones. A pod with a prefix
        of its own is matched by it, to the class holding most of its leaves, when that takes
        fewer entries than those leaves' matches: its other leaves are then matched on their
        own above it, each to its class (None: to what the switch does with a leaf in no
        class). A whole pod in one class is its prefix alone. ``own``: a leaf whose hosts the
        switch matches above both anyway (its own): never matched here.

        A lost aggregation switch reported in two steps (6 of a pod's 8 leaves cut off, then
        all 8) costs a leaf of another pod 3 entries, then 1, instead of 6, then 1.

        >>> d = plane_prefixes({f"h{i}": f"10.0.{i}.1" for i in range(4)},
        ...                    {f"l{i}": [f"h{i}"] for i in range(4)},
        ...                    {f"l{i}": 0 for i in range(4)})
        >>> d.of_classes([["l0", "l1", "l2"]])  # l3 in no class: above the pod's prefix
        ([(('10.0.0.0', '255.255.252.0'), 0)], [('10.0.3.1', None)])
        >>> d.of_classes([["l0", "l1"], ["l2"]], own="l3")  # l3's hosts: matched above
        ([(('10.0.0.0', '255.255.252.0'), 0)], [('10.0.2.1', 1)])
        >>> d.of_classes([["l0"], ["l2"]], own="l3")  # the prefix and l1: not fewer
        ([], [('10.0.0.1', 0), ('10.0.2.1', 1)])
        """
        class_of = {n: c for c, names in enumerate(classes) for n in names}
        wide, narrow = [], []
        for q in dict.fromkeys(self.pod_of.get(n) for n in class_of):
            names = self.members.get(q) or [n for n in class_of if self.pod_of.get(n) == q]
            counts = Counter(class_of[n] for n in names if n in class_of)
            best = max(counts, key=lambda c: (counts[c], -c))  # most leaves; lowest class
            rest = [n for n in names if n != own and class_of.get(n) != best]
            cost = sum(len(self.leaf.get(n, [])) for n in names if class_of.get(n) == best)
            extra = sum(len(self.leaf.get(n, [])) for n in rest if n not in class_of)
            if q is not None and len(self.pod.get(q, [])) == 1 and (1 + extra < cost or not rest):
                wide.append((self.pod[q][0], best))
                kept = rest
            else:
                kept = [n for n in names if n in class_of]
            narrow += [(m, class_of.get(n)) for n in kept for m in self.leaf.get(n, [])]
        return wide, narrow

    def of_pods(self, pods: Iterable[int]) -> list:
        return [m for q in pods for m in self.pod.get(q, [])]


def plane_prefixes(addresses: Mapping[str, str], hosts_of: Mapping[str, list],
                   pod_of: Mapping[str, int]) -> DstPrefixes:
    """``DstPrefixes`` from one plane's addresses (host -> address), its leaves' hosts
    (leaf -> hosts, in that order) and their pods (leaf -> pod index)."""
    leaf_addrs = {leaf: [addresses[h] for h in hosts_of.get(leaf, []) if h in addresses]
                  for leaf in pod_of}
    placed = {h for leaf in pod_of for h in hosts_of.get(leaf, [])}
    stray = [a for h, a in addresses.items() if h not in placed]
    leaf = cover(leaf_addrs, stray)
    members: dict[int, list[str]] = {}
    for name, q in pod_of.items():
        members.setdefault(q, []).append(name)
    pods = cover({q: [a for name in ls for a in leaf_addrs[name]] for q, ls in members.items()},
                 stray)
    # one match: the pod's prefix (or its only address); several: it fell back, to its leaves'
    return DstPrefixes(leaf, {q: pods[q] if len(pods[q]) <= 1 else leaf_matches(leaf, names)
                              for q, names in members.items()},
                       dict(pod_of), members)


def leaf_matches(leaf: Mapping, names: Iterable[str]) -> list:
    return [m for name in names for m in leaf.get(name, [])]


def dst_prefixes(fabric, switch: str) -> DstPrefixes:
    """The prefixes of ``switch``'s plane of a ``model.clos.Clos`` (a leaf-spine is a plane
    of one pod), computed once per fabric object."""
    cache = fabric.__dict__.setdefault(CACHE, {})
    q = fabric.plane_of_switch(switch)
    if q not in cache:
        p = fabric.planes[q]
        cache[q] = plane_prefixes(fabric.addresses_at(switch), fabric.hosts_on,
                                  dict(zip(p.leaves, p.pod_of_leaf)))
    return cache[q]
