"""The agent's side of the kernel: one ``ip -batch`` per change, and what the agent owns read
back (``ip -j``), so that a restarted agent reconciles instead of installing twice."""
from __future__ import annotations

import json
import subprocess

from controller.agent import steering
from controller.errors import InputError


def ip_batch(lines: list[str]) -> None:
    """Run ``lines`` through one ``ip -batch -`` (one process per change, not per rule)."""
    if not lines:
        return
    p = subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                       capture_output=True, timeout=30)
    if p.returncode:
        raise InputError(f"ip -batch refused: {p.stderr.strip() or p.stdout.strip()}")


def read_installed() -> dict:
    """The rules and encapsulation routes this agent owns, read back from the kernel."""
    rules = json.loads(subprocess.run(["ip", "-j", "-4", "rule", "show"], capture_output=True,
                                      text=True, timeout=10, check=True).stdout or "[]")
    out = {}
    for r in rules:
        pref, table = r.get("priority"), r.get("table")
        try:
            table = int(table)
        except (TypeError, ValueError):
            continue
        if not steering.owned(pref=pref) or not steering.owned(table=table):
            continue
        routes = json.loads(subprocess.run(["ip", "-j", "-d", "-4", "route", "show", "table",
                                            str(table)], capture_output=True, text=True,
                                           timeout=10).stdout or "[]")
        if not routes:
            continue
        rt = routes[0]  # iproute2 6.1: "encap": "seg6", then "mode" and "segs" beside it
        dst = r.get("dst")
        match = (None, dst, _proto(r.get("ipproto")), _port(r.get("sport")),
                 _port(r.get("dport")))
        route = steering.route_text(dst, rt.get("mode", "?"), rt.get("segs", []),
                                    rt.get("dev", "?"))
        out[match] = steering.Installed(table, pref, route, steering.rule_text(match, table, pref))
    return out


def _proto(name) -> int:
    return {"tcp": 6, "udp": 17}.get(name, name if isinstance(name, int) else 0)


def _port(value) -> int:
    if isinstance(value, dict):
        value = value.get("start", 0)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
