"""From packet samples to bytes per (source, destination) host pair in closed time windows, and
the comparison of measured pairs with a declaration.

The estimator. A switch with sFlow on samples each packet it forwards with probability
1 / sampling_rate, so one sample stands for frame_length x sampling_rate bytes. A packet is
sampled independently at every sampling switch it crosses (in a two-tier Clos with sFlow on
every switch: its source leaf, a spine and its destination leaf, 3 chances; 1 between hosts of
one leaf). Summing every switch's estimate therefore counts each byte ``k`` times in
expectation, where ``k`` is the number of sampling switches on the pair's path; dividing each
sample by ``k`` makes the sum unbiased again. We use every switch's samples (k times the samples
of counting one switch only, so a pair gathers its samples sooner) rather than keep only the source
leaf's: that would need a map from sFlow agents and ifIndex values to switches and ports, which
switches do not announce over OpenFlow. The controller passes ``samplers(src, dst) -> k`` from
its fabric (``clos_samplers``); a wrong ``k`` scales every cross-leaf pair alike, so the pattern
(which pairs carry the traffic, in what shares) does not depend on it.

Absurd fields are ignored (counted in ``ignored``): a sampling rate of 0 or above
``MAX_SAMPLING_RATE`` (one sample at 2^32 - 1, from an allowed agent address, once made its
pair the whole of a job's matrix) and a frame longer than ``MAX_FRAME``
(docs/reference/limits.md). Below those, a rate or frame that only one datagram of its sender
shows counts at what the sender usually reports (``usual.UsualSampling``, counted in
``clipped``): one sample at 2^20 of a 9,000-byte frame froze a low-rate job's learning for
241 windows (issue 74).

Samples of packets the switch dropped are not counted (``dropped``, counted apart): Open
vSwitch samples on ingress, before its tables run, so a packet a leaf refused at a host port
for its forged source address (``enforcement.source_check``) is sampled there all the same,
its output saying "dropped". A switch that does not say so lets through what it sampled
before dropping: the forged pair then gets one sampling point's share (a third on two tiers)
of the bytes, sampled at the leaf alone, for as long as the host forges. A host port with
no known host yet is not checked at all (``source_check``).

Hosts' agents may count instead (``count``): exact bytes per pair from the source host's
sockets, counted once. A host that counts is then no longer sampled (its sFlow samples are
dropped for ``keep_windows`` windows): the same bytes would count twice.

Pure: no clock, no I/O (the caller passes ``now``); ``observe`` may be called from the sFlow
thread while the service reads closed windows (one lock).
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from controller.measurement.usual import ReportClock, UsualSampling

Pair = tuple[str, str]
MAX_SAMPLING_RATE = 1 << 20  # 1 in 1,048,576: 16x sparser than the sparsest advised (65,536)
MAX_FRAME = 1 << 17  # bytes: a 64 KiB offloaded super-frame and its headers fit twice


SAMPLING_POINTS = ("all", "leaves", "edge")


def clos_samplers(leaf_of: Mapping[str, str], where: str = "all",
                  pod_of: Mapping[str, object] | None = None) -> Callable[[str, str], int]:
    """The number of times a packet between two hosts of a Clos fabric can be sampled, by
    where sFlow is on: ``all`` switches (as Open vSwitch does, bridge-wide: source leaf, spine,
    destination leaf; across the pods of a three-tier fabric five switches, source leaf,
    aggregation, core, aggregation, destination leaf), ``leaves`` only (both leaves), or the
    leaves' host-facing ``edge`` ports only (ingress sampling where traffic enters the fabric:
    once). Between hosts of one leaf: once. Hosts the map does not know count as on different
    leaves of one pod. ``pod_of``: leaf -> pod (three tiers; None: one pod).

    >>> count = clos_samplers({"a": "l0", "b": "l1", "c": "l2"}, pod_of={"l0": 0, "l1": 0,
    ...                                                               "l2": 1})
    >>> count("a", "a"), count("a", "b"), count("a", "c")
    (1, 3, 5)
    """
    if where not in SAMPLING_POINTS:
        raise ValueError(f"sampling points must be one of {', '.join(SAMPLING_POINTS)}, "
                         f"not {where!r}")
    cross = {"all": 3, "leaves": 2, "edge": 1}[where]
    pods = pod_of or {}

    def samplers(src: str, dst: str) -> int:
        a, b = leaf_of.get(src), leaf_of.get(dst)
        if a is not None and a == b:
            return 1
        return cross + 2 if where == "all" and pods.get(a, 0) != pods.get(b, 0) else cross
    return samplers


def _sender(s) -> tuple:
    """The sFlow sender of a sample: (agent address, sub-agent)."""
    return getattr(s, "agent", ""), getattr(s, "sub_agent", 0)


DATA_FRAME = 200  # bytes: shorter frames carry no bulk data (TCP ACKs 66-90 B, pings 98 B)


@dataclass
class _Window:
    bytes: dict = field(default_factory=dict)  # pair -> estimated bytes
    samples: dict = field(default_factory=dict)  # pair -> number of samples


@dataclass(frozen=True)
class Window:
    """One closed window: its index (it spans [index * window_s, (index + 1) * window_s)),
    estimated bytes and samples per host pair."""
    index: int
    bytes: dict
    samples: dict


class TrafficLearner:
    """Accumulates sampled bytes per host pair in windows [i * window_s, (i + 1) * window_s).

    Only data frames count (``min_frame`` bytes and longer): acknowledgements, pings and
    daemons' keep-alives are not a bandwidth pattern, and an acknowledgement stream would
    otherwise look like a light flow in the opposite direction. ``samplers(src, dst)``:
    sampling switches on a pair's path (module docstring); None: 1. What a job's members
    send over many windows is ``measurement.estimate``'s business."""

    def __init__(self, window_s: float = 2.0, samplers: Callable[[str, str], int] | None = None,
                 keep_windows: int = 8, min_frame: int = DATA_FRAME):
        if not (isinstance(window_s, (int, float)) and math.isfinite(window_s)
                and window_s > 0):
            raise ValueError(f"learning window must be a positive number of seconds, "
                             f"not {window_s!r}")
        self.window_s = float(window_s)
        self.keep = max(int(keep_windows), 2)
        self.min_frame = int(min_frame)
        self._samplers = samplers
        self._k: dict[Pair, int] = {}
        self._windows: dict[int, _Window] = {}
        self._lock = threading.Lock()
        self.observed = 0  # samples accepted (IPv4 data frames between two different hosts)
        self.counted = 0  # pairs' counts from the hosts' agents accepted
        self._counting: dict[str, int] = {}  # source address -> window of its last count
        self.ignored = 0  # samples with an absurd sampling rate or frame length
        self.dropped = 0  # samples of packets the switch dropped (forged sources among them)
        self.clipped = 0  # samples counted at their source's usual rate or frame
        self._usual = UsualSampling(max_rate=MAX_SAMPLING_RATE, max_frame=MAX_FRAME)
        self.reports = ReportClock()  # what the hosts' agents' reports may cover

    def set_samplers(self, samplers: Callable[[str, str], int] | None) -> None:
        """Count sampling points with ``samplers`` from now on (the fabric changed: hosts
        adopted or moved); the counts cached per pair are dropped."""
        with self._lock:
            self._samplers = samplers
            self._k.clear()

    def index(self, now: float) -> int:
        """The index of the window open at ``now``."""
        return math.floor(now / self.window_s)

    def _window(self, idx: int) -> _Window:
        w = self._windows.get(idx)
        if w is None:
            w = self._windows[idx] = _Window()
            for old in [i for i in self._windows if i <= idx - self.keep]:
                del self._windows[old]
        return w

    def observe(self, samples: Iterable, now: float) -> None:
        """Add one datagram's packet samples (anything with src, dst, frame_length,
        sampling_rate, and its sender: agent, sub_agent) received at time ``now``; samples
        that are not IPv4 data frames between two hosts are ignored, and so are those of a
        source whose agent counts and those of packets the switch dropped (``dropped``: a
        forged source refused at its leaf). A rate or frame above what the datagram's sender
        usually reports counts as the usual one (``usual.UsualSampling``, counted in
        ``clipped``)."""
        idx = self.index(now)
        ks = self._k
        samplers = self._samplers
        min_frame = self.min_frame
        samples = samples if isinstance(samples, (list, tuple)) else list(samples)
        if not samples:
            return
        sender = _sender(samples[0])
        with self._lock:
            usual_rate, usual_frame = self._usual.bound(sender)
            top_rate = top_frame = 0  # the datagram's largest sane rate and frame
            w = self._window(idx)
            wb, ws = w.bytes, w.samples
            counting, keep = self._counting, self.keep
            n = bad = gone = clipped = 0
            for s in samples:
                rate, frame = s.sampling_rate, s.frame_length
                if not 1 <= rate <= MAX_SAMPLING_RATE or frame > MAX_FRAME:
                    bad += 1
                    continue
                if rate > top_rate:
                    top_rate = rate
                if frame > top_frame:
                    top_frame = frame
                src, dst = s.src, s.dst
                if src is None or dst is None or src == dst or frame < min_frame \
                        or idx - counting.get(src, idx - keep) < keep:
                    continue
                if getattr(s, "dropped", False):
                    gone += 1
                    continue
                if rate > usual_rate or frame > usual_frame:
                    rate, frame = min(rate, usual_rate), min(frame, usual_frame)
                    clipped += 1
                pair = (src, dst)
                k = ks.get(pair)
                if k is None:
                    k = ks[pair] = max(1, int(samplers(src, dst))) if samplers else 1
                wb[pair] = wb.get(pair, 0.0) + frame * rate / k
                ws[pair] = ws.get(pair, 0) + 1
                n += 1
            if top_rate:
                self._usual.note(sender, top_rate, top_frame)
            self.observed += n
            self.ignored += bad
            self.dropped += gone
            self.clipped += clipped

    def count(self, counts: Iterable, now: float) -> None:
        """Add exact counts (source, destination, bytes, packets) that a host's agent read
        at ``now``: its bytes as they are (counted once, at the source), each packet a sample
        at a sampling rate of 1."""
        idx = self.index(now)
        with self._lock:
            w = self._window(idx)
            for src, dst, nbytes, packets in counts:
                if src == dst:
                    continue
                pair = (src, dst)
                w.bytes[pair] = w.bytes.get(pair, 0.0) + float(nbytes)
                w.samples[pair] = w.samples.get(pair, 0) + max(int(packets), 1)
                self._counting[src] = idx
                self.counted += 1

    def window_pairs(self, now: float, ago: int = 1) -> dict[Pair, float]:
        """Estimated bytes per pair in the closed window ``ago`` windows back (1: the last)."""
        with self._lock:
            w = self._windows.get(self.index(now) - ago)
            return dict(w.bytes) if w else {}

    def closed(self, after: int, now: float) -> list[Window]:
        """Copies of the closed windows after index ``after``, oldest first, empty ones
        included (a window in which nobody sent is a fact too); at most the windows kept."""
        last = self.index(now) - 1
        first = max(after + 1, last - self.keep + 2)
        with self._lock:
            out = []
            for idx in range(first, last + 1):
                w = self._windows.get(idx)
                out.append(Window(idx, dict(w.bytes), dict(w.samples)) if w else
                           Window(idx, {}, {}))
        return out

    def forget(self) -> None:
        """Drop every window (e.g. after the fabric changed)."""
        with self._lock:
            self._windows.clear()
            self._k.clear()
            self._counting.clear()


@dataclass(frozen=True)
class Comparison:
    """How measured traffic matches a declaration: the share of the measured bytes on pairs
    not declared, those pairs, declared pairs that carried nothing, and one line for people."""
    share: float
    undeclared: list[Pair]
    missing: list[Pair]
    opposite: bool
    description: str


def _is_ring_set(pairs: set) -> bool:
    """Every endpoint sends to exactly one and receives from exactly one (one or more rings)."""
    outs = [a for a, _ in pairs]
    ins = [b for _, b in pairs]
    return len(set(outs)) == len(outs) and len(set(ins)) == len(ins) and set(outs) == set(ins)


def compare(declared_pairs: Iterable[Pair], measured) -> Comparison:
    """Compare declared flows (pairs, or a mapping from pairs) with measured bytes per pair
    (a mapping). ``share`` is the share of the measured bytes on pairs that were
    not declared; the description names the mistake when the traffic runs exactly opposite
    to the declaration, as when a ring is declared in the wrong direction."""
    declared = {tuple(p) for p in declared_pairs}
    measured = {tuple(p): float(v) for p, v in measured.items() if v > 0}
    total = sum(measured.values())
    undeclared = sorted(p for p in measured if p not in declared)
    missing = sorted(p for p in declared if p not in measured)
    share = sum(measured[p] for p in undeclared) / total if total > 0 else 0.0
    reversed_declared = {(b, a) for a, b in declared}
    opposite = bool(measured) and set(measured) == reversed_declared and \
        reversed_declared.isdisjoint(declared)
    n, k = len(measured), len(undeclared)
    if not measured:
        text = "no traffic measured between the members"
    elif opposite:
        what = "ring" if _is_ring_set(declared) else "flows"
        text = f"traffic runs opposite to the declared {what}"
    elif k == 0:
        text = f"all {n} measured pairs were declared"
    else:
        text = f"{k} of {n} measured pairs were not declared ({100 * share:.0f}% of the bytes)"
    return Comparison(share=share, undeclared=undeclared, missing=missing, opposite=opposite,
                      description=text)
