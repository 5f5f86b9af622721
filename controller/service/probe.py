"""The failover probe of a standby controller: an idle TCP connection to the master's REST
port. When the master process dies the kernel closes it, and if the port then refuses
connections (nothing listens: the process is gone) the standby ends the master's lease at once
instead of waiting for it to expire (2 s at the least). A timeout or an unreachable host proves
nothing: a master that is alive but cut off is left to its lease.
"""
from __future__ import annotations

import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable

from controller.service.etcd import EtcdError

LOG = logging.getLogger("mlroute")


def rest_address(url: str) -> tuple[str, int]:
    """(host, port) of a REST URL.

    >>> rest_address("http://10.0.0.5:8080"), rest_address("http://ctl")
    (('10.0.0.5', 8080), ('ctl', 80))
    """
    p = urllib.parse.urlsplit(url)
    return p.hostname or "127.0.0.1", p.port or 80


def process_gone(url: str, timeout: float = 0.5) -> bool:
    """True if nothing listens at ``url``'s address (the connection is refused): the process
    that advertised it is gone. A timeout or an unreachable host proves nothing (False)."""
    try:
        socket.create_connection(rest_address(url), timeout=timeout).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def probe_loop(target: Callable[[], dict | None], stop: threading.Event,
               changed: threading.Event, gone: Callable[[dict], None]) -> None:
    """Until ``stop``: hold a connection to ``target()``'s ``rest`` (the master to watch, None
    while there is none: this controller is the master, or the probe is off); ``changed`` is
    set when the master changes. ``gone(master)`` when its process is gone."""
    while not stop.is_set():
        changed.clear()
        m = target()
        if m is None:
            changed.wait(1.0)
            continue
        try:
            sock = socket.create_connection(rest_address(m["rest"]), timeout=1.0)
        except ConnectionRefusedError:
            gone(m)
            continue
        except OSError:
            stop.wait(0.5)  # cannot tell: the lease decides
            continue
        try:
            sock.settimeout(0.5)
            while not stop.is_set() and not changed.is_set():
                try:
                    if sock.recv(1) == b"":
                        break  # closed by the other end
                except TimeoutError:
                    continue
                except OSError:
                    break
        finally:
            sock.close()
        if not changed.is_set() and process_gone(m["rest"], timeout=1.0):
            gone(m)


def watch_master(cluster) -> None:
    """The failover probe of a ``Cluster`` (``cluster.py``), until it stops."""
    probe_loop(lambda: _target(cluster), cluster._stop, cluster._master_changed,
               lambda m: _master_gone(cluster, m))


def _target(cluster) -> dict | None:
    """The master the failover probe watches: None unless ``cluster`` is a standby with
    the probe on and another master with a REST address."""
    with cluster._lock:
        m = dict(cluster.master) if cluster.master else None
        standby = cluster.role != "master"
    if not cluster.probe or not standby or m is None or m["id"] == cluster.id or not m["rest"]:
        return None
    return m


def _master_gone(cluster, m: dict) -> None:
    """The probed master's process is gone: end its lease and campaign."""
    t = cluster.clock()
    with cluster._lock:
        if not cluster.master or cluster.master["lease"] != m["lease"]:
            return
        cluster.takeover = {"master_lost": t, "previous": m["id"], "detected_by": "probe",
                            "lease": m["lease"]}
    LOG.warning("mlroute: master %s at %s is gone; ending its lease", m["id"], m["rest"])
    try:
        cluster.client.revoke(m["lease"])
        cluster._campaign()
    except EtcdError as e:
        LOG.error("mlroute: %s", e)
        cluster._stop.wait(0.2)
