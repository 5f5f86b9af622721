"""Host mode's member fields on Clos fabrics with bundles: where a source port codes the planned
member of every bundle hop, above the bits that choose the hops (``enforcement.clos_hostmode``
says the pipeline that reads them). Apart so that ``clos_rules.check_mode_on`` can refuse a
fabric whose fields do not fit without importing the pipeline."""
from __future__ import annotations

from controller.enforcement.clos_labels import label_space
from controller.enforcement.rules import sport_buckets
from controller.errors import InputError
from controller.model.clos import Clos

PORT_BITS = 14  # host mode's ports 49152..65535: 0xC000 and 14 free bits


def leaf_bits(fabric: Clos, leaf: str) -> int:
    """Source-port bits the leaf's plane gives its leaves (enough for every uplink of a pod)."""
    p = fabric.planes[fabric.plane_of[leaf]]
    return (sport_buckets(max((len(a) for a in p.aggs), default=1)) - 1).bit_length()


class MemberBits:
    """Where a port codes the members of its path's bundle hops (``clos_hostmode``): field f
    (0 leaf -> aggregation switch, 1 aggregation switch -> core, 2 core -> aggregation switch,
    3 aggregation switch -> leaf) is ``widths[f]`` bits from ``shifts[f]``, all above every
    plane's leaf and aggregation bits (``base``). Without bundles every width is 0.

    >>> f = Clos.fat_tree(4, 1)
    >>> f.bundles[("l0", "a0_1")] = 2
    >>> f.bundles[("a0_0", "c0_1")] = 3
    >>> b = MemberBits(f)
    >>> b.base, b.widths, b.shifts, b.span
    (2, (1, 2, 2, 1), (2, 3, 5, 7), 256)
    >>> b.code((1, 2, 0, 1)) == (1 << 2) | (2 << 3) | (1 << 7), b.code((1, 1)) == 4 | (1 << 7)
    (True, True)
    >>> b.index_port(5) - 49152, b.port(49152 + 257, (1, 2, 0, 1)) - 49152
    (257, 405)
    """

    def __init__(self, fabric):
        self.base, self.widths = 0, (0, 0, 0, 0)
        self.base = max(leaf_bits(fabric, p.leaves[0]) + (sport_buckets(max(
            (len(g) for g in p.cores), default=1)) - 1).bit_length()
            for p in fabric.planes if p.leaves)
        if fabric.bundled:
            ls = label_space(fabric)
            wl, wc = (ls.bl - 1).bit_length(), (ls.bc - 1).bit_length()
            self.widths = (wl, wc, wc, wl)
        self.shifts = tuple(self.base + sum(self.widths[:k]) for k in range(4))
        self.width = sum(self.widths)
        self.mask = ((1 << self.width) - 1) << self.base
        self.span = 1 << max(0, PORT_BITS - self.width)  # ports that differ outside the fields

    def check(self) -> None:
        """An InputError naming the bits needed when the fields do not fit below bit 14."""
        if self.base + self.width > PORT_BITS:
            raise InputError(
                f"mode host is not served on this fabric: its source ports need {self.base} "
                f"bits to choose the aggregation switches and cores and {self.width} bits to "
                f"code the bundles' members (fields of {', '.join(map(str, self.widths))} bits), "
                f"{self.base + self.width} in all, more than the {PORT_BITS} of ports "
                "49152-65535; use flow or sr mode")

    def index_port(self, i: int) -> int:
        """The i-th port whose member fields are all 0 (ports probed in that order)."""
        low = i & ((1 << self.base) - 1)
        return 0xC000 | low | ((i >> self.base) << (self.base + self.width))

    def code(self, members) -> int:
        """The member bits of a path's members (3 switches: fields 0 and 3; 5: fields 0-3)."""
        fields = (0, 3) if len(members) == 2 else range(len(members))
        return sum(m << self.shifts[k] for k, m in zip(fields, members) if self.widths[k])

    def port(self, port: int, members) -> int:
        """``port`` with the member fields of ``members`` (None: unchanged)."""
        return port if members is None or not self.width else (port & ~self.mask) | self.code(
            members)

    def hop_port(self, port: int) -> int:
        """``port`` with its member fields 0: the port whose probe learned its hops."""
        return port & ~self.mask


__all__ = ["MemberBits", "PORT_BITS", "leaf_bits"]
