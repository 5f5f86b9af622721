"""Views published for readers that cannot take the service lock (a native OS thread under
eventlet, whose green lock it must not wait for): preserialised answers, replaced whole.

The writer publishes where it lets go of the state lock (``ServiceLock``'s ``publish`` hook: at
the end of every change, and before a ``released`` part at most every ``PART_GAP_S``), with the
state lock held, so a published document is always one of the states a view under the lock
could see (never a change half done). A reader takes ``Published.current`` (one attribute read,
atomic under the GIL) and serves its bytes: it never touches the live state.

What is published (the cheap, frequent GETs): ``GET /v1/ready`` (status and body, O(switches):
rebuilt at every publication) and ``GET /v1/jobs`` (O(jobs): rebuilt when the committed state
changed, keyed as ``Transaction.current_plan`` is, by the state version and the identity of the
fabric and job map, which every commit replaces). Everything else is still answered on the hub.

Staleness: a published document lags the live state by at most the writer's stretch between
two lettings-go (plus ``PART_GAP_S`` mid-change: a change's parts publish at most every 10 ms;
320 switches connecting let go 2,240 times, ``benchmarks/published_cost.py``), and never for a
committed change: its commit is published before the change's answer goes out (``__exit__``),
so a client sees its own POST in the next GET.
"""
from __future__ import annotations

import json
import time

from controller.service import hoststatus, views, watches

PART_GAP_S = 0.01  # a writer's parts publish at most this often (its end always publishes)


def _encode(doc) -> bytes:
    return (json.dumps(doc) + "\n").encode()  # as the REST server encodes its answers


class Published:
    def __init__(self, clock=time.monotonic):
        self.current: dict | None = None  # what a reader gets: {path: (status, body bytes)}
        self.clock = clock
        self._last: float | None = None  # ``clock()`` at the last publication
        self._jobs_key = None
        self._jobs_answer: tuple[int, bytes] | None = None
        self.hosts = None  # the hosts' agents for /v1/ready (``hoststatus.of_service``)
        self.watch = None  # updates the hosts' document versions (``watches.HostVersions``)
        self.drain = None  # ... and names the hosts changed since
        self.on_hosts = None  # told the hosts whose documents changed (the front's ``wake``)
        self.count = 0  # publications, and seconds spent building them (published_cost)
        self.seconds = 0.0

    @classmethod
    def attach(cls, service) -> Published:
        """Publish ``service``'s views from now on: once here (under the state lock, as a
        view), then at each letting-go of a writer (``ServiceLock.publish``)."""
        pub = cls()
        pub.hosts = lambda: hoststatus.of_service(service)
        pub.watch = lambda state: watches.of(service).update(state, watches.host_ports(service))
        pub.drain = watches.of(service).drain
        with service.lock.views:
            pub.publish(service.state, service.reconciler)
        service.lock.publish = lambda end: pub.publish(service.state, service.reconciler, end)
        return pub

    def publish(self, state, reconciler, end: bool = True) -> None:
        """Build the documents from the state (the caller holds the state lock) and replace
        the snapshot in one assignment. When building fails nothing is published until the
        next success (readers go to the service instead: never an old answer served as new).
        ``end`` False (a writer letting go mid-change): skipped within ``PART_GAP_S`` of the
        last publication, so a change of many parts publishes at most every ``PART_GAP_S``."""
        now = self.clock()
        if not end and self._last is not None and now - self._last < PART_GAP_S:
            return
        self._last = now
        t0 = time.perf_counter()
        try:
            key = (state.version, id(state.fabric), id(state.jobs))
            if key != self._jobs_key or self._jobs_answer is None:
                self._jobs_answer = (200, _encode(views.jobs_view(state)))
                self._jobs_key = key
            status, doc = views.ready_view(state, reconciler)
            hosts = self.hosts() if self.hosts is not None else None
            if hosts is not None:
                doc["hosts"] = hosts
        except Exception:
            self.current = None
            raise
        self.current = {"/v1/ready": (status, _encode(doc)), "/v1/jobs": self._jobs_answer}
        if self.watch is not None:  # versions before the waking: a parked watch that looks
            self.watch(state)  # after its wake was sent sees its new version (front.py)
            changed = self.drain()
            if changed and self.on_hosts is not None:
                self.on_hosts(changed)
        self.count += 1
        self.seconds += time.perf_counter() - t0

    def again(self, service) -> None:
        """Publish now, with no change of the state: the hosts' agents (/v1/ready's
        ``hosts``) change with their reports, which change no state (the shell calls it
        each round on fabrics without OpenFlow)."""
        with service.lock.views:
            self.publish(service.state, service.reconciler)

    def answer(self, path: str) -> tuple[int, bytes] | None:
        """The published answer to ``GET path`` (one trailing slash allowed, as the API's
        routes allow it), None when the path is not published or nothing is published now."""
        answers = self.current
        if answers is None:
            return None
        return answers.get(path[:-1] if path.endswith("/") and path != "/" else path)
