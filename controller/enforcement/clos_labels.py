"""MPLS labels of ``sr`` mode on Clos fabrics (``enforcement.clos_rules``), apart so the rule
builders stay small: a label names a switch and, on a fabric with bundles, the members that
the hops after the label's push take, so a stack of at most two labels pins every member.

A tier's labels start at ``LABEL_BASE`` (leaves 200000, aggregation switches 300000, cores
100000); switch i of a tier (counting over all planes in declaration order) owns the ``C``
labels ``LABEL_BASE + i * C + code``, code 0 .. C - 1. With Bl and Bc the largest bundle sizes
between leaves and aggregation switches and between aggregation switches and cores (the
tier's default size counting, as for ``Clos.bundled``; Bc = 1 without cores):

* a leaf's label has C = Bl * Bc codes, code = (member core -> aggregation switch) * Bl +
  (member aggregation switch -> leaf): the destination leaf's label says which member the core
  and the destination's aggregation switch send the packet down;
* a core's label has C = Bc codes, code = the member aggregation switch -> core;
* an aggregation switch's label has one (no rule matches it).

Without bundles C = 1 and a label is ``LABEL_BASE + i``. A tier's labels must stay below the
next base (``LABEL_SPACE`` of them): ``LabelSpace.check`` is the InputError naming the fabric's
size when they would not; sr is then refused, and no switch holds label entries.

>>> from controller.model.clos import Clos
>>> f = Clos.fat_tree(4, 1)
>>> f.bundles[("l0", "a0_1")] = 2
>>> f.bundles[("a0_0", "c0_1")] = 3
>>> ls = LabelSpace(f)
>>> ls.leaf_codes, ls.core_codes, ls.of("l1", ls.leaf_code(2, 1)), ls.of("c0_1", 2)
(6, 3, 200011, 100005)
>>> ls.down_members(5)
(2, 1)
"""
from __future__ import annotations

from controller.errors import InputError
from controller.model.clos import Clos

LABEL_BASE = {0: 200000, 1: 300000, 2: 100000}  # by tier: leaves, aggregation switches, cores
LABEL_SPACE = 100000  # labels per tier


class LabelSpace:
    """The labels of one fabric: switch indices per tier and codes per label."""

    def __init__(self, fabric: Clos):
        self.fabric = fabric
        self.index: dict[str, int] = {}
        counts = {0: 0, 1: 0, 2: 0}
        for s, tier in fabric.tier_of.items():
            self.index[s] = counts[tier]
            counts[tier] += 1
        self.counts = counts
        # from the bundle sizes, not link by link: every flow's entry builds one
        widest = {0: fabric.bundle_default["leaf"],
                  1: fabric.bundle_default["core"] if any(p.cores for p in fabric.planes) else 1}
        for (lo, _up), n in fabric.bundles.items():
            widest[fabric.tier_of[lo]] = max(widest[fabric.tier_of[lo]], n)
        self.bl, self.bc = widest[0], widest[1]
        self.leaf_codes, self.core_codes = self.bl * self.bc, self.bc

    def codes(self, tier: int) -> int:
        return {0: self.leaf_codes, 1: 1, 2: self.core_codes}[tier]

    def of(self, switch: str, code: int = 0) -> int:
        tier = self.fabric.tier_of[switch]
        return LABEL_BASE[tier] + self.index[switch] * self.codes(tier) + code

    def leaf_code(self, core_member: int, agg_member: int) -> int:
        """A leaf label's code for the members core -> aggregation switch and aggregation
        switch -> leaf."""
        return core_member * self.bl + agg_member

    def down_members(self, code: int) -> tuple[int, int]:
        """(member core -> aggregation switch, member aggregation switch -> leaf) of a leaf
        label's code."""
        return divmod(code, self.bl)

    def overflow(self) -> str | None:
        """What does not fit in a tier's label space, or None."""
        for tier, what in ((0, "leaves"), (2, "cores")):
            need = self.counts[tier] * self.codes(tier)
            if need > LABEL_SPACE:
                return (f"the fabric's {self.counts[tier]} {what} x {self.codes(tier)} label codes "
                        f"(bundles of up to {self.bl} links leaf-aggregation and {self.bc} "
                        f"aggregation-core) need {need} labels, more than the {LABEL_SPACE} "
                        f"from {LABEL_BASE[tier]}")
        return None

    @property
    def fits(self) -> bool:
        return self.overflow() is None

    def check(self) -> None:
        """An InputError naming the fabric's size when its labels do not fit."""
        why = self.overflow()
        if why:
            raise InputError(f"mode sr is not served on this fabric: {why}")

    def code_range(self, tier: int) -> range:
        """The codes that static entries serve: none when the labels do not fit."""
        return range(self.codes(tier)) if self.fits else range(0)


def label_space(fabric: Clos) -> LabelSpace:
    """The fabric's ``LabelSpace``, kept on the fabric object while its switches and bundle
    sizes stay (sr builds one entry per flow: rebuilding it cost O(switches) each)."""
    key = (len(fabric.tier_of), tuple(fabric.bundle_default.items()),
           tuple(fabric.bundles.items()))
    kept = fabric.__dict__.get("_label_space")
    if kept is None or kept[0] != key:
        kept = fabric.__dict__["_label_space"] = (key, LabelSpace(fabric))
    return kept[1]

