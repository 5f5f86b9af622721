"""The agent's side of the kernel: one ``ip -batch`` per change, and what the agent owns read
back (``ip -j``), so that a restarted agent reconciles instead of installing twice.

Why every table in the agent's range is read, with a rule or not: a batch that failed half
way, or an agent killed between its routes and its rules, leaves tables no rule points to;
they are the agent's all the same, and ``remove_all`` and a rollback must find them. What the
kernel holds without its pair comes back with None for the missing half
(``steering.Installed``), so that ``steering.batch`` removes it.
"""
from __future__ import annotations

import ipaddress
import json
import subprocess

from controller.agent import steering
from controller.errors import InputError


def ip_batch(lines: list[str]) -> None:
    """Run ``lines`` through one ``ip -batch -`` (one process per change, not per rule); every
    line must have one of the forms the agent makes (``steering.LINE``): a last guard."""
    if not lines:
        return
    for line in lines:
        if not steering.LINE.fullmatch(line):
            raise InputError(f"not an agent's ip line, nothing run: {line[:120]!r}")
    p = subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                       capture_output=True, timeout=30)
    if p.returncode:
        raise InputError(f"ip -batch refused: {p.stderr.strip() or p.stdout.strip()}")


def ip_json(args: list[str]):
    """``ip -j ARGS``' answer; InputError when ``ip`` fails or says no JSON."""
    try:
        p = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        raise InputError(f"ip -j {' '.join(args)}: {e}") from None
    if p.returncode:
        raise InputError(f"ip -j {' '.join(args)}: {p.stderr.strip()}")
    try:
        return json.loads(p.stdout or "[]")
    except ValueError:
        raise InputError(f"ip -j {' '.join(args)}: not JSON") from None


def read_installed(show=ip_json) -> dict:
    """The rules and encapsulation routes this agent owns, read back from the kernel: match ->
    ``steering.Installed``; a rule without its route (or with one the agent would not make)
    under ``("rule", pref)``, a route no rule points to under ``("table", table, dst)``.
    ``show``: ``ip_json`` (a test's fake kernel)."""
    tables: dict[int, list[dict]] = {}
    for rt in show(["-d", "-4", "route", "show", "table", "all"]):
        table = _int(rt.get("table"))
        if steering.owned(table=table) and _prefix(rt.get("dst")):
            tables.setdefault(table, []).append(rt)
    out: dict = {}
    for r in show(["-4", "rule", "show"]):
        pref = r.get("priority")
        if not steering.owned(pref=pref):
            continue
        table, match = _int(r.get("table")), _match(r)
        routes = tables.get(table, []) if steering.owned(table=table) else []
        rt = next((x for x in routes if match and _prefix(x["dst"]) == f"{match[0]}/32"), None)
        route = _route(match[0], rt) if rt is not None else None
        if route is None or match in out:
            out[("rule", pref)] = steering.Installed(None, pref, None, None)
            continue
        routes.remove(rt)
        out[match] = steering.Installed(table, pref, route, steering.rule_text(match, table, pref),
                                        f"{match[0]}/32")
    for table, routes in tables.items():
        for rt in routes:
            dst = _prefix(rt["dst"])
            out[("table", table, dst)] = steering.Installed(table, None, None, None, dst)
    return out


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _prefix(dst) -> str | None:
    """An IPv4 route destination as ``route del`` names it ("10.0.1.1/32"), None if not one."""
    try:
        return str(ipaddress.IPv4Network("0.0.0.0/0" if dst == "default" else dst))
    except (TypeError, ValueError):
        return None


def _match(rule: dict) -> tuple | None:
    """(destination, protocol, sport, dport) of a rule the agent would make, else None."""
    try:
        dst = ipaddress.IPv4Address(rule.get("dst"))
    except (TypeError, ValueError):
        return None
    if rule.get("dstlen", 32) != 32:
        return None
    proto = {"tcp": 6, "udp": 17, 6: 6, 17: 17}.get(rule.get("ipproto"))
    ports = [_port(rule.get(k)) for k in ("sport", "dport")]
    if proto is None or None in ports:
        return None
    return (dst, proto, *ports)


def _port(value) -> int | None:
    if isinstance(value, dict):  # a range: the agent makes single ports
        value = value.get("start") if value.get("start") == value.get("end") else None
    value = 0 if value is None else _int(value)
    return value if value is not None and 0 <= value <= 65535 else None


def _route(dst, rt: dict) -> str | None:
    """The route's text as ``steering.route_text`` makes it (iproute2 6.1: "encap": "seg6",
    then "mode" and "segs" beside it; "metrics": [{"rto_min": 35}]), None if the agent would
    not make it: it is then replaced."""
    try:
        sids = [ipaddress.IPv6Address(s) for s in rt.get("segs") or ()]
        dev = steering.check_dev(rt.get("dev"))
    except (TypeError, ValueError):
        return None
    metrics = {k: v for m in rt.get("metrics") or () if isinstance(m, dict) for k, v in m.items()}
    if rt.get("encap") != "seg6" or rt.get("mode") not in ("encap", "encap.red") or not sids \
            or metrics.get("rto_min") != steering.RTO_MIN_MS:
        return None
    return steering.route_text(dst, rt["mode"], sids, dev)
