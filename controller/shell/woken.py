"""Woken watches answered in batches (the native REST front's, ``front.py``): the documents
of a batch's hosts built in one call on the hub (in chunks, the hub's other green threads
running between them), each sent there as soon as it is built; a connection kept alive goes
back to the front.

Why batches: a ring of 512 woke 512 watches at once, and handing each to a thread of its
own made 512 calls on the hub, each costing more than its document.

Why sent on the hub: a send that does not wait (``MSG_DONTWAIT``: a document of a few KB
fits a fresh connection's buffer whole) costs the hub a system call, and the batch's first
answers leave while the rest are built. The batch's thread sent them after the hub had built
them all, the hub idle meanwhile: 20-35 ms of a ring's 0.23 s at k = 16, and a thread that
sends while the hub builds waits for the interpreter lock at each send (issue 73). What a
socket does not take at once, the thread sends (``SEND_S``).
"""
from __future__ import annotations

import email.utils
import json
import socket
from collections import deque

from controller.service import api
from controller.shell.bridge import original
from controller.shell.front import response

BATCH = 64  # woken watches whose documents the hub builds before other green threads run
CALL = 16 * BATCH  # woken watches one call on the hub answers at most (``serve_all``)
SEND_S = 5.0  # an answer to a woken watch must be taken within this long


def documents(service, hosts: list[str]) -> dict:
    """Host -> (status, JSON bytes) of its segments document, as GET answers it."""
    out = {}
    for host in hosts:
        status, doc = api.handle(service, "GET", f"/v1/hosts/{host}/segments")
        out[host] = (status, (json.dumps(doc, check_circular=False) + "\n").encode())
    return out


def serve(service, batch: list, date: str) -> list:
    """On the hub: each woken watch of ``batch`` answered as soon as its document is built,
    by a send that does not wait; per item, what is left to send (b"" when all went, None
    when the connection failed or the document could not be built)."""
    docs: dict = {}
    out = []
    for sock, _addr, _buffered, close, host in batch:
        doc = docs.get(host)
        if doc is None:
            try:
                doc = docs[host] = documents(service, [host])[host]
            except Exception:  # noqa: BLE001 - a bug (logged by ``api``): closed, agents retry
                out.append(None)
                continue
        data = response(doc[0], doc[1], close, date)
        try:
            sent = sock.send(data, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # the client went away
            out.append(None)
            continue
        out.append(data[sent:])
    return out


def serve_all(service, batch: list, date: str, pause) -> list:
    """On the hub: ``serve`` of ``batch`` in chunks of ``BATCH``, ``pause()`` between them so
    that the hub's other green threads (an operator's request) run meanwhile. Why one call,
    not one a chunk: between calls the hub sat idle while this thread took the answers and
    asked again, 21 ms of a k = 16 ring's 112 ms (eight calls; time stamps in the controller
    under ``benchmarks.agents``, issue 73)."""
    out: list = []
    for i in range(0, len(batch), BATCH):
        if i:
            pause()
        out += serve(service, batch[i:i + BATCH], date)
    return out


class WokenWatches:
    """``put`` (the front's ``serve_woken``) from the front, ``run`` in a native thread of its
    own until the REST server stops. ``rest``: the ``RestServer`` (its hub and front);
    ``closing(sock)``: how a connection answered last is closed (a lingering close)."""

    def __init__(self, rest, closing):
        self.rest, self.closing = rest, closing
        self.pending: deque = deque()  # what ``put`` gave and ``run`` has not taken
        # unpatched: the two threads are OS threads even under eventlet (``bridge.py``)
        self.ready = original("threading").Event()

    def put(self, items: list) -> None:
        """(socket, address, request bytes read, close, host) of woken watches."""
        self.pending.extend(items)
        self.ready.set()

    def run(self) -> None:
        while not self.rest._stop:
            if not self.pending:
                self.ready.wait(0.5)  # the stop flag twice a second
                self.ready.clear()
                continue
            batch = [self.pending.popleft() for _ in range(min(CALL, len(self.pending)))]
            try:
                left = self.rest.on_hub(serve_all, self.rest.service, batch,
                                        email.utils.formatdate(usegmt=True),
                                        lambda: self.rest.hub.sleep(0))
            except Exception:  # noqa: BLE001 - stopping, or a bug: closed, the agents retry
                left = [None] * len(batch)
            for (sock, addr, buffered, close, _host), rest in zip(batch, left):
                self.answer(sock, addr, buffered, close, rest)

    def answer(self, sock, addr, buffered: bytes, close: bool, left: bytes | None) -> None:
        """Send what the hub ``left`` of the answer (None: close), then close or give back."""
        if left is None:
            sock.close()
            return
        rest = buffered[buffered.find(b"\r\n\r\n") + 4:]
        try:
            if left:
                sock.settimeout(SEND_S)
                sock.sendall(left)
        except OSError:
            sock.close()
            return
        if close:
            self.closing(sock)
        else:
            self.rest.front.adopt(sock, addr, rest)
