"""The little the shell needs from a framework's concurrency: ``spawn``, ``sleep``, ``Event``.

The Ryu adapter passes Ryu's eventlet hub (green threads); the os-ken adapter and the tests pass
``THREADS`` (native threads). Everything built on a hub must be safe under preemptive threads:
shared dicts behind a lock, and waits that end by themselves (``Event().wait(timeout)`` returns
False on timeout; nothing relies on killing a thread or on a timeout interrupting a call).
os-ken's own ``hub.Event`` is not used: under native threads its ``wait(timeout)`` never returns
when the event is never set.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple


class Hub(NamedTuple):
    spawn: Callable  # spawn(fn, *args): run fn(*args) concurrently
    sleep: Callable[[float], None]
    Event: Callable  # Event() with set(), clear(), is_set() and wait(timeout) -> bool


def _spawn_thread(fn, *args, **kwargs) -> threading.Thread:
    """A daemon thread, so an interrupted controller exits without joining its loops."""
    t = threading.Thread(target=fn, args=args, kwargs=kwargs, daemon=True)
    t.start()
    return t


THREADS = Hub(spawn=_spawn_thread, sleep=time.sleep, Event=threading.Event)
