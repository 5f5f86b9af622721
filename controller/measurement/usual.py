"""What each sender usually reports: the bounds that keep one datagram or one report from
freezing a job's learning.

Why: a job's window counts only when its members' bytes reach a quarter of its recent peak
(``estimate``), and the peak halves every 30 windows. One sFlow sample at 1 in 2^20 (the
highest rate accepted) of a 9,000-byte frame stands for 9.4 GB: the peak it set left a job of
9 MB a window "quiet" for 241 windows, 8 minutes (issue 74); one agent's report of 60 s at line
rate, sent a second after its previous one, froze a job for 114. A global bound cannot tell
those from real traffic; what the sender itself usually reports can:

* **sFlow** (``UsualSampling``): per sender (agent address and sub-agent) a sample's
  sampling rate is believed up to the second-largest of the largest rates of the sender's
  last ``HISTORY`` datagrams, its frame length up to ``JUMBO`` or the second-largest of
  their largest frames: a rate or super-frame that one datagram alone shows counts at the
  usual one (a switch whose rate really changed is believed from its third datagram at the
  new rate; ports sampled at different rates are each under the largest). A sender heard
  less than twice is held to the median of the others' usual rates, so a forged sender
  gains nothing; only the very first sender heard is taken at its word (up to
  ``learner.MAX_SAMPLING_RATE``). Per sender, not per data source: one look-up a datagram,
  not one a sample (the learner's cost per sample stays as it was).
* **Reports** (``ReportClock``): a host's report is believed to cover at most the time that
  actually elapsed since its previous one (banked up to ``BANK_S`` while it was quiet, with
  ``LATE_S`` for a report that arrives early after a late one), not the interval it claims:
  its bytes must fit its links over that time (``service.hostcounts``). A host's first
  report is believed up to ``BANK_S`` + ``LATE_S`` (its agent's first read is a baseline:
  it reports one read interval, a second; it reports nothing while it sends nothing, and
  then again one interval).

With both, one datagram adds at most what one usual sample does and one report at most its
links' bytes over the time since its previous report. O(1) per datagram and report beyond
the samples' pass; memory O(senders + hosts), senders capped at ``MAX_SOURCES``.

>>> u, sw1 = UsualSampling(), ("10.1.0.1", 0)
>>> u.bound(sw1), u.note(sw1, 1024, 9000), u.note(sw1, 1024, 9000), u.bound(sw1)
((1048576, 131072), None, None, (1024, 9216))
>>> u.note(sw1, 1 << 20, 9000); u.bound(sw1)  # one datagram at 2^20: the usual rate
(1024, 9216)
>>> u.bound(("192.0.2.9", 7))  # a new sender: the others' usual rate
(1024, 9216)
>>> c = ReportClock()
>>> c.believed("h0", 1.0, now=10.0), c.note("h0", 1.0, 10.0), c.believed("h0", 60.0, 11.0)
(1.0, None, 1.5)
"""
from __future__ import annotations

import statistics
import threading
from collections import deque

HISTORY = 8  # datagrams of a sender its usual rate and frame are taken from
JUMBO = 9216  # bytes: a jumbo frame and its headers, believed of any source
MAX_SOURCES = 1 << 16  # senders remembered (a forger could name many)
BANK_S = 1.0  # seconds a quiet host banks: its agent reads every second (agent.main.TRAFFIC_S)
LATE_S = 0.5  # seconds a report may run ahead of the clock (it arrives early after a late one)


class UsualSampling:
    """Per sFlow sender, the sampling rate and frame length it usually reports (module
    docstring). Not thread-safe: the learner calls it under its lock."""

    def __init__(self, history: int = HISTORY, max_rate: int = 1 << 20,
                 max_frame: int = 1 << 17):
        self.history = max(int(history), 2)
        self.max_rate, self.max_frame = int(max_rate), int(max_frame)
        self._seen: dict[tuple, deque] = {}  # sender -> (rate, largest frame) per datagram
        self._bound: dict[tuple, tuple[int, int]] = {}  # sender -> (rate, frame) believed
        self._usual: dict[tuple, int] = {}  # sender -> its usual rate, once it has one

    def bound(self, sender: tuple) -> tuple[int, int]:
        """(rate, frame) above which a sample of ``sender``'s next datagram counts as these:
        the second-largest of its last datagrams' (two or more), else the median of the
        others' usual rates and ``JUMBO``; the very first sender is taken at its word."""
        got = self._bound.get(sender)
        if got is not None:
            return got
        seen = self._seen.get(sender, ())
        if len(seen) >= 2:
            rates = sorted(r for r, _ in seen)
            frames = sorted(f for _, f in seen)
            got = self._bound[sender] = (rates[-2], max(frames[-2], JUMBO))
            self._usual[sender] = rates[-2]
            return got
        usual = [r for x, r in self._usual.items() if x != sender]
        if not usual:
            return self.max_rate, self.max_frame
        return int(statistics.median_low(usual)), JUMBO

    def note(self, sender: tuple, rate: int, frame: int) -> None:
        """``sender``'s datagram: its samples' largest rate and frame."""
        seen = self._seen.get(sender)
        if seen is None:
            if len(self._seen) >= MAX_SOURCES:
                oldest = next(iter(self._seen))
                del self._seen[oldest]
                self._bound.pop(oldest, None)
                self._usual.pop(oldest, None)
            seen = self._seen[sender] = deque(maxlen=self.history)
        entry = (rate, frame)
        if not (len(seen) == self.history and seen[0] == entry):  # else the same multiset
            self._bound.pop(sender, None)
        seen.append(entry)


class ReportClock:
    """Per host, the time its reports have accounted for (module docstring): a bucket of
    seconds that fills with the time elapsed, up to ``bank_s``, and that each report drains
    by the interval believed of it, down to -``late_s``. Thread-safe (reports arrive on the
    REST threads)."""

    def __init__(self, bank_s: float = BANK_S, late_s: float = LATE_S):
        self.bank_s, self.late_s = float(bank_s), float(late_s)
        self._hosts: dict[str, tuple[float, float]] = {}  # host -> (credit, time of report)
        self._lock = threading.Lock()

    def _credit(self, host: str, now: float, first: float) -> float:
        """The seconds banked: ``first`` for a host not heard before."""
        credit, at = self._hosts.get(host, (first, now))
        return min(self.bank_s, credit + max(now - at, 0.0))

    def believed(self, host: str, claimed: float, now: float) -> float:
        """Seconds a report of ``host`` claiming ``claimed`` seconds at ``now`` may cover."""
        with self._lock:
            return max(0.0, min(claimed, self._credit(host, now, self.bank_s) + self.late_s))

    def note(self, host: str, believed: float, now: float) -> None:
        """A report of ``host`` covering ``believed`` seconds was accepted at ``now`` (the
        first one of a host used what it was believed to cover, and banks nothing)."""
        with self._lock:
            credit = self._credit(host, now, believed)
            self._hosts[host] = (max(credit - believed, -self.late_s), now)

    def forget(self, host: str | None = None) -> None:
        with self._lock:
            if host is None:
                self._hosts.clear()
            else:
                self._hosts.pop(host, None)
