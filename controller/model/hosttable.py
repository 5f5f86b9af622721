"""A three-tier Clos fabric from a host-location table (``model.clos``).

A host-location table gives, per host, its core group, its pod and its ToR, and nothing else:
the table of the Alibaba cluster studied in Crux (``data/traces/lingjun-topo.csv``, columns
``ip,DSW,PSW,ASW``: hashed address, core group, pod, ToR numbered within its pod) is one. The
rest of the fabric is a parameter (``Shape``), with defaults stated in
docs/results/trace-replay.md:

* every host is one port of ``host_gbps`` on its ToR: the fabric modelled is one *rail* of the
  cluster (one NIC per GPU, 8 per host, 2 x 200 Gb/s each as in Alibaba HPN); the 8 rails carry
  the same traffic on the same placement, so one represents them all;
* every pod has ``aggs_per_pod`` aggregation switches, every ToR of a pod linked to each of them
  by a bundle of ``leaf_bundle`` links of ``leaf_gbps``;
* core group g has ``cores_per_group`` cores, each linked to the g-th aggregation switch of every
  pod by ``core_bundle`` links of ``core_gbps``.

Names: ToRs ``<pod>-<ToR>`` (``P10-S14``), aggregation switches ``<pod>-a<slot>``, cores
``c<group>_<j>``, hosts ``h`` + the shortest prefix of the hashed address (at least 8 hex
digits) that is unique in the table. ``oversubscription`` gives the ratio at each tier.

>>> rows = [("aa11", "G", "P1", "S1"), ("bb22", "G", "P1", "S2"), ("cc33", "G", "P2", "S1")]
>>> fab = from_rows(rows, Shape(aggs_per_pod=2, cores_per_group=1))
>>> fab.summary()
'1 plane(s) x 3 tiers: 3 leaves, 4 aggregation switches, 2 cores in 2 groups, 2 pods, 3 hosts'
>>> sorted(fab.hosts.items())
[('haa11', 'P1-S1'), ('hbb22', 'P1-S2'), ('hcc33', 'P2-S1')]
"""
from __future__ import annotations

import csv
from dataclasses import asdict, dataclass

from controller.errors import InputError
from controller.model.clos import Clos

COLUMNS = ("ip", "DSW", "PSW", "ASW")
MIN_PREFIX = 8


@dataclass(frozen=True)
class Shape:
    """What a host table does not say. Defaults: one rail of 400 Gb/s per host; 8 aggregation
    switches per pod, one 400 Gb/s link to each from every ToR (1:1 at a ToR of 8 hosts, the
    fullest in the Alibaba table); 4 cores per group, one 400 Gb/s link to each aggregation
    switch of its slot (about 12:1 at the core for a pod of 48 ToRs)."""
    aggs_per_pod: int = 8
    cores_per_group: int = 4
    host_gbps: float = 400.0
    leaf_gbps: float = 400.0
    core_gbps: float = 400.0
    leaf_bundle: int = 1
    core_bundle: int = 1

    def __post_init__(self) -> None:
        for name in ("aggs_per_pod", "cores_per_group", "leaf_bundle", "core_bundle"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"host table: {name} must be a whole number >= 1, got {v!r}")
        for name in ("host_gbps", "leaf_gbps", "core_gbps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise InputError(f"host table: {name} must be a positive number, got {v!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def read_rows(path: str) -> list[tuple[str, str, str, str]]:
    """(address, core group, pod, ToR) per host of a CSV table with the header ``COLUMNS``."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        head = next(reader, None)
        if head is None or tuple(h.strip() for h in head) != COLUMNS:
            raise InputError(f"host table {path}: expected the header {','.join(COLUMNS)}, "
                             f"got {head!r}")
        rows = []
        for n, row in enumerate(reader, 2):
            if not row:
                continue
            if len(row) != 4 or not all(x.strip() for x in row):
                raise InputError(f"host table {path}: line {n}: expected 4 non-empty fields, "
                                 f"got {row!r}")
            rows.append(tuple(x.strip() for x in row))
    if not rows:
        raise InputError(f"host table {path}: no hosts")
    return rows


def host_names(addresses: list[str]) -> dict[str, str]:
    """Address -> ``h`` + its shortest unique prefix (at least ``MIN_PREFIX`` characters)."""
    if len(set(addresses)) != len(addresses):
        dup = next(a for a in addresses if addresses.count(a) > 1)
        raise InputError(f"host table: host {dup} appears twice")
    n = MIN_PREFIX
    while len({a[:n] for a in addresses}) < len(addresses):
        n += 1
    return {a: "h" + a[:n] for a in addresses}


def from_rows(rows, shape: Shape | None = None) -> Clos:
    """The fabric of ``rows`` (address, core group, pod, ToR): pods in order of first
    appearance, ToRs of a pod in natural order (S2 before S10)."""
    shape = shape or Shape()
    groups = sorted({r[1] for r in rows})
    if len(groups) != 1:
        raise InputError(f"host table: {len(groups)} core groups ({', '.join(groups)}); one "
                         "core group reaching every pod is supported")
    names = host_names([r[0] for r in rows])
    pods: dict[str, set[str]] = {}
    for _, _, pod, tor in rows:
        pods.setdefault(pod, set()).add(tor)
    doc_pods = {}
    for pod, tors in pods.items():
        doc_pods[pod] = {"leaves": [f"{pod}-{t}" for t in sorted(tors, key=_natural)],
                         "aggs": [f"{pod}-a{g}" for g in range(shape.aggs_per_pod)]}
    doc = {"pods": doc_pods,
           "cores": [[f"c{g}_{j}" for j in range(shape.cores_per_group)]
                     for g in range(shape.aggs_per_pod)],
           "hosts": {names[a]: f"{pod}-{tor}" for a, _, pod, tor in rows},
           "link_gbps": {"host": shape.host_gbps, "leaf": shape.leaf_gbps,
                         "core": shape.core_gbps},
           "bundle": {"leaf": shape.leaf_bundle, "core": shape.core_bundle}}
    return Clos.from_dict(doc)


def load(path: str, shape: Shape | None = None) -> Clos:
    return from_rows(read_rows(path), shape)


def oversubscription(fabric: Clos) -> dict:
    """Per tier, down capacity over up capacity: at the ToRs (hosts x host speed over uplinks;
    the fullest ToR and the mean) and at the aggregation switches, per pod (the ToRs' links
    to one aggregation switch over its links to the cores). First plane, nothing down."""
    plane = fabric.planes[0]
    g = fabric.link_gbps
    per_leaf: dict[str, int] = {}
    for leaf in fabric.hosts.values():
        per_leaf[leaf] = per_leaf.get(leaf, 0) + 1
    tor = []
    for k, leaf in enumerate(plane.leaves):
        up = sum(fabric.bundle(leaf, a) for a in plane.aggs[plane.pod_of_leaf[k]]) * g["leaf"]
        tor.append(per_leaf.get(leaf, 0) * g["host"] / up)
    agg = {}
    for p, pod in enumerate(plane.pods):
        a0 = plane.aggs[p][0]
        down = sum(fabric.bundle(leaf, a0) for k, leaf in enumerate(plane.leaves)
                   if plane.pod_of_leaf[k] == p) * g["leaf"]
        up = sum(fabric.bundle(a0, c) for c in plane.cores[0]) * g["core"] if plane.cores else 0
        agg[pod] = round(down / up, 3) if up else None
    return {"tor_max": round(max(tor), 3), "tor_mean": round(sum(tor) / len(tor), 3),
            "aggregation_per_pod": agg}


def _natural(name: str):
    digits = "".join(c for c in name if c.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)
