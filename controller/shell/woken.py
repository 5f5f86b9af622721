"""Woken watches answered in batches (the native REST front's, ``front.py``): the documents
of a batch's hosts built in one call on the hub, then sent from a thread of their own; a
connection kept alive goes back to the front.

Why batches: a ring of 512 woke 512 watches at once, and handing each to a thread of its
own made 512 calls on the hub, each costing more than its document.
"""
from __future__ import annotations

import email.utils
import json
from collections import deque

from controller.service import api
from controller.shell.bridge import original
from controller.shell.front import response

BATCH = 64  # woken watches whose documents one call on the hub builds
SEND_S = 5.0  # an answer to a woken watch must be taken within this long


def documents(service, hosts: list[str]) -> dict:
    """Host -> (status, JSON bytes) of its segments document, as GET answers it."""
    out = {}
    for host in hosts:
        status, doc = api.handle(service, "GET", f"/v1/hosts/{host}/segments")
        out[host] = (status, (json.dumps(doc) + "\n").encode())
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
            batch = [self.pending.popleft() for _ in range(min(BATCH, len(self.pending)))]
            hosts = list(dict.fromkeys(item[4] for item in batch))
            try:
                docs = self.rest.on_hub(documents, self.rest.service, hosts)
            except Exception:  # noqa: BLE001 - stopping, or a bug: closed, the agents retry
                docs = {}
            date = email.utils.formatdate(usegmt=True)
            for sock, addr, buffered, close, host in batch:
                self.answer(sock, addr, buffered, close, docs.get(host), date)

    def answer(self, sock, addr, buffered: bytes, close: bool, doc, date: str) -> None:
        if doc is None:
            sock.close()
            return
        rest = buffered[buffered.find(b"\r\n\r\n") + 4:]
        try:
            sock.settimeout(SEND_S)
            sock.sendall(response(doc[0], doc[1], close, date))
        except OSError:
            sock.close()
            return
        if close:
            self.closing(sock)
        else:
            self.rest.front.adopt(sock, addr, rest)
