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


def _patched(name: str | None = None) -> bool:
    """Whether eventlet patched module ``name`` (any of ``thread`` and ``socket`` when None:
    ``ryu-manager`` patches both, ``--enable-debugger`` the socket alone, and either way the
    service runs on eventlet's hub)."""
    ev = sys.modules.get("eventlet.patcher")
    if ev is None:
        return False
    return any(ev.is_monkey_patched(n) for n in ((name,) if name else ("thread", "socket")))


def original(name: str):
    """The unpatched module ``name`` (``socket``, ``threading``, ``time``)."""
    if _patched("thread" if name == "threading" else name):
        return sys.modules["eventlet.patcher"].original(name)
    return __import__(name)


class Stopping(RuntimeError):
    """A call handed to the hub after (or while) the bridge stopped: it will not run."""


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
        self.eventlet = _patched() and spawn is not None  # else calls run where they are made
        self._queue: deque = deque()  # append and popleft are atomic under the GIL
        self._stop = False
        self._ran_out = False  # ``run`` ended: what is queued now never runs
        if self.eventlet:
            sock = original("socket")
            self._r, self._w = sock.socketpair()
            self._r.setblocking(False)
            self._w.setblocking(False)  # a full buffer already wakes the hub: never wait

    def call(self, fn, *args):
        """``fn(*args)`` on the hub, waited for (a change waits for the switches as long as
        its own timeouts say); ``Stopping`` once the bridge stopped before it ran."""
        if not self.eventlet:
            return fn(*args)
        if self._stop:
            raise Stopping("the controller is stopping")
        done = original("threading").Event()
        item = [fn, args, done, None, None]
        self._queue.append(item)
        self._wake()
        while not done.wait(0.5):
            if self._ran_out:  # the hub side ended (stopped): nothing will run it
                self._fail_queued()
        if item[4] is not None:
            raise item[4]
        return item[3]

    def post(self, fn, *args) -> None:
        if not self.eventlet:
            fn(*args)
            return
        if not self._stop:
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
            while self._queue and not self._stop:
                self.spawn(self._run, self._queue.popleft())
        self._ran_out = True
        self._fail_queued()
        self._r.close()
        self._w.close()

    def _fail_queued(self) -> None:
        """Every call still queued raises ``Stopping`` in its caller."""
        while True:
            try:
                item = self._queue.popleft()
            except IndexError:
                return
            item[4] = Stopping("the controller is stopping")
            if item[2] is not None:
                item[2].set()

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
