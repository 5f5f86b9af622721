"""Directed links of the fabric as dense ids, and the path of a flow over a chosen spine.

Ids: host uplinks (host -> leaf), host downlinks (leaf -> host), then leaf -> spine uplinks and
spine -> leaf downlinks. Every link has the fabric's capacity.
"""
from __future__ import annotations

from controller.model.fabric import Fabric


class LinkIndex:
    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.hosts = list(fabric.hosts)
        self.host_id = {h: i for i, h in enumerate(self.hosts)}
        self.n_hosts = len(self.hosts)
        self.n_leaves, self.n_spines = len(fabric.leaves), len(fabric.spines)
        self.up0 = 2 * self.n_hosts
        self.down0 = self.up0 + self.n_leaves * self.n_spines
        self.count = self.down0 + self.n_leaves * self.n_spines
        self.leaf_of_host = [fabric.leaf_index[fabric.hosts[h]] for h in self.hosts]

    def host_up(self, host: str) -> int:
        return self.host_id[host]

    def host_down(self, host: str) -> int:
        return self.n_hosts + self.host_id[host]

    def up(self, leaf: int, spine: int) -> int:
        return self.up0 + leaf * self.n_spines + spine

    def down(self, spine: int, leaf: int) -> int:
        return self.down0 + leaf * self.n_spines + spine

    def path(self, src: str, dst: str, spine: int | None) -> list[int]:
        """Links crossed by src -> dst; ``spine`` None for an intra-leaf flow."""
        ids = [self.host_up(src), self.host_down(dst)]
        if spine is not None:
            a = self.leaf_of_host[self.host_id[src]]
            b = self.leaf_of_host[self.host_id[dst]]
            ids += [self.up(a, spine), self.down(spine, b)]
        return ids

    def name(self, link: int) -> str:
        f = self.fabric
        if link < self.n_hosts:
            h = self.hosts[link]
            return f"{h}->{f.hosts[h]}"
        if link < self.up0:
            h = self.hosts[link - self.n_hosts]
            return f"{f.hosts[h]}->{h}"
        if link < self.down0:
            leaf, spine = divmod(link - self.up0, self.n_spines)
            return f"{f.leaves[leaf]}->{f.spines[spine]}"
        leaf, spine = divmod(link - self.down0, self.n_spines)
        return f"{f.spines[spine]}->{f.leaves[leaf]}"
