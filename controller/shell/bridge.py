"""Native OS threads next to an eventlet hub: their own primitives, and calls run on the hub.

Under ryu-manager the standard library is monkey-patched (``threading``, ``socket``, ``time``
are green): a thread started with ``native_thread`` is a real OS thread, scheduled by the
kernel and the GIL (a 5 ms switch interval) instead of waiting for its turn on the hub, and it
must use only unpatched primitives (``eventlet.patcher.original``). It must never take a green
lock, the service lock included (a contended green lock from another OS thread cannot be woken
by the hub), nor log (``logging``'s locks are made green by ``monkey_patch``): ``HubBridge``
hands such work to the hub and waits for it with a native event.

Without eventlet (os-ken, tests) the originals are the standard library's and ``HubBridge``
calls in the calling thread.
"""
from __future__ import annotations

import sys
from collections import deque


def _patched() -> bool:
    ev = sys.modules.get("eventlet.patcher")
    return ev is not None and ev.is_monkey_patched("thread")


def original(name: str):
    """The unpatched module ``name`` (``socket``, ``threading``, ``time``)."""
    if _patched():
        return sys.modules["eventlet.patcher"].original(name)
    return __import__(name)


def native_thread(fn, *args) -> None:
    """Run ``fn(*args)`` in a daemon OS thread, even under a monkey-patched ``threading``."""
    original("threading").Thread(target=fn, args=args, daemon=True).start()


class HubBridge:
    """``call(fn, *args)`` from a native thread runs ``fn(*args)`` in a green thread of the
    hub (``spawn``) and returns its result or raises its exception; ``post`` does not wait.
    The hub side is ``run`` (spawned on the hub): it waits on a socket pair the callers write a
    byte to, so it costs the hub nothing while idle. A call waits for the hub's turn as a green
    request did: the bridge is for the requests that need the service lock (writes, heavy
    views), not a way to make them faster."""

    def __init__(self, spawn=None):
        self.spawn = spawn
        self.eventlet = _patched() and spawn is not None
        self._queue: deque = deque()  # append and popleft are atomic under the GIL
        self._stop = False
        if self.eventlet:
            sock = original("socket")
            self._r, self._w = sock.socketpair()
            self._r.setblocking(False)

    def call(self, fn, *args):
        if not self.eventlet:
            return fn(*args)
        done = original("threading").Event()
        item = [fn, args, done, None, None]
        self._queue.append(item)
        self._wake()
        done.wait()
        if item[4] is not None:
            raise item[4]
        return item[3]

    def post(self, fn, *args) -> None:
        if not self.eventlet:
            fn(*args)
            return
        self._queue.append([fn, args, None, None, None])
        self._wake()

    def _wake(self) -> None:
        try:
            self._w.send(b"x")
        except OSError:  # the bridge was stopped
            pass

    def stop(self) -> None:
        self._stop = True
        if self.eventlet:
            self._wake()

    def run(self) -> None:
        """The hub side (a green thread): every call queued runs in a green thread of its own."""
        if not self.eventlet:
            return
        from eventlet.hubs import trampoline
        while not self._stop:
            trampoline(self._r.fileno(), read=True)
            try:
                self._r.recv(4096)
            except (BlockingIOError, InterruptedError):
                pass
            while self._queue:
                self.spawn(self._run, self._queue.popleft())
        self._r.close()
        self._w.close()

    @staticmethod
    def _run(item) -> None:
        fn, args, done = item[0], item[1], item[2]
        try:
            item[3] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            item[4] = e
        finally:
            if done is not None:
                done.set()
