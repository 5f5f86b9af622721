"""A back-off: after each failure the next try waits twice as long, from ``first`` up to
``cap`` seconds; a success ends it. Time is passed in (monotonic seconds), so a step of the
wall clock never stalls nor hurries a retry."""
from __future__ import annotations


class Backoff:
    """``due(now)``: may try now; ``failed(now)``: the wait before the next try (also
    recorded); ``ok()``: tries are due at once again.

    >>> b = Backoff(first=0.5, cap=2.0)
    >>> b.due(0.0), b.failed(0.0), b.due(0.4), b.due(0.5), b.failed(0.5), b.failed(1.5)
    (True, 0.5, False, True, 1.0, 2.0)
    >>> b.failed(3.5), b.failures
    (2.0, 4)
    >>> b.ok(); b.due(3.6), b.failures
    (True, 0)
    """

    def __init__(self, first: float = 0.25, cap: float = 8.0):
        self.first, self.cap = first, cap
        self.failures = 0
        self.wait = 0.0
        self.next_at = float("-inf")

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def failed(self, now: float) -> float:
        self.failures += 1
        self.wait = min(self.cap, self.first if self.wait == 0 else 2 * self.wait)
        self.next_at = now + self.wait
        return self.wait

    def ok(self) -> None:
        self.failures, self.wait, self.next_at = 0, 0.0, float("-inf")
