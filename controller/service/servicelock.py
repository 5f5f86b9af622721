"""The service's two-level lock: views do not wait for the switches.

``with lock:`` (every mutating entry point, a transaction included) takes the *change* lock,
then the *state* lock, and holds both for its whole duration: no change starts inside
another, and nothing else mutates the state meanwhile. Views take only the state lock
(``with lock.views:``). While a change waits for the switches (an install's barrier replies,
a table read: ``Reconciler`` calls the installer inside ``lock.waiting()``), its thread lets
go of the state lock alone and takes it again once the switches answered; the change lock
stays held, so the next change (a port change, a POST) still waits for the whole of this one,
while a view answers at once.

What a view sees while a change waits (the writer mutates nothing while it waits, so a view
never sees a structure mid-update; what it sees is between steps of the change):

* the committed state of the previous change: ``state.jobs``, ``fabric``, ``declared``,
  ``version``, events, and the intent persisted. ``Transaction._commit`` runs after the
  last wait of ``converge`` and before the state lock is let go again (``drain`` after it
  may wait: its views see the new state, committed);
* what the entry point noted before it asked for the change: ``ports_changed`` marks the
  ports and tells discovery first, ``switch_connected``/``switch_disconnected`` note the
  switch, ``put_fabric`` lets go of switches outside the new fabric
  (``reconciler.forget``);
* the reconciler's shadow tables as the switches hold them: before the additions are
  confirmed, the old entries; between additions and deletions (make before break), old and
  new entries together (``/v1/fabric``'s rule counts and budget, ``mlroute_rules_installed``
  count both); ``counters["messages_sent"]`` already counts the batch being waited on, the
  other counters (rules installed and removed, installs, failures) move after it.

The lock is not re-entrant at either level: a thread holding it must not take it again, nor
take ``views`` (a view method called from inside a change deadlocks). Order is change, then
state; a view never takes the change lock, so the two cannot deadlock. ``waiting`` lets go
only when the calling thread holds the lock as a writer (it is a no-op elsewhere: a table
read without the lock, a reconciler used alone in tests).

Threads: the hub is native threads under os-ken and the tests, eventlet green threads under
Ryu, where ``threading`` is monkey-patched (``threading.Lock`` and ``get_ident`` are green),
so the same code holds: a view then runs while the writer's green thread is parked on its
barrier ``Event``.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ServiceLock:
    def __init__(self):
        self.change = threading.Lock()  # one writer at a time, for the whole change
        self.views = threading.Lock()  # the state: writers (but while they wait) and views
        self._writer: int | None = None  # the thread holding ``change`` (get_ident)
        self._released = False  # the writer let go of ``views`` (it waits for switches)

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
        self._writer = None
        self.views.release()
        self.change.release()

    def held(self) -> bool:
        """The calling thread holds the lock as a writer."""
        return self._writer is not None and self._writer == threading.get_ident()

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a wait for the switches: the writer lets go of the state lock (views may
        read the state meanwhile) and takes it again after, even when the wait raised. A
        no-op for a thread that is not the writer, or already waiting (nested)."""
        if not self.held() or self._released:
            yield
            return
        self._released = True
        self.views.release()
        try:
            yield
        finally:
            self.views.acquire()
            self._released = False
