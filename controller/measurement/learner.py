"""From packet samples to traffic patterns: bytes per (source, destination) host pair in closed
time windows, the significant pairs among a job's members, and whether they are steady.

The estimator. A switch with sFlow on samples each packet it forwards with probability
1 / sampling_rate, so one sample stands for frame_length x sampling_rate bytes. A packet is
sampled independently at every sampling switch it crosses (in a two-tier Clos with sFlow on
every switch: its source leaf, a spine and its destination leaf, 3 chances; 1 between hosts of
one leaf). Summing every switch's estimate therefore counts each byte ``k`` times in
expectation, where ``k`` is the number of sampling switches on the pair's path; dividing each
sample by ``k`` makes the sum unbiased again. We use every switch's samples (k times the samples
of counting one switch only, so a pattern is steady sooner) rather than keep only the source
leaf's: that would need a map from sFlow agents and ifIndex values to switches and ports, which
switches do not announce over OpenFlow. The controller passes ``samplers(src, dst) -> k`` from
its fabric (``clos_samplers``); a wrong ``k`` scales every cross-leaf pair alike, so the pattern
(which pairs carry the traffic, in what shares) does not depend on it.

Pure: no clock, no I/O (the caller passes ``now``); ``observe`` may be called from the sFlow
thread while the service reads patterns (one lock).
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

Pair = tuple[str, str]


SAMPLING_POINTS = ("all", "leaves", "edge")


def clos_samplers(leaf_of: Mapping[str, str], where: str = "all") -> Callable[[str, str], int]:
    """The number of times a packet between two hosts of a two-tier Clos can be sampled, by
    where sFlow is on: ``all`` switches (as Open vSwitch does, bridge-wide: source leaf, spine,
    destination leaf), ``leaves`` only (both leaves), or the leaves' host-facing ``edge`` ports
    only (ingress sampling where traffic enters the fabric: once). Between hosts of one leaf:
    once. Hosts the map does not know count as on different leaves."""
    if where not in SAMPLING_POINTS:
        raise ValueError(f"sampling points must be one of {', '.join(SAMPLING_POINTS)}, "
                         f"not {where!r}")
    cross = {"all": 3, "leaves": 2, "edge": 1}[where]

    def samplers(src: str, dst: str) -> int:
        a = leaf_of.get(src)
        return 1 if a is not None and a == leaf_of.get(dst) else cross
    return samplers


@dataclass
class _Window:
    bytes: dict = field(default_factory=dict)  # pair -> estimated bytes
    samples: dict = field(default_factory=dict)  # pair -> number of samples


@dataclass(frozen=True)
class Pattern:
    """The significant pairs among some members in the last closed window: estimated bytes
    and samples per pair, and whether the same pairs were significant, each with enough
    samples, in the last ``steady_windows`` closed windows."""
    pairs: dict[Pair, float]
    samples: dict[Pair, int]
    steady: bool
    window_s: float
    window_end: float
    total_bytes: float  # every member pair's bytes in the window, significant or not

    def rates(self) -> dict[Pair, float]:
        """Bytes per second of each significant pair."""
        return {p: b / self.window_s for p, b in self.pairs.items()}


class TrafficLearner:
    """Accumulates sampled bytes per host pair in windows [i * window_s, (i + 1) * window_s).

    ``share``: a pair is significant when its bytes reach this share of the largest member
    pair's (data flows of a collective carry equal shares; acknowledgements run a few percent of
    the data they acknowledge). ``min_samples``: samples a significant pair needs in each
    window for the pattern to count as steady (fewer and the pair set is noise).
    ``steady_windows``: closed windows that must agree. ``samplers(src, dst)``: sampling
    switches on a pair's path (module docstring); None: 1."""

    def __init__(self, window_s: float = 2.0, share: float = 0.10, min_samples: int = 4,
                 steady_windows: int = 2, samplers: Callable[[str, str], int] | None = None,
                 keep_windows: int = 8):
        if not (isinstance(window_s, (int, float)) and math.isfinite(window_s)
                and window_s > 0):
            raise ValueError(f"learning window must be a positive number of seconds, "
                             f"not {window_s!r}")
        if not 0 < share <= 1:
            raise ValueError(f"significant share must be in (0, 1], not {share!r}")
        if min_samples < 1 or steady_windows < 1:
            raise ValueError("min_samples and steady_windows must be at least 1")
        self.window_s = float(window_s)
        self.share = float(share)
        self.min_samples = int(min_samples)
        self.steady_windows = int(steady_windows)
        self.keep = max(int(keep_windows), self.steady_windows + 1)
        self._samplers = samplers
        self._k: dict[Pair, int] = {}
        self._windows: dict[int, _Window] = {}
        self._lock = threading.Lock()
        self.observed = 0  # samples accepted (IPv4, two different hosts)

    def set_samplers(self, samplers: Callable[[str, str], int] | None) -> None:
        """Count sampling points with ``samplers`` from now on (the fabric changed: hosts
        adopted or moved); the counts cached per pair are dropped."""
        with self._lock:
            self._samplers = samplers
            self._k.clear()

    def _index(self, now: float) -> int:
        return math.floor(now / self.window_s)

    def observe(self, samples: Iterable, now: float) -> None:
        """Add packet samples (anything with src, dst, frame_length, sampling_rate) received
        at time ``now``; samples that are not IPv4 between two hosts are ignored."""
        idx = self._index(now)
        ks = self._k
        samplers = self._samplers
        with self._lock:
            w = self._windows.get(idx)
            if w is None:
                w = self._windows[idx] = _Window()
                for old in [i for i in self._windows if i <= idx - self.keep]:
                    del self._windows[old]
            wb, ws = w.bytes, w.samples
            n = 0
            for s in samples:
                src, dst = s.src, s.dst
                if src is None or dst is None or src == dst:
                    continue
                pair = (src, dst)
                k = ks.get(pair)
                if k is None:
                    k = ks[pair] = max(1, int(samplers(src, dst))) if samplers else 1
                wb[pair] = wb.get(pair, 0.0) + s.frame_length * s.sampling_rate / k
                ws[pair] = ws.get(pair, 0) + 1
                n += 1
            self.observed += n

    def window_pairs(self, now: float, ago: int = 1) -> dict[Pair, float]:
        """Estimated bytes per pair in the closed window ``ago`` windows back (1: the last)."""
        with self._lock:
            w = self._windows.get(self._index(now) - ago)
            return dict(w.bytes) if w else {}

    def _members_window(self, idx: int, members: set) -> tuple[dict, dict]:
        w = self._windows.get(idx)
        if w is None:
            return {}, {}
        b = {p: v for p, v in w.bytes.items() if p[0] in members and p[1] in members}
        return b, {p: w.samples[p] for p in b}

    def _significant(self, b: dict) -> set:
        if not b:
            return set()
        top = max(b.values())
        return {p for p, v in b.items() if v >= self.share * top and v > 0}

    def pattern(self, members: Iterable[str], now: float,
                since: float | None = None) -> Pattern | None:
        """The significant pairs among ``members`` in the last closed window, or None when
        the members sent nothing to each other in it. ``since``: only windows that began at
        or after this time count (a job's traffic starts when the job does: what other
        programs on its hosts sent before must neither teach nor contradict it); None when
        no such window has closed, and not steady until ``steady_windows`` of them have."""
        members = set(members)
        last = self._index(now) - 1
        first = -math.inf if since is None else math.ceil(since / self.window_s)
        if last < first:
            return None
        with self._lock:
            b, n = self._members_window(last, members)
            total = sum(b.values())
            if total <= 0:
                return None
            sig = self._significant(b)
            steady = all(n[p] >= self.min_samples for p in sig) and \
                last - self.steady_windows + 1 >= first
            for idx in range(last - 1, last - self.steady_windows, -1):
                if not steady:
                    break
                ob, on = self._members_window(idx, members)
                steady = self._significant(ob) == sig and all(
                    on[p] >= self.min_samples for p in sig)
        return Pattern(pairs={p: b[p] for p in sorted(sig)}, samples={p: n[p] for p in sorted(sig)},
                       steady=steady, window_s=self.window_s,
                       window_end=(last + 1) * self.window_s, total_bytes=total)

    def forget(self) -> None:
        """Drop every window (e.g. after the fabric changed)."""
        with self._lock:
            self._windows.clear()
            self._k.clear()


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
    (a mapping, or a Pattern). ``share`` is the share of the measured bytes on pairs that were
    not declared; the description names the mistake when the traffic runs exactly opposite
    to the declaration, as when a ring is declared in the wrong direction."""
    declared = {tuple(p) for p in declared_pairs}
    if isinstance(measured, Pattern):
        measured = measured.pairs
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
