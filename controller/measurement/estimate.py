"""A job's traffic matrix, estimated from every window since the job started, not from the last
one.

Training traffic repeats, but not within every window: a launch ramps up and ends, a barrier, a
checkpoint or an evaluation pauses it, a mixture-of-experts iteration alternates an all-to-all
with an All-Reduce, and at a low sampling rate a light pair may go unsampled for a while. So the
estimate accumulates, and forgets only on evidence:

* **activity**: a window counts only when the members' bytes reached ``active_share`` of the
  job's recent peak (a maximum of window totals that halves every ``peak_half_life`` windows);
  quieter windows (start, end, pauses, phases of little traffic) neither teach nor contradict;
* **bytes per pair**: a mean over active windows, exponentially weighted (weights halve every
  ``half_life`` active windows), with the samples behind it: each sample is a Poisson draw, so
  the relative error of a pair's estimate is about 1 / sqrt(samples);
* **joining**: a pair joins the matrix once ``min_samples`` samples stand behind it and its
  mean reaches ``share`` of the mean pair's (acknowledgements are not data frames, see
  ``learner.DATA_FRAME``, so an all-to-all among many ranks, each pair a small part of the
  job's bytes, joins as its samples accumulate);
* **leaving**: a pair leaves only after ``silent_windows`` or more consecutive active windows
  without a sample while its source sent to other members, and only when at its own
  estimated rate before the silence (its mean decays while it is silent; the silence is no
  measure of it) so long a silence had a probability below 1% among all the matrix's pairs
  (n pairs: each below 1% / n, since with many light pairs some are always briefly
  unsampled). A window in which the source sent nothing is no evidence against its pairs (a
  rank waiting on another's broadcast, as a DistributedDataParallel launch begins) until it
  has been idle for ``idle_windows`` active windows (a rank that left the pattern). A pair
  that came back after a silence of g active windows (a phase: a pipeline stage sends forward
  in one window and backward in the next; a launch's warm-up sends forward only) has shown
  that such gaps are part of its pattern: it leaves only after ``silent_windows`` + g, and is
  in doubt only when silent longer than g (g at most ``idle_windows``);
* **steady**: at least ``steady_windows`` active windows, the pairs that joined in the last
  ``steady_windows`` - 1 of them and the pairs sampled but still short of ``min_samples``
  carry less than ``SETTLED`` of the matrix's bytes (at a low sampling rate the light pairs
  of an all-to-all trickle in over many windows, each alone a small share: acted on before
  most are in, the matrix would be re-planned as each batch joins), and no pair of
  the matrix is in doubt: silent for so long that, among all its pairs, such a silence was
  less likely than even (it may be leaving, as when a ring changes direction). A pair
  below ``pattern_floor`` (``LIGHT`` of the median pair, or of the median byte's pair when
  the pairs under it carry less than ``SETTLED`` of the bytes), and a ``rendezvous`` star
  (light pairs around one host, under ``STAR`` of the bytes), put nothing in doubt: a
  launch's rendezvous with rank 0, sampled a few times in the first windows, is no part of
  the pattern and is not planned either (``service.learning.measured_pairs``); on a k = 4
  fat-tree the doubt it cast kept a gloo ring unsteady for 10 s of its traffic;
* **plane**: on a fabric of several planes each pair's bytes are also kept per plane the
  samples came on, weighted like its bytes (same active windows, same half-life), and
  ``plane_shares`` gives their shares: the framework bound its connection to one plane's
  addresses, and a plan elsewhere would not be enforced. A relaunch on another plane takes
  over as the old plane's bytes decay (half of them gone every ``half_life`` active windows).

O(pairs of the matrix + pairs sampled in the window) per folded window. Pure: windows in, no
clock, no I/O.

>>> e = MatrixEstimate(min_samples=2)
>>> ring = {("a", "b"): 3000.0, ("b", "c"): 3000.0, ("c", "a"): 3000.0}
>>> e.fold(ring, dict.fromkeys(ring, 3)), e.fold(ring, dict.fromkeys(ring, 3))
('active', 'active')
>>> sorted(e.matrix()), e.steady
([('a', 'b'), ('b', 'c'), ('c', 'a')], True)
>>> e.fold({("a", "b"): 10.0}, {("a", "b"): 1})  # a pause: too quiet to count
'quiet'
>>> e.fold({}, {}), sorted(e.matrix()) == sorted(ring)
('empty', True)
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

Pair = tuple[str, str]

SURE_SILENT = 0.01  # chance of so long a silence, among all pairs, before a pair is gone
IN_DOUBT = 0.5  # chance of so long a silence, among all pairs, that puts a pair in doubt
LIGHT = 0.25  # share of the median pair's bytes below which a pair is not the pattern
SETTLED = 0.05  # share of the matrix's bytes on pairs that just joined, below which it is steady
STAR = 0.25  # share of the bytes below which light pairs around one host are a rendezvous
STAR_PAIRS = 3  # light pairs around one host that make a star (3 ranks' all-to-all has 3 pairs)


def _median_bytes_pair(values: list) -> float:
    """The pair size at which the heavier pairs carry half the bytes (values sorted
    heaviest first)."""
    total, acc = sum(values), 0.0
    for v in values:
        acc += v
        if acc >= total / 2:
            return v
    return values[-1]


def pattern_floor(values) -> float:
    """Bytes below which a pair is no part of the job's pattern: ``LIGHT`` of the median
    pair, or of the median byte's pair (the pair size at which the heavier pairs carry half
    the bytes) when the pairs below that carry less than ``SETTLED`` of the bytes together.

    The median pair keeps a mixture-of-experts all-to-all, whose many light pairs carry a
    fifth or more of the bytes. A launch's rendezvous star (rank 0 with every other rank,
    both ways: 2(N-1) pairs beside a ring's N) outnumbers the ring, so its pairs set the
    median; they are still a few percent of the bytes, as a pair that just joined is when
    the matrix is steady (issue 59). A rule on windows (a pair counts once seen in two)
    would also hold back a ring learned in its first launch, and a rendezvous that spans
    two windows passes it. A heavier star is told apart by its shape (``rendezvous``).

    >>> ring, star = [100.0] * 8, [2.0] * 14
    >>> pattern_floor(ring + star), pattern_floor(ring + [10.0] * 56)
    (25.0, 2.5)
    """
    values = sorted(values, reverse=True)
    if not values:
        return 0.0
    floor = LIGHT * statistics.median(values)
    heavy = LIGHT * _median_bytes_pair(values)
    if sum(v for v in values if v < heavy) < SETTLED * sum(values):
        floor = max(floor, heavy)
    return floor


def rendezvous(matrix) -> set:
    """The pairs of a rendezvous star (``matrix``: pair -> bytes): the light pairs (under
    ``LIGHT`` of the median byte's pair) when there are ``STAR_PAIRS`` or more, they all
    touch one host and carry less than ``STAR`` of the bytes together. A launch's rendezvous
    with rank 0, sampled beside the ring's first iteration, was 14% of an 8-rank job's bytes
    (4 and 5 samples of 9,000 B a pair), above ``pattern_floor``'s 5%: its 10 flows were
    planned and two ring flows shared an uplink (issue 74). An all-to-all phase, a fifth of
    the bytes or more, is no star: its light pairs join every host to every other (with 3
    ranks or more no host is in all of them), and so are planned.

    >>> ring = {(f"r{i}", f"r{(i + 1) % 8}"): 100.0 for i in range(8)}
    >>> star = {p: 17.0 for i in range(2, 7) for p in (("r0", f"r{i}"), (f"r{i}", "r0"))}
    >>> len(rendezvous(ring | star)), round(170 / sum((ring | star).values()), 3)
    (10, 0.175)
    >>> moe = {(f"r{i}", f"r{j}"): 17.0 for i in range(4) for j in range(4) if i != j}
    >>> rendezvous(moe | {(f"r{i}", f"r{(i + 1) % 4}"): 117.0 for i in range(4)})
    set()
    """
    if len(matrix) < STAR_PAIRS + 1:
        return set()
    heavy = LIGHT * _median_bytes_pair(sorted(matrix.values(), reverse=True))
    light = [p for p, v in matrix.items() if v < heavy]
    if len(light) < STAR_PAIRS:
        return set()
    hub = set(light[0])
    for a, b in light[1:]:
        hub &= {a, b}
        if not hub:
            return set()
    if sum(matrix[p] for p in light) >= STAR * sum(matrix.values()):
        return set()
    return set(light)


def outside_pattern(matrix) -> set:
    """The pairs of ``matrix`` (pair -> bytes) that are no part of the job's pattern: under
    ``pattern_floor``, or a ``rendezvous`` star."""
    floor = pattern_floor(matrix.values())
    return {p for p, v in matrix.items() if v < floor} | rendezvous(matrix)


FORGOTTEN = 0.05  # weighted samples below which a silent pair outside the matrix is dropped


@dataclass
class PairEstimate:
    bytes: float = 0.0  # weighted sum of the pair's bytes over active windows
    samples: float = 0.0  # weighted sum of its samples
    total_samples: int = 0  # every sample behind the estimate
    silent: int = 0  # consecutive active windows without a sample, its source sending
    gap: int = 0  # the longest such silence it came back from (a phase of its pattern)
    before: tuple = (0.0, 1.0)  # (samples, weight) as of the last window it was sampled in
    joined: int = 0  # active windows folded when it joined the matrix (0: not in it)
    planes: dict = field(default_factory=dict)  # plane -> weighted bytes (several planes)


class MatrixEstimate:
    """One job's (or one phase's) matrix, folded window by window (module docstring)."""

    def __init__(self, half_life: float = 8.0, active_share: float = 0.25,
                 peak_half_life: float = 30.0, min_samples: int = 4, share: float = 0.05,
                 silent_windows: int = 3, steady_windows: int = 2, idle_windows: int = 8):
        if not (half_life > 0 and peak_half_life > 0 and 0 < active_share <= 1
                and 0 <= share <= 1):
            raise ValueError("estimate: half-lives must be > 0, the active share in (0, 1] and "
                             "the joining share in [0, 1]")
        if min(min_samples, silent_windows, steady_windows, idle_windows) < 1:
            raise ValueError("estimate: min_samples, silent_windows, steady_windows and "
                             "idle_windows must be at least 1")
        self.decay = 0.5 ** (1.0 / half_life)
        self.peak_decay = 0.5 ** (1.0 / peak_half_life)
        self.active_share = active_share
        self.min_samples = int(min_samples)
        self.share = share
        self.silent_windows = int(silent_windows)
        self.steady_windows = int(steady_windows)
        self.idle_windows = int(idle_windows)
        self.idle: dict[str, int] = {}  # source -> consecutive active windows it sent nothing
        self.pairs: dict[Pair, PairEstimate] = {}
        self.members: set[Pair] = set()  # the pairs of the matrix
        self.weight = 0.0  # weighted number of active windows
        self.peak = 0.0
        self.active = 0  # active windows folded
        self.quiet = 0  # windows with traffic that were too quiet to count
        self.empty = 0  # windows in which the members sent nothing to each other

    def fold(self, window_bytes: dict, window_samples: dict,
             window_planes: dict | None = None) -> str:
        """Add one closed window of the members' pairs (bytes and samples per pair, and
        with several planes their bytes per plane: pair -> {plane: bytes}). Returns
        ``active`` (it counted), ``quiet`` (below the active share of the peak) or ``empty``."""
        total = sum(window_bytes.values())
        peak = self.peak
        self.peak = max(total, peak * self.peak_decay)
        if total <= 0:
            self.empty += 1
            return "empty"
        if total < self.active_share * peak:
            self.quiet += 1
            return "quiet"
        d = self.decay
        self.weight = self.weight * d + 1.0
        self.active += 1
        senders = {a for a, _ in window_samples}
        self.idle = {a: 0 if a in senders else self.idle.get(a, 0) + 1
                     for a in senders | {a for a, _ in self.pairs}}
        for p, e in self.pairs.items():
            e.bytes *= d
            e.samples *= d
            for q in e.planes:
                e.planes[q] *= d
            if p not in window_samples and (p[0] in senders or
                                            self.idle[p[0]] >= self.idle_windows):
                e.silent += 1
        for p, b in window_bytes.items():
            e = self.pairs.get(p)
            if e is None:
                e = self.pairs[p] = PairEstimate()
            n = window_samples.get(p, 0)
            e.bytes += b
            e.samples += n
            e.total_samples += n
            e.gap = max(e.gap, e.silent)
            e.silent = 0
            e.before = (e.samples, self.weight)
            for q, b in (window_planes or {}).get(p, {}).items():
                e.planes[q] = e.planes.get(q, 0.0) + b
        self._update_members()
        return "active"

    def _missed(self, e: PairEstimate) -> float:
        """-log of the chance that the pair, were it still sending as it did before its
        silence (s samples over a weight of w active windows), got no sample in the k active
        windows it was silent: s * log(1 + k / w) (Poisson, its rate known from s samples:
        about k * s / w for a pair of many samples, less for a light one). Its bytes and
        samples decay while it is silent, but the silence is no measure of its rate before."""
        s, w = e.before
        return s * math.log1p(e.silent / w)

    def _silence_below(self, e: PairEstimate, chance: float) -> bool:
        """So long a silence, were the pair still sending at its rate, had a chance below
        ``chance`` among the matrix's pairs (Poisson: exp(-missed) per pair)."""
        return self._missed(e) >= math.log(max(len(self.members), 1) / chance)

    def _usual_gap(self, e: PairEstimate) -> int:
        """Silent windows the pair has come back from: no evidence that it left."""
        return min(e.gap, self.idle_windows)

    def _silent_for_sure(self, e: PairEstimate) -> bool:
        return e.silent >= self.silent_windows + self._usual_gap(e) and \
            self._silence_below(e, SURE_SILENT)

    def _update_members(self) -> None:
        gone = [p for p, e in self.pairs.items() if e.silent and (
            self._silent_for_sure(e) or (p not in self.members and e.samples < FORGOTTEN))]
        for p in gone:
            del self.pairs[p]
        means = {p: e.bytes for p, e in self.pairs.items()}
        floor = self.share * sum(means.values()) / len(means) if means else 0.0
        joined = {p for p, e in self.pairs.items()
                  if e.total_samples >= self.min_samples and means[p] >= floor and means[p] > 0}
        # a member stays until it is surely silent, even if its share fell
        members = joined | (self.members & set(self.pairs))
        for p in members - self.members:
            self.pairs[p].joined = self.active
        self.members = members

    @property
    def steady(self) -> bool:
        """The matrix has pairs, few bytes on pairs that just joined, and none in doubt
        (module docstring)."""
        return self.unsteady() is None

    def unsteady(self) -> str | None:
        """Why the matrix may not be acted on yet, in words (None: it is steady): no pair
        with enough samples, too few active windows, a pair in doubt, or too many of its
        bytes on pairs that just joined or are still short of samples."""
        if not self.members:
            short = sum(1 for e in self.pairs.values() if e.total_samples < self.min_samples)
            return (f"pairs short of samples: {short} pairs sampled, none with "
                    f"{self.min_samples} samples yet" if short else "no pair measured")
        if self.active < self.steady_windows:
            return f"not steady: {self.active} of {self.steady_windows} active windows"
        recent = self.active - self.steady_windows + 1
        total = new = 0.0
        outside = outside_pattern({p: self.pairs[p].bytes for p in self.members})
        for p in self.members:
            e = self.pairs[p]
            if e.silent > self._usual_gap(e) and p not in outside and \
                    self._silence_below(e, IN_DOUBT):
                return (f"in doubt: pair {p[0]} -> {p[1]} silent for {e.silent} active "
                        "windows (it may be leaving)")
            total += e.bytes
            if e.joined > recent:
                new += e.bytes
        # sampled, too few samples yet to join: the light pairs still trickling in
        new += sum(e.bytes for p, e in self.pairs.items()
                   if p not in self.members and e.total_samples < self.min_samples)
        if new >= SETTLED * total:
            return (f"not steady: {100 * new / max(total, 1e-12):.0f}% of its bytes on pairs "
                    f"that just joined or are short of samples (below {100 * SETTLED:g}% "
                    "is steady)")
        return None

    def matrix(self) -> dict[Pair, float]:
        """Mean bytes per active window of each pair of the matrix."""
        return {p: self.pairs[p].bytes / self.weight for p in sorted(self.members)}

    def plane_shares(self, pair: Pair) -> dict[int, float]:
        """Plane -> share of the pair's weighted bytes that came on it ({}: none told)."""
        e = self.pairs.get(pair)
        total = sum(e.planes.values()) if e else 0.0
        return {q: b / total for q, b in sorted(e.planes.items())} if total > 0 else {}

    def confidence(self, pair: Pair) -> dict:
        """The samples behind a pair's estimate and its relative error (1 / sqrt of the
        weighted samples: Poisson counts)."""
        e = self.pairs.get(pair)
        if e is None or e.samples <= 0:
            return {"samples": 0, "relative_error": None}
        return {"samples": e.total_samples, "relative_error": round(1 / math.sqrt(e.samples), 4)}
