"""Learned matrices: what the members of each job measurably send to each other, and the
decisions that follow (pure; the measured pattern comes from ``measurement.learner``).

* A job declared by its members only is ``learning`` (no flow planned, default paths) until
  its members' traffic shows a steady pattern; then the measured cross-leaf pairs become its
  flows (``learned``) and are planned like declared ones.
* Every other job that may learn (``"learn": true``, the default) is checked against its
  traffic: when more than ``learn_share`` of its measured bytes run on pairs it did not
  declare, it is re-planned on the measured matrix, with an event naming the mismatch (e.g.
  "traffic runs opposite to the declared ring"). A job whose pattern changes again is
  re-planned again.

Only pairs across leaves count: a pair within a leaf never reaches a spine. A learned flow
carries the bytes measured in one window and matches every IPv4 packet between its two hosts
(no ports: frameworks open connections on ephemeral ports).
"""
from __future__ import annotations

from dataclasses import dataclass

from controller.measurement.learner import Pattern, compare
from controller.model.fabric import Fabric
from controller.model.intent import JobRecord
from controller.model.jobs import Flow, Job


@dataclass(frozen=True)
class Measured:
    """The cross-leaf pairs of one job's last steady pattern, by host name."""
    pairs: dict  # (src host, dst host) -> bytes in the window
    window_s: float

    def flows_doc(self, declared: set) -> list[dict]:
        return [{"src": a, "dst": b, "bytes": round(v), "bytes_per_s": round(v / self.window_s),
                 "declared": (a, b) in declared} for (a, b), v in sorted(self.pairs.items())]


def measured_pairs(fabric: Fabric, pattern: Pattern, min_link_share: float = 0.0) -> Measured:
    """The pattern's pairs (IPv4 addresses) as host pairs across leaves, leaving out pairs
    slower than ``min_link_share`` of a link: pings, daemons' chatter and idle phases are not
    a training pattern, and a plan must not follow them."""
    host_of = {ip: h for h, ip in fabric.host_ip.items()}
    floor = min_link_share * fabric.link_bps() * pattern.window_s
    pairs = {}
    for (a, b), v in pattern.pairs.items():
        src, dst = host_of.get(a), host_of.get(b)
        if src and dst and fabric.hosts[src] != fabric.hosts[dst] and v >= floor:
            pairs[(src, dst)] = v
    return Measured(pairs, pattern.window_s)


def declared_pairs(fabric: Fabric, r: JobRecord) -> set:
    """The job's planned (source, destination) host pairs across leaves."""
    return {(f.src, f.dst) for f in r.job.flows() if fabric.hosts[f.src] != fabric.hosts[f.dst]}


def learned_job(r: JobRecord, measured: Measured) -> Job:
    """The job with its measured pairs as flows (ports 0: all traffic between the hosts)."""
    flows = [Flow(r.job.id, a, b, float(v)) for (a, b), v in sorted(measured.pairs.items())]
    options = {k: v for k, v in r.job.options.items() if k != "ring_order"}
    return Job(r.job.id, explicit=flows, start_s=r.job.start_s, compute_s=r.job.compute_s,
               options=options, members=list(r.members))


def verdict(fabric: Fabric, r: JobRecord, measured: Measured, share: float):
    """(cause, mismatch) when the job must be (re-)planned on ``measured``, else None."""
    if not measured.pairs:
        return None
    if r.matrix == "learning":
        return (f"job {r.job.id}: matrix learned from its traffic "
                f"({len(measured.pairs)} flows across leaves)", None)
    cmp = compare(declared_pairs(fabric, r), measured.pairs)
    description = cmp.description
    if cmp.opposite and r.job.is_collective:  # pairs within a leaf hide the ring's shape
        description = "traffic runs opposite to the declared ring"
    mismatch = {"share": round(cmp.share, 4), "description": description,
                "undeclared_pairs": len(cmp.undeclared), "missing_pairs": len(cmp.missing)}
    if cmp.share <= share:
        return None
    return (f"job {r.job.id}: {description}: re-planned on the measured matrix", mismatch)
