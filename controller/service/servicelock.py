"""The service's two-level lock: views wait neither for the switches nor for a change's work.

``with lock:`` (every mutating entry point, a transaction included) takes the *change* lock,
then the *state* lock: no change starts inside another, and only the thread holding the
change lock (the writer) mutates the state. Views take only the state lock (``with
lock.views:``). Around the parts of a change that mutate nothing a view reads, the writer lets
go of the state lock alone (``released``, alias ``waiting``; ``read_only(fn, ...)``) and takes
it again after: waits for the switches (barrier replies, table reads, host-mode probes), the
CPU of planning and of the desired tables, and the store write. The change lock stays held,
so the next change (a port change, a POST) still waits for the whole of this one, while a
view answers at once.

What views read, and what they fill (audit): the state (``jobs``, ``fabric``, ``declared``,
``switches``, ``version``, events, counters and timings, telemetry, measured matrices), the
reconciler's shadows (``installed``, ``pending``, ``last_sync``), host mode's ports, maps and
probe counts, discovery's view (the writer mutates it under the state lock only), learning
(its own lock). They fill caches keyed by the state version: the
installed plan (``Transaction.current_plan``) and the predictions (``Predictions``), each
built in a local and kept in one assignment, so a view and the writer's answer that build one
at once keep equal values; and caches kept on a fabric object (``derived``: alive members,
link ends), which are idempotent (a value built twice is the same). Views never call
``Transaction.current_tables`` nor ``DesiredTables``: only a writer does (the transaction,
``tablesync`` under the lock), so the desired tables' incremental caches have one user at a
time and may be computed with the state lock let go (each is replaced in one assignment).

What a change does, in order, and what a view sees meanwhile (a view sees a state between
two steps of the change, never a step half done; every step that mutates runs under the
state lock):

* the entry point's notes (under the lock): ``ports_changed`` marks the ports and tells
  discovery, ``switch_connected``/``switch_disconnected`` note the switch, ``put_fabric`` lets
  go of switches outside the new fabric (``reconciler.forget``). Views see them from then on,
  next to the committed state of the previous change (``/v1/fabric`` lists a port down
  before ``links_down`` names the link);
* planning (let go, ``read_only(decide.*)``: ``topology``, ``post_job``, ``optimize``,
  ``reoptimise``, ``adopt``): reads the state and the settings and mutates copies only
  (``replan_groups`` copies every record, ``admission.admit`` may change the copy's mode;
  tests/test_views_during_planning.py checks it): views see the committed state of the
  previous change and the notes;
* the desired tables and the offline check (let go; ``Transaction.apply``), the diffs of
  ``Reconciler.converge`` (let go: they read the shadows): views see the same;
* the installs (let go, ``waiting``): before the additions are confirmed, the old entries;
  between additions and deletions (make before break), old and new entries together
  (``/v1/fabric``'s rule counts and budget, ``mlroute_rules_installed`` count both);
  ``counters["messages_sent"]`` already counts the batch being waited on, the other counters
  (rules installed and removed, installs, failures) move after it, under the lock;
* host mode's probes (let go around each round, ``HostPortService.place``): probe counts
  move before a round, learned maps after it; the ports chosen are kept at the commit;
* the commit (under the lock, one step): declared and effective fabric, jobs,
  ``next_number``, ``version``, counters and timings, host mode's ports. From here views see
  the new state whole (never jobs of the change with the version before it);
* ``drain`` (reads let go, repairs under the lock) and the store write: the document is built
  under the lock (the committed intent), written with it let go (a sqlite transaction, an
  etcd round trip); views see the committed state before it is stored (a crash then loses
  it, as a crash before the commit would: the client has no answer yet);
* the event, recorded under the lock after the store write: a view between the commit and
  it sees the new state without the change's event;
* the change's answer (``post_job``'s job view, ``optimize``'s links summary; let go): reads
  the committed state, fills the view caches as a view does.

Still under the state lock, and why: everything that mutates (the notes, ``forget``, shadows
and counters after each confirmed batch, the commit, the event); building the stored
document (it must be the committed state); a POST's ``parse_job`` (a few ms); learned
re-plans (``MatrixLearning.step`` updates the tracking ``explain`` shows between its
``decide.learned`` calls); the off-path planner's final ``decide.improved`` (its planning
runs without any lock already, ``anytime.py``); ``put_fabric`` and ``delete_job`` (no
planning). Views also exclude one another (the state lock is one lock): a view that builds
the plan or the predictions delays the views behind it.

The lock is not re-entrant at either level: a thread holding it must not take it again, nor
take ``views`` (a view method called from inside a change deadlocks). Order is change, then
state; a view never takes the change lock, so the two cannot deadlock. ``released`` lets go
only when the calling thread holds the lock as a writer (it is a no-op elsewhere: a table
read without the lock, a reconciler used alone in tests, a part nested in another).

Threads: the hub is native threads under os-ken and the tests, eventlet green threads under
Ryu, where ``threading`` is monkey-patched (``threading.Lock`` and ``get_ident`` are green),
so the same code holds. A green thread runs only when another yields: while the writer waits
(its barrier ``Event``), and at ``pause`` (the shell's ``hub.sleep(0)``), which ``released``
calls once it let go, so views waiting for the state lock run before the part's CPU work.
A view that arrives during a CPU part waits under eventlet for the part's next yield: the
long parts call the same ``pause`` as they go, with the lock let go (the desired tables and
the diffs every few thousand entries, a POST's answer every few hundred routes; a switch
failure's desired tables were one stretch of 70 ms on a k = 16 fat-tree with fake switches,
85 ms with an entry per host: ``benchmarks/controlplane.py`` gives each phase's longest
stretch between yields). A writer's yield lets no other writer in: the change lock stays
held. Under native threads a view runs at once.

Published views (``publish``, off unless set; ``published.py``): a reader that must not take
the lock at all (a native OS thread under eventlet: the lock is green) reads documents the
writer builds, with the state lock held, when it lets go of it (always at ``__exit__``; at the
start of ``released`` at most every ``published.PART_GAP_S``), and replaces in one assignment.
Those points are exactly where a view under the lock can get in, so a published document shows
one of the states such a view could see. The hook must only read (it runs inside the change)
and be cheap.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class ServiceLock:
    def __init__(self, pause: Callable[[], None] | None = None):
        self.change = threading.Lock()  # one writer at a time, for the whole change
        self.views = threading.Lock()  # the state: writers (but while let go) and views
        self._writer: int | None = None  # the thread holding ``change`` (get_ident)
        self._released = False  # the writer let go of ``views`` (waits, plans, stores)
        # a cooperative yield (the shell's ``hub.sleep(0)``) once the writer let go: under
        # eventlet a view runs only when the writer's green thread yields
        self.pause = pause
        # called by the writer, state lock held, just before it lets go of it: at the end of a
        # change ``publish(True)``, before each ``released`` part ``publish(False)`` (which may
        # skip: ``published.py``); publishes views for lock-free readers (a native REST
        # thread under eventlet). None: nothing is published
        self.publish: Callable[[bool], None] | None = None

    def __enter__(self) -> ServiceLock:
        self.change.acquire()
        try:
            self.views.acquire()
        except BaseException:
            self.change.release()
            raise
        self._writer, self._released = threading.get_ident(), False
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._publish(True)
        finally:
            self._writer = None
            self.views.release()
        self.change.release()

    def held(self) -> bool:
        """The calling thread holds the lock as a writer."""
        return self._writer is not None and self._writer == threading.get_ident()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Around a part of a change that mutates nothing a view reads (a wait for the
        switches, planning, the desired tables, a store write): the writer lets go of the
        state lock (views may read the state meanwhile), yields once (``pause``), and takes
        the lock again after, even when the part raised. A no-op for a thread that is not
        the writer, or already let go (nested)."""
        if not self.held() or self._released:
            yield
            return
        self._publish(False)
        self._released = True
        self.views.release()
        try:
            if self.pause is not None:
                self.pause()
            yield
        finally:
            self.views.acquire()
            self._released = False

    def _publish(self, end: bool) -> None:
        """The ``publish`` hook, when set; a failure there is logged, never the change's."""
        if self.publish is None:
            return
        try:
            self.publish(end)
        except Exception:  # noqa: BLE001 - a bug in a view must not undo a committed change
            logging.getLogger("mlroute").exception("mlroute: publishing the views failed")

    waiting = released  # a wait for the switches (``Reconciler``, a bootstrap install)

    def read_only(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """``fn(*args, **kwargs)`` with the state lock let go (``released``): for a part of
        the writer that only reads the state (``decide``'s planning, a change's answer).
        ``fn`` must not mutate what views read: they run meanwhile."""
        with self.released():
            return fn(*args, **kwargs)
