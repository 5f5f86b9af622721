"""Which switches of a graph are spines and which are leaves (``recognise`` in topology.py
calls it with the switch graph seen by LLDP)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # networkx where it is used: the controller's start loads no networkx (issue 74)
    import networkx as nx

SPINE, LEAF = "spine", "leaf"


def assign_roles(graph: nx.Graph, evidence: Mapping, known: Mapping | None = None) -> dict:
    """Spine or leaf for every switch of ``graph`` (nodes: switches, edges: cables).

    ``evidence`` maps a switch to a tuple of counts that speak for a leaf, strongest first
    (recognise passes (hosts heard, up ports facing no switch)). Each connected component that
    is bipartite is split by ``networkx.algorithms.bipartite``; the spine side is chosen by the
    roles in ``known`` (a previous recognition) if they vote, else as the side with the smaller
    share of switches having evidence (first count first), else the smaller side, else the
    side holding the lowest node. A component that is not bipartite (a leaf-leaf or
    spine-spine cable) starts from ``known``, else evidence (any: leaf); then any switch with
    more neighbours of its own role than of the other flips, until none does (each flip
    removes same-role edges, so this ends). An isolated switch gets only its ``known`` role.
    O(V + E) per round, at most E rounds (one in practice).

    >>> import networkx as nx
    >>> g = nx.Graph([(1, 10), (1, 11), (2, 10), (2, 11), (1, 2)])   # leaves 1, 2 cabled
    >>> assign_roles(g, {1: (2, 2), 2: (0, 2), 10: (0, 0), 11: (0, 0)})
    {1: 'leaf', 2: 'leaf', 10: 'spine', 11: 'spine'}
    """
    import networkx as nx
    known = known or {}
    roles: dict = {}
    for comp in sorted(nx.connected_components(graph), key=min):
        sub = graph.subgraph(comp)
        if len(comp) == 1:
            (node,) = comp
            if known.get(node) in (SPINE, LEAF):
                roles[node] = known[node]
            continue
        if nx.is_bipartite(sub):
            x, y = nx.bipartite.sets(sub)
            spines = _spine_side(x, y, evidence, known)
            label = {n: SPINE if n in spines else LEAF for n in comp}
        else:
            label = {n: known.get(n) if known.get(n) in (SPINE, LEAF)
                     else (LEAF if any(evidence.get(n, ())) else SPINE) for n in comp}
        changed = True
        while changed:
            changed = False
            for n in sorted(comp):
                same = sum(1 for m in sub[n] if label[m] == label[n])
                if 2 * same > sub.degree(n):
                    label[n] = LEAF if label[n] == SPINE else SPINE
                    changed = True
        roles.update(label)
    return dict(sorted(roles.items()))


def _spine_side(x: set, y: set, evidence: Mapping, known: Mapping) -> set:
    votes = sum((known.get(n) == SPINE) - (known.get(n) == LEAF) for n in x) \
        - sum((known.get(n) == SPINE) - (known.get(n) == LEAF) for n in y)
    if votes:
        return x if votes > 0 else y
    width = max((len(evidence.get(n, ())) for n in x | y), default=0)
    for i in range(width):  # shares, cross-multiplied
        fx = sum(1 for n in x if evidence.get(n, ())[i:i + 1] > (0,)) * len(y)
        fy = sum(1 for n in y if evidence.get(n, ())[i:i + 1] > (0,)) * len(x)
        if fx != fy:
            return x if fx < fy else y
    if len(x) != len(y):
        return x if len(x) < len(y) else y
    return x if min(x) < min(y) else y
