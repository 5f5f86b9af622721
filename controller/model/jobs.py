"""Training jobs and the flows they put on the fabric in every iteration.

A job is either a ring All-Reduce collective (one ring, or several rings that run side by side,
one per model shard) or an explicit list of flows. ``Job.flows()`` lists one transfer per
(source, destination) pair of one communication step: that is what a planner routes, because the
same pairs repeat in every step and every iteration.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from controller.errors import InputError
from controller.model.clos import Clos

PROTOCOLS = {"tcp": 6, "udp": 17}
MAX_FLOWS_PER_JOB = 65536  # explicit flows, or ring members over all rings
MAX_BYTES = 1e15  # a flow's or a ring member's bytes per step (1 PB; openapi.json says so)
MAX_SECONDS = 1e9  # start_s and compute_s (about 32 years)
_JOB_KEYS = {"id", "flows", "collective", "ranks", "rings", "members", "bytes", "start_s",
             "compute_s", "proto", "sport", "dport", "algorithm", "mode", "objective",
             "ring_order", "learn", "max_parts", "spray"}
_FLOW_KEYS = {"src", "dst", "bytes", "proto", "sport", "dport"}


@dataclass(frozen=True)
class Flow:
    """One transfer between two hosts; ``bytes`` is what it moves per step."""
    job: str
    src: str
    dst: str
    bytes: float
    proto: int = 6
    sport: int = 0
    dport: int = 0
    ring: Optional[int] = None  # ring index within the job, for collectives

    def five_tuple(self) -> tuple:
        return (self.src, self.dst, self.proto, self.sport, self.dport)


@dataclass
class Job:
    id: str
    rings: list[list[str]] = field(default_factory=list)  # collective: rank lists
    ring_bytes: float = 0.0  # bytes S reduced per member of each ring
    explicit: list[Flow] = field(default_factory=list)  # explicit flows
    start_s: float = 0.0
    compute_s: float = 0.0
    proto: int = 6
    sport: int = 0
    dport: int = 0
    options: dict = field(default_factory=dict)  # per-job algorithm/mode/learn requests
    members: list[str] = field(default_factory=list)  # declared by members only: no flow yet

    @property
    def is_collective(self) -> bool:
        return bool(self.rings)

    def steps(self) -> int:
        """Synchronous steps per iteration: 2(n-1) for a ring, 1 for explicit flows."""
        if self.is_collective:
            return max(2 * (len(r) - 1) for r in self.rings)
        return 1

    def flows(self) -> list[Flow]:
        """One flow per (src, dst) pair of a step; ring flows in rank order, ring by ring."""
        if not self.is_collective:
            return list(self.explicit)
        out = []
        for r, ranks in enumerate(self.rings):
            n = len(ranks)
            chunk = self.ring_bytes / n
            for i in range(n):
                out.append(Flow(self.id, ranks[i], ranks[(i + 1) % n], chunk, self.proto,
                                self.sport, self.dport, r))
        return out

    def ideal_allreduce_s(self, link_bps: float) -> float:
        """Best possible communication time per iteration at line rate with no sharing."""
        if self.is_collective:
            return max(2 * (len(r) - 1) * (self.ring_bytes / len(r)) / link_bps for r in self.rings)
        per_nic: dict[tuple[str, str], float] = {}  # (direction, host) -> bytes
        for f in self.explicit:
            per_nic[("out", f.src)] = per_nic.get(("out", f.src), 0.0) + f.bytes
            per_nic[("in", f.dst)] = per_nic.get(("in", f.dst), 0.0) + f.bytes
        return max(per_nic.values()) / link_bps if per_nic else 0.0

    def hosts(self) -> set[str]:
        if self.is_collective:
            return {h for r in self.rings for h in r}
        return {h for f in self.explicit for h in (f.src, f.dst)} | set(self.members)

    def to_dict(self) -> dict:
        doc: dict = {"id": self.id}
        if self.is_collective:
            doc.update(collective="ring_allreduce", rings=[list(r) for r in self.rings],
                       bytes=self.ring_bytes)
            if (self.proto, self.sport, self.dport) != (6, 0, 0):
                doc.update(proto=self.proto, sport=self.sport, dport=self.dport)
        elif self.members and not self.explicit:
            doc["members"] = list(self.members)
            if self.ring_bytes:
                doc["bytes"] = self.ring_bytes
        else:
            doc["flows"] = [_flow_to_dict(f) for f in self.explicit]
        if self.start_s:
            doc["start_s"] = self.start_s
        if self.compute_s:
            doc["compute_s"] = self.compute_s
        doc.update(self.options)
        return doc


def _flow_to_dict(f: Flow) -> dict:
    d = {"src": f.src, "dst": f.dst, "bytes": f.bytes}
    if (f.proto, f.sport, f.dport) != (6, 0, 0):
        d.update(proto=f.proto, sport=f.sport, dport=f.dport)
    return d


def parse_jobs(doc, fabric: Clos) -> list[Job]:
    """Validate a ``{"jobs": [JOB, ...]}`` document against the fabric."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("jobs"), list):
        raise InputError('jobs: expected {"jobs": [ ... ]}')
    extra = set(doc) - {"jobs"}
    if extra:
        raise InputError(f"jobs: unknown field {sorted(extra)[0]!r}")
    jobs = [parse_job(j, fabric) for j in doc["jobs"]]
    seen = set()
    for j in jobs:
        if j.id in seen:
            raise InputError(f"jobs: duplicate job id {j.id!r}")
        seen.add(j.id)
    return jobs


def parse_job(doc, fabric: Clos) -> Job:
    """Validate one JOB object (explicit flows or a ring All-Reduce collective)."""
    if not isinstance(doc, Mapping):
        raise InputError("job: expected a JSON object")
    jid = doc.get("id")
    if not isinstance(jid, str) or not jid or len(jid) > 64:
        raise InputError("job: 'id' must be a non-empty string of at most 64 characters")
    unknown = set(doc) - _JOB_KEYS
    if unknown:
        raise InputError(f"job {jid}: unknown field {sorted(unknown)[0]!r}")
    start_s = _nonneg(doc.get("start_s", 0), f"job {jid}: start_s", MAX_SECONDS)
    compute_s = _nonneg(doc.get("compute_s", 0), f"job {jid}: compute_s", MAX_SECONDS)
    options = {k: doc[k] for k in ("algorithm", "mode", "objective", "ring_order") if k in doc}
    for k, v in options.items():
        if not isinstance(v, str):
            raise InputError(f"job {jid}: '{k}' must be a string")
    for key in ("learn", "spray"):  # spray: path sets for NICs that spray (srv6 mode)
        if key in doc:
            if not isinstance(doc[key], bool):
                raise InputError(f"job {jid}: '{key}' must be true or false")
            options[key] = doc[key]
    if "max_parts" in doc:  # split's bound on parts per flow; 0 lifts it (as --max-parts 0)
        v = doc["max_parts"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(f"job {jid}: 'max_parts' must be an integer >= 0 (parts per flow; "
                             f"0: no bound), got {v!r}")
        options["max_parts"] = v
    if options.get("ring_order", "given") not in ("given", "advised"):
        raise InputError(f"job {jid}: ring_order must be 'given' or 'advised'")
    proto, sport, dport = _l4(doc, f"job {jid}")
    has_flows = "flows" in doc
    has_coll = "collective" in doc or "ranks" in doc or "rings" in doc
    has_members = "members" in doc
    if has_flows + has_coll + has_members != 1:
        raise InputError(f"job {jid}: give exactly one of 'flows', a 'collective' with "
                         "'ranks'/'rings', or 'members' (the controller learns the flows)")
    if has_members:
        return _parse_members(doc, jid, fabric, start_s, compute_s, options)
    if has_flows:
        if not isinstance(doc["flows"], list) or not doc["flows"]:
            raise InputError(f"job {jid}: 'flows' must be a non-empty list")
        if len(doc["flows"]) > MAX_FLOWS_PER_JOB:
            raise InputError(f"job {jid}: {len(doc['flows'])} flows, at most {MAX_FLOWS_PER_JOB}")
        flows = [_parse_flow(f, jid, k, fabric) for k, f in enumerate(doc["flows"])]
        return Job(jid, explicit=flows, start_s=start_s, compute_s=compute_s, options=options)
    coll = doc.get("collective", "ring_allreduce")
    if coll != "ring_allreduce":
        raise InputError(f"job {jid}: unsupported collective {coll!r} (only 'ring_allreduce')")
    if ("ranks" in doc) == ("rings" in doc):
        raise InputError(f"job {jid}: give exactly one of 'ranks' or 'rings'")
    rings_doc = [doc["ranks"]] if "ranks" in doc else doc["rings"]
    if not isinstance(rings_doc, list) or not rings_doc:
        raise InputError(f"job {jid}: 'rings' must be a non-empty list of rank lists")
    members = sum(len(r) for r in rings_doc if isinstance(r, list))
    if members > MAX_FLOWS_PER_JOB:
        raise InputError(f"job {jid}: {members} ring members, at most {MAX_FLOWS_PER_JOB}")
    rings = []
    for r, ranks in enumerate(rings_doc):
        where = f"job {jid}: ring {r}"
        if not isinstance(ranks, list) or not ranks:
            raise InputError(f"{where} is empty")
        if len(ranks) < 2:
            raise InputError(f"{where} needs at least 2 ranks")
        for h in ranks:
            if not isinstance(h, str):
                raise InputError(f"{where}: rank {h!r} is not a host name")
            if h not in fabric.hosts:
                raise InputError(f"{where}: unknown host {h!r}")
        if len(set(ranks)) != len(ranks):
            raise InputError(f"{where}: a host appears twice")
        rings.append(list(ranks))
    size = _positive(doc.get("bytes"), f"job {jid}: bytes")
    return Job(jid, rings=rings, ring_bytes=size, start_s=start_s, compute_s=compute_s,
               proto=proto, sport=sport, dport=dport, options=options)


def _parse_members(doc, jid: str, fabric: Clos, start_s: float, compute_s: float,
                   options: dict) -> Job:
    """A job declared by its members only: its flows are learned from measured traffic."""
    members = doc["members"]
    if not isinstance(members, list) or len(members) < 2:
        raise InputError(f"job {jid}: 'members' must list at least 2 hosts")
    if len(members) > MAX_FLOWS_PER_JOB:
        raise InputError(f"job {jid}: {len(members)} members, at most {MAX_FLOWS_PER_JOB}")
    for h in members:
        if not isinstance(h, str):
            raise InputError(f"job {jid}: member {h!r} is not a host name or IPv4 address")
        if h not in fabric.hosts:
            raise InputError(f"job {jid}: unknown host {h!r}")
    if len(set(members)) != len(members):
        raise InputError(f"job {jid}: a member appears twice")
    if len({fabric.hosts[h] for h in members}) < 2:
        raise InputError(f"job {jid}: every member is on leaf {fabric.hosts[members[0]]}: "
                         "its traffic never reaches a spine, there is nothing to route")
    size = _positive(doc["bytes"], f"job {jid}: bytes") if "bytes" in doc else 0.0
    for key in ("proto", "sport", "dport", "ring_order"):
        if key in doc:
            raise InputError(f"job {jid}: '{key}' does not apply to a job declared by members")
    return Job(jid, members=list(members), ring_bytes=size, start_s=start_s,
               compute_s=compute_s, options=options)


def _parse_flow(doc, jid: str, k: int, fabric: Clos) -> Flow:
    where = f"job {jid}: flow {k}"
    if not isinstance(doc, Mapping):
        raise InputError(f"{where}: expected a JSON object")
    unknown = set(doc) - _FLOW_KEYS
    if unknown:
        raise InputError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    src, dst = doc.get("src"), doc.get("dst")
    for name, h in (("src", src), ("dst", dst)):
        if not isinstance(h, str):
            raise InputError(f"{where}: '{name}' must be a host name")
        if h not in fabric.hosts:
            raise InputError(f"{where}: unknown host {h!r}")
    if src == dst:
        raise InputError(f"{where}: src and dst are the same host {src!r}")
    size = _positive(doc.get("bytes"), f"{where}: bytes")
    proto, sport, dport = _l4(doc, where)
    return Flow(jid, src, dst, size, proto, sport, dport)


def _l4(doc, where: str) -> tuple[int, int, int]:
    proto = doc.get("proto", 6)
    if isinstance(proto, str):
        if proto.lower() not in PROTOCOLS:
            raise InputError(f"{where}: proto must be 'tcp', 'udp' or an IP protocol number")
        proto = PROTOCOLS[proto.lower()]
    if isinstance(proto, bool) or not isinstance(proto, int) or not 0 <= proto <= 255:
        raise InputError(f"{where}: proto must be 'tcp', 'udp' or an IP protocol number")
    ports = []
    for key in ("sport", "dport"):
        p = doc.get(key, 0)
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= 65535:
            raise InputError(f"{where}: {key} must be an integer port 0-65535, got {p!r}")
        ports.append(p)
    return proto, ports[0], ports[1]


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _positive(value, what: str, most: float = MAX_BYTES) -> float:
    """A positive number of at most ``most`` (docs/reference/limits.md): a byte count of
    1e308 made every other job's prediction overflow."""
    if value is None:
        raise InputError(f"{what} is missing")
    v = _number(value, what)
    if v <= 0:
        raise InputError(f"{what} must be positive, got {value!r}")
    if v > most:
        raise InputError(f"{what} must be at most {most:g}, got {value!r}")
    return v


def _nonneg(value, what: str, most: float) -> float:
    v = _number(value, what)
    if v < 0:
        raise InputError(f"{what} must not be negative, got {value!r}")
    if v > most:
        raise InputError(f"{what} must be at most {most:g}, got {value!r}")
    return v
