"""REST writes among redundant controllers (``controller/service/cluster.py``): served by the
master, forwarded to it by a standby, and answered exactly when etcd fails during one.

The answers, whichever controller is asked:

* 503 while etcd is unreachable, no master is elected, or the master is still taking over:
  nothing was changed, retry;
* the service's own answer (201, 200, 409, ...) once the switches confirmed and etcd stored;
* 202 when the switches took the change but etcd died before storing it: the answer carries
  an ``operation`` that ``GET /v1/cluster`` (``operations``) follows, ``pending`` until it is
  ``stored`` (etcd back, this controller still the master) or ``dropped`` (the master's term
  ended first: the new master's intent holds and its takeover undoes the change at the
  switches). Never a 503 followed by a silent install;
* 504 when a standby forwarded the request and the master took it but did not answer: the
  change may or may not have been applied (``GET /v1/jobs`` tells, once a master serves).
"""
from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable

from controller.client import Client, ControllerUnreachable
from controller.errors import ServiceUnavailable
from controller.service.etcd import EtcdError

LOG = logging.getLogger("mlroute")
FORWARD_TIMEOUT = 120.0  # seconds a forwarded write may take (a large job, a slow switch)
FORWARDED = "X-Mlroute-Forwarded"
MAX_OPERATIONS = 100  # writes answered 202 that /v1/cluster lists (the newest)


class Writes:
    """The writing requests of one controller of a cluster, and its 202 operations."""

    def __init__(self, cluster):
        """``cluster``: this controller's ``controller.service.cluster.Cluster``."""
        self.cluster = cluster
        self.operations: OrderedDict[str, dict] = OrderedDict()
        self._number = 0
        self._lock = threading.Lock()

    def write(self, method: str, path: str, body: bytes, headers: dict,
              local: Callable[[], tuple[int, dict]]) -> tuple[int, dict]:
        """Serve a writing request: ``local()`` on the master, else forwarded to it. 503s are
        raised as ServiceUnavailable. A host's report (``/v1/hosts/...``: what its agent
        observed, thousands a second from every agent) takes the master as this controller's
        watch last saw it, and a standby does not read the state back after forwarding one:
        two etcd reads per report were what a standby cost (issue 73)."""
        c = self.cluster
        report = path.startswith("/v1/hosts/")
        seen = c.master if report else None
        if seen is not None:
            info, lease = dict(seen), seen.get("lease")
        else:
            try:
                kv = c.client.get(c.master_key)
            except EtcdError as e:
                raise ServiceUnavailable(f"{e}: writes are refused until it returns (the "
                                         "switches keep their tables; nothing is lost)") from None
            if kv is None:
                raise ServiceUnavailable("no master controller is elected (a failover is "
                                         "under way): retry in a second")
            info, lease = json.loads(kv.value), kv.lease
        if info.get("id") == c.id and lease == c.lease:
            if not c.serving:
                raise ServiceUnavailable(f"controller {c.id} is taking over as master: "
                                         "retry in a second")
            before = c.store.fence_failures
            status, doc = local()
            if status >= 400:
                return status, doc
            return self._confirmed(method, path, status, doc, before)
        if headers.get(FORWARDED):
            raise ServiceUnavailable(f"controller {c.id} got a request forwarded by "
                                     f"{headers[FORWARDED]} but {info.get('id')} is the master: "
                                     "retry")
        status, doc = self._forward(info, method, path, body, headers)
        if status < 400 and not report:
            c.refresh()  # read your own writes
        return status, doc

    def _confirmed(self, method: str, path: str, status: int, doc, fence_failures: int
                   ) -> tuple[int, dict]:
        """The answer to a write the switches took: as is once etcd stored it, else 202."""
        c = self.cluster
        store = c.store
        if store.fence_failures != fence_failures:
            raise ServiceUnavailable(f"controller {c.id} lost the master role during the "
                                     "request; the change was not stored and the new master's "
                                     "intent holds: retry")
        if store.too_large:
            raise ServiceUnavailable(f"the state document ({store.too_large} bytes "
                                     "compressed) is larger than etcd takes (run etcd with a "
                                     "larger --max-request-bytes); the change is installed "
                                     "but not stored")
        with store.lock:  # a flush cannot slip between this check and the record
            if store.unsaved is None:
                return status, doc
            with self._lock:
                self._number += 1
                op = {"id": f"{c.id}/{c.generation}/{self._number}", "state": "pending",
                      "method": method, "path": path, "status": status, "since": c.clock(),
                      "generation": c.generation, "see": f"{c.rest_url}/v1/cluster",
                      "reason": f"etcd at {c.client.url} became unreachable during the "
                                "request: the switches took the change; it is stored when "
                                "etcd returns (state \"stored\"), or dropped if this "
                                "controller stops being the master first (state \"dropped\")"}
                self.operations[op["id"]] = op
                while len(self.operations) > MAX_OPERATIONS:
                    self.operations.popitem(last=False)
                op = dict(op)
        LOG.warning("mlroute: %s %s answered 202: %s", method, path, op["reason"])
        answer = dict(doc) if isinstance(doc, dict) else {"result": doc}
        answer["operation"] = op
        return 202, answer

    def stored(self, revision: int) -> None:
        """etcd took a document: every write still pending is in it."""
        with self._lock:
            for op in self.operations.values():
                if op["state"] == "pending":
                    op.update(state="stored", revision=revision, at=self.cluster.clock())

    def dropped(self, reason: str) -> None:
        """The master's term ended before etcd took the pending writes."""
        with self._lock:
            for op in self.operations.values():
                if op["state"] == "pending":
                    op.update(state="dropped", at=self.cluster.clock(), reason=reason)

    def view(self) -> list[dict]:
        """The operations answered 202, newest first."""
        with self._lock:
            return [dict(op) for op in reversed(self.operations.values())]

    def _forward(self, master: dict, method: str, path: str, body: bytes,
                 headers: dict) -> tuple[int, dict]:
        out = {"Content-Type": "application/json", FORWARDED: self.cluster.id}
        if headers.get("Authorization"):
            out["Authorization"] = headers["Authorization"]
        where = f"the master {master.get('id')} at {master.get('rest')}"
        try:
            client = Client(master["rest"], timeout=FORWARD_TIMEOUT)
            status, answer = client.request(method, urllib.parse.quote(path, safe="/~"),
                                            body=body or None, headers=out)
        except ControllerUnreachable as e:
            if e.message.startswith("no answer"):  # sent: it may have been applied
                return 504, {"error": f"{where} took the request but did not answer "
                                      f"({e.message}); whether the change was applied shows in "
                                      "GET /v1/jobs once a master serves again"}
            raise ServiceUnavailable(f"{where} did not answer ({e.message}); nothing was sent; "
                                     "a standby takes over within seconds: retry") from None
        except (KeyError, ValueError) as e:
            raise ServiceUnavailable(f"{where}: no usable address ({e})") from None
        return status, answer if isinstance(answer, dict) else {"result": answer}
