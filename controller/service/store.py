"""Where the intent document (``controller/service/state.py``'s ``to_doc``: fabric, jobs, their
routes) is kept: one sqlite row for a single controller, one etcd key for redundant ones. Both
have ``save`` and ``load``, so the service uses either.

Each save replaces the whole document at once (one sqlite transaction, one etcd transaction),
so a crash leaves either the old or the new state, never half of each.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
import zlib
from collections.abc import Callable

from controller.service.etcd import Etcd, EtcdError, EtcdUnavailable, compare_create, op_put

LOG = logging.getLogger("mlroute")
MAX_DOC = 1_400_000  # bytes; etcd refuses requests over 1.5 MiB unless --max-request-bytes


class StateStore:
    """sqlite (Python's standard library), for a single controller (--mlroute-state)."""

    def __init__(self, path: str):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS state "
                        "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def save(self, doc: dict) -> None:
        text = json.dumps(doc)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('state', ?)",
                            (text,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def load(self) -> dict | None:
        row = self.db.execute("SELECT value FROM state WHERE key = 'state'").fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        self.db.close()


# ---- the intent document in etcd -----------------------------------------------------------
def encode(doc: dict) -> bytes:
    """The state document as stored: compact JSON, zlib-compressed (routes repeat host names
    and spine ids, so documents shrink about tenfold).

    >>> decode(encode({"version": 2, "jobs": []}))
    {'version': 2, 'jobs': []}
    """
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)


def decode(data: bytes) -> dict | None:
    """A stored document; plain JSON is read too (a document put by hand with etcdctl).

    >>> decode(b'{"jobs": []}'), decode(b"")
    ({'jobs': []}, None)
    """
    if not data:
        return None
    if data[:1] == b"{":
        return json.loads(data)
    return json.loads(zlib.decompress(data))


class EtcdStore:
    """The intent under ``<prefix>state`` in etcd. With ``fence`` (redundant controllers) a
    save is a transaction that succeeds only while the master key still has the generation
    ``fence()`` returns (None: not the master, nothing is stored).

    ``save`` never raises: the service calls it after the switches took a change, so a document
    that etcd could not take is kept (``unsaved``) until ``flush`` stores it (etcd back) or
    ``discard`` drops it (this controller stepped down: the new master's intent holds).
    ``on_stored(revision)`` follows every document etcd took; ``on_fenced()`` a save refused
    because another controller is master now."""

    def __init__(self, client: Etcd, prefix: str = "/mlroute/",
                 fence: Callable[[], tuple[bytes, int] | None] | None = None,
                 on_stored: Callable[[int], None] = lambda revision: None,
                 on_fenced: Callable[[], None] = lambda: None):
        self.client = client
        self.key = (prefix + "state").encode()
        self.fence = fence
        self.on_stored, self.on_fenced = on_stored, on_fenced
        self.unsaved: bytes | None = None  # encoded document not stored yet
        self.too_large = 0  # size of the last document etcd could not take
        self.fence_failures = 0  # saves refused because this controller is no longer master
        self.revision = 0  # of the last save or load
        self.lock = threading.RLock()  # on_fenced may step down, which discards

    def load(self) -> dict | None:
        kv = self.client.get(self.key)
        if kv is None:
            return None
        self.revision = kv.mod_revision
        return decode(kv.value)

    def save(self, doc: dict) -> None:
        data = encode(doc)
        if len(data) > MAX_DOC:
            self.too_large = len(data)
            LOG.error("mlroute: the state document (%d bytes compressed) is larger than etcd "
                      "takes (1.5 MiB unless etcd runs with --max-request-bytes)", len(data))
            return
        self.too_large = 0
        with self.lock:
            self._store(data)

    def flush(self) -> bool:
        """Store a document kept while etcd was unreachable; True if nothing is left."""
        with self.lock:
            return self.unsaved is None or self._store(self.unsaved)

    def discard(self) -> bool:
        """Drop the document not stored yet; True if there was one."""
        with self.lock:
            dropped, self.unsaved = self.unsaved is not None, None
            return dropped

    def _store(self, data: bytes) -> bool:
        """Store ``data`` (fenced); kept in ``unsaved`` if etcd cannot take it now. ``unsaved``
        is cleared once etcd took the document (or it was dropped: not the master), never
        before: a reader that sees it empty finds the document in etcd."""
        try:
            if self.fence is None:
                self.revision = self.client.put(self.key, data)
            else:
                fence = self.fence()
                if fence is None:
                    LOG.error("mlroute: not storing the state: this controller is not the "
                              "master")
                    self.fence_failures += 1
                    self.unsaved = None
                    return True
                r = self.client.txn([compare_create(fence[0], fence[1])],
                                    [op_put(self.key, data)])
                if not r.succeeded:
                    self.fence_failures += 1
                    LOG.error("mlroute: the state was not stored: this controller lost the "
                              "master role (generation %d)", fence[1])
                    self.unsaved = None
                    self.on_fenced()
                    return True
                self.revision = r.revision
        except EtcdUnavailable as e:
            LOG.warning("mlroute: %s; the state is stored when etcd returns", e)
            self.unsaved = data
            return False
        except EtcdError as e:
            LOG.error("mlroute: storing the state failed: %s", e)
            self.unsaved = data
            return False
        self.unsaved = None
        self.on_stored(self.revision)
        return True
