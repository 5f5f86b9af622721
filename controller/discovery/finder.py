"""The controller's side of discovery: feeds ``discovery.Topology`` from switch events and
packet-ins through the topology guard (``guard.py``: signed probes, verified address moves),
says which frames to send, and what fabric the topology shows (zero configuration) or how it
differs from the declared one.

Connect at once: a switch that connects is probed at once out of its ports, a probe seen in
one direction is answered by a probe back, and the switch graph is adopted as soon as it is
consistent (every probe seen both ways, every leaf cabled to every spine, every spine port
cabled, no switch connected in the last ``SWITCH_QUIET_S``), not after a quiet period; hosts are
added as they are heard (an ARP or IPv4 packet-in), one at a time, and ARP requests for an
address not known yet are answered as soon as the address is found. Anything else (odd
wiring) is adopted after ``QUIET_S`` without change, as before.

A switch of a fabric in use whose tables are still to be read is probed once they are
(``switch_up(hold=True)``, ``release``): when a whole fabric (re)connects, its probes, the
packet-ins they bring and the neighbours' answers competed with the table reads for both
CPUs, the controller's and Open vSwitch's (k = 16: 5,120 probes and 2,048 answers in a
restart's two seconds, issue 74); a round probes only the switches not held (a whole
fabric restarting sends almost nothing), and the declared fabric is not checked against links
that were not probed yet. A probe is answered only when
the port it came in on was not itself probed since its sender connected (that probe is the
answer, already under way).

Pure: time is passed in; frames are returned as (dpid, port, frame) for the shell to send:
``lldp_probes`` each round, ``arp_probes`` to find an address, ``take_frames`` for the rest
(probes at connect, answers to one-way probes, ARP probes checking an address's owner, ARP
answers); ``take_events`` returns the guard's alarm events.
"""
from __future__ import annotations

from controller.discovery import lldp
from controller.discovery.declared import check_declared
from controller.discovery.guard import PROBE_MAC, Guard
from controller.discovery.liveness import Liveness
from controller.discovery.lldp import ECHO_BACK_MAC, ECHO_MAC, LLDP_BUDGET
from controller.discovery.planes import discover
from controller.discovery.topology import (
    DEFAULT_LINK_TIMEOUT,
    Topology,
    format_problem,
    probe_ports,
)
from controller.model.clos import Clos, as_clos

__all__ = ["FabricFinder", "PROBE_MAC", "QUIET_S", "SWITCH_QUIET_S"]

QUIET_S = 2.0  # odd wiring: recognise once the topology did not change for this long
SWITCH_QUIET_S = 0.5  # adopt a consistent graph once no switch connected for this long
ASKED_S = 3.0  # an ARP request for an unknown address is answered if it is found this soon
PROBE_HOLD_S = 5.0  # held connect probes go out after this long at most (``release``)
DEFAULT_GBPS = 100.0
# problems that do not make the switch graph inconsistent
_HOST_PROBLEMS = {"shared_port", "duplicate_ip", "unknown_host", "host_missing_plane",
                  "chassis_conflict"}
MISSING_PROBE_S = 1.0  # a host's address on a plane it was not heard on: probed this often
MISSING_FRAMES = 4096  # ARP probes for such addresses per settle at most (in turns)
LOST_ROUNDS = 3.5  # a link is gone once this many whole cycles of probes missed it
LATE_ROUNDS = 2.0  # a round this many periods after the last: the controller was busy


class FabricFinder:
    def __init__(self, declared: Clos | None = None, link_gbps: float | None = None,
                 recognised: Clos | None = None, secret: bytes | None = None):
        """Fabrics are held as the service serves them, ``Clos`` (a two-tier
        ``model.fabric.Fabric`` given here is taken as its ``as_clos``), and discovery
        returns a ``Clos`` for every fabric it recognises."""
        self.topology = Topology()
        self.declared = as_clos(declared)  # a declared fabric is checked, not replaced
        self.link_gbps = link_gbps  # --mlroute-link-gbps: wins over what switches report
        self.recognised = as_clos(recognised) if declared is None else None
        self.problems: list[dict] = []
        self.guard = Guard(secret, self._name)
        self.liveness = Liveness(self.guard)  # echoes through the switches' data planes
        self.speeds: dict[tuple[int, int], int] = {}  # (dpid, port) -> kbps reported
        self.sent = {"lldp_round": 0, "lldp_connect": 0, "lldp_answer": 0, "arp_locate": 0,
                     "arp_verify": 0, "arp_answer": 0}
        self.sent_bytes = 0
        self.probes_received = 0
        self._checked = -1  # topology version of the last recognition
        self._scan_all = True  # the next relayed-probe check looks at every link (``settle``)
        self._cache: tuple = (None, None, [])  # (key, fabric, problems) of recognise
        self._switch_at = -1e9  # when a switch last connected
        self._frames: list[tuple[int, int, bytes]] = []
        self._asked: dict[str, list[tuple[int, int, str, str, float]]] = {}
        self._owners: tuple = (None, {})  # (fabric, {ip: (mac, (dpid, port))})
        self._missing_at: dict[str, float] = {}  # address of a missing interface -> probed
        self.last_cause = ""  # what the last fabric ``settle`` returned changed
        self._per_round, self._interval, self._next = 0, 0.0, 0  # ``pace``: 0 every port
        self._held: dict[int, float] = {}  # dpid -> since when its connect probes are held
        self._up_at: dict[int, float] = {}  # dpid -> when it last connected
        self._probed_at: dict[tuple[int, int], float] = {}  # (dpid, port) -> its last probe
        self._last_round: float | None = None
        self._stalls: list[tuple[float, float]] = []  # (round, seconds no probe went out)

    def pace(self, interval: float, budget: int = LLDP_BUDGET) -> None:
        """Probe rounds every ``interval`` seconds of at most ``budget`` probes a second
        (0: every port each round). On a fabric with more ports a round probes the next ones
        in turn, and a link expires once ``LOST_ROUNDS`` whole cycles missed it: at k = 16
        4,096 probes a second took half a core and delayed failures' re-plans."""
        self._per_round = max(1, int(budget * interval)) if budget and interval > 0 else 0
        self._interval = interval

    # ---- what the service sets --------------------------------------------------------
    def declare(self, fabric: Clos) -> None:
        """A fabric was declared (PUT /v1/fabric): checked from now on, never replaced."""
        self.declared, self.recognised, self._checked = as_clos(fabric), None, -1
        self._scan_all = True  # its leaves: every link is looked at again for relays

    def recognise(self, fabric: Clos | None) -> None:
        """The fabric in use (a stored or followed intent) when none is declared."""
        if self.declared is None:
            self.recognised, self._checked = as_clos(fabric), -1

    def restart_quiet_period(self, now: float) -> None:
        """Check the fabric again only after probes had time to show it (a new master saw no
        packet-in as a standby)."""
        self.topology.changed_at = now
        self._switch_at = now
        self._checked = -1

    # ---- events -----------------------------------------------------------------------
    def switch_up(self, dpid: int, ports: dict, now: float, speeds: dict | None = None,
                  hold: bool = False) -> None:
        """A switch connected (or re-sent its ports); ``speeds``: port -> current speed in
        kbps (OpenFlow 1.3 port description ``curr_speed``; 0 or absent: not reported). Its
        ports are probed at once, or with ``hold`` once ``release`` is called (its tables
        read first)."""
        known = dpid in self.topology.switches
        self.topology.switch_up(dpid, ports, now)
        self.liveness.reset(dpid, now)
        for port, up in ports.items():
            if not up:
                self.guard.port_reset(dpid, int(port))
        self.speeds = {k: v for k, v in self.speeds.items() if k[0] != dpid}
        for port, kbps in (speeds or {}).items():
            if isinstance(kbps, int) and kbps > 0:
                self.speeds[(dpid, int(port))] = kbps
        if not known:
            self._switch_at = now
            self._up_at[dpid] = now
        if hold:
            self._held.setdefault(dpid, now)
        else:
            self._probe_ports(dpid, now)

    def _probe_ports(self, dpid: int, now: float) -> None:
        for port, up in sorted(self.topology.switches[dpid].items()):
            if up and (dpid, port) not in self.guard.host_ports:
                self._probe(dpid, port, now, "lldp_connect")

    @property
    def holding(self) -> bool:
        """Whether some switch's connect probes are held (``switch_up(hold=True)``)."""
        return bool(self._held)

    def release(self, now: float, at_most: float | None = None) -> int:
        """Probe the held switches still connected out of their ports now (those held for
        ``at_most`` seconds, else all of them); returns how many."""
        due = sorted(d for d, t in self._held.items() if at_most is None or now - t >= at_most)
        for dpid in due:
            del self._held[dpid]
            if dpid in self.topology.switches:
                self._probe_ports(dpid, now)
        return len(due)

    def switch_down(self, dpid: int, now: float) -> None:
        self._held.pop(dpid, None)
        self.topology.switch_down(dpid, now)
        self.guard.switch_reset(dpid)
        self.speeds = {k: v for k, v in self.speeds.items() if k[0] != dpid}

    def port_changed(self, dpid: int, port: int, up: bool, now: float,
                     speed: int | None = None) -> None:
        changed = self.topology.port_changed(dpid, port, up, now)
        if not up:
            self.guard.port_reset(dpid, port)
        elif changed and dpid in self.topology.switches and dpid not in self._held:
            self._probe(dpid, port, now, "lldp_connect")
        if isinstance(speed, int) and speed > 0:
            self.speeds[(dpid, port)] = speed

    def packet_in(self, dpid: int, port: int, frame: bytes, now: float) -> str | None:
        """An LLDP probe or a host packet; returns 'lldp' (a probe accepted), 'alarm' (a probe
        refused), 'host' (a host packet) or None."""
        self._verify_due(now)
        probe = lldp.parse_probe(frame)
        if probe is not None:
            if dpid not in self.topology.switches:
                return None
            if not self.guard.check_probe(probe, dpid, port, now):
                return "alarm"
            if probe["dst"] == ECHO_BACK_MAC:  # an echo back at its sender (``liveness``)
                self.liveness.answered_echo(probe)
                return "lldp"
            if probe["dst"] != ECHO_MAC or not self.liveness.answered_echo(probe):
                self.liveness.seen(probe["dpid"], dpid, probe["time"])  # (an echo: trapped)
            self.probes_received += 1
            self.topology.link_seen(probe["dpid"], probe["port"], dpid, port, now)
            if ((dpid, port) not in self.topology.links and dpid in self.topology.switches
                    and dpid not in self._held and not self._crossing(dpid, port, probe["dpid"])):
                # seen one way only: the way back is probed at once, not at the next round
                self._probe(dpid, port, now, "lldp_answer")
            return "lldp"
        agent = lldp.parse_host_lldp(frame)
        if agent is not None:
            if dpid in self.topology.switches and (dpid, port) not in self.topology.facing():
                self.topology.host_chassis(dpid, port, agent[0], agent[1], now)
                return "host"
            return None
        host = lldp.parse_host(frame)
        if host is None or host[0] == PROBE_MAC:
            return None
        self._host(dpid, port, host[0], host[1], now)
        arp = lldp.parse_arp(frame)
        if arp is not None and arp[0] == 1 and self.declared is None:
            self._ask(dpid, port, arp[1], arp[2], arp[3], now)
        return "host"

    def _host(self, dpid: int, port: int, mac: str, ip: str, now: float) -> None:
        t = self.topology
        if dpid not in t.switches or (dpid, port) in t.facing():
            return
        mac = mac.lower()
        verdict = self.guard.host_frame(self._owner(ip), mac, (dpid, port), ip, now,
                                        self._alive, declared=self.declared is not None)
        if verdict == "move":
            self._take_over(ip, mac, now)
        if verdict != "refuse":
            t.host_seen(dpid, port, mac, ip, now)
        for d, p, frame in self.guard.take_frames():
            self._send(d, p, frame, "arp_verify")

    def _take_over(self, ip: str, mac: str, now: float) -> None:
        """``mac`` gets ``ip``: the old owner's record goes (unless it is the same host)."""
        self.topology.forget_hosts(lambda m, h: h.ip == ip and m != mac, now)

    def _verify_due(self, now: float) -> None:
        for c in self.guard.due(now, self._alive):
            self._take_over(c.ip, c.mac, now)
            self.topology.host_seen(c.at[0], c.at[1], c.mac, c.ip, now)
        for d, p, frame in self.guard.take_frames():
            self._send(d, p, frame, "arp_verify")

    def _ask(self, dpid, port, mac, ip, target, now) -> None:
        """A host asked for ``target``: if discovery does not know it yet, the answer is sent
        when it is found (the host need not wait for its ARP retry)."""
        if ip == target or self._owner_in(self.recognised, target) is not None:
            return
        asks = self._asked.setdefault(target, [])
        asks[:] = [a for a in asks if now - a[4] < ASKED_S and a[:4] != (dpid, port, mac, ip)]
        asks.append((dpid, port, mac, ip, now))
        if len(self._asked) > 4096:
            self._asked = {k: v for k, v in self._asked.items() if now - v[-1][4] < ASKED_S}

    def _answer_asked(self, fabric: Clos, now: float) -> None:
        for target in list(self._asked):
            owner = self._owner_in(fabric, target)
            if owner is None:
                continue
            for dpid, port, mac, ip, t in self._asked.pop(target):
                if now - t < ASKED_S and mac != owner[0]:
                    self._send(dpid, port, lldp.arp_reply(owner[0], target, mac, ip),
                               "arp_answer")

    # ---- frames -----------------------------------------------------------------------
    def _crossing(self, dpid: int, port: int, sender: int) -> bool:
        """Whether a probe out of ``dpid``'s ``port`` went after ``sender`` (at its other
        end) connected: it is on its way there, and an answer would repeat it."""
        return self._probed_at.get((dpid, port), -1.0) > self._up_at.get(sender, float("inf"))

    def _probe(self, dpid: int, port: int, now: float, kind: str) -> None:
        self._probed_at[(dpid, port)] = now
        self._send(dpid, port, self.guard.probe(dpid, port, now), kind)

    def _send(self, dpid: int, port: int, frame: bytes, kind: str) -> None:
        self._frames.append((dpid, port, frame))
        self.sent[kind] += 1
        self.sent_bytes += len(frame)

    def take_frames(self) -> list[tuple[int, int, bytes]]:
        """Frames to send now (probes at connect, answers, ARP probes and answers)."""
        out, self._frames = self._frames, []
        return out

    def take_events(self) -> list[dict]:
        """Alarm events since the last call: ``{"time", "kind", "switch", "port", "address",
        "message", ...}`` (guard.py)."""
        return self.guard.take_events()

    def lldp_probes(self, now: float) -> list[tuple[int, int, bytes]]:
        """One signed LLDP probe out of every up port of every switch that carries no host
        traffic (each second); links not seen again within the topology's timeout expire.
        Time the rounds were late (a controller busy for seconds: a large install, a GC) is
        not counted against a link: no probe could have seen it (``_stalled``)."""
        self._stalled(now)
        self.topology.expire(now, self._paused)
        self.guard.forget_old(now)
        self._verify_due(now)
        self.release(now, PROBE_HOLD_S)  # (``take_frames`` sends them)
        # held switches are probed at every port when released; the others go on, or their
        # links would expire (``DEFAULT_LINK_TIMEOUT`` is shorter than a hold can be)
        due = [(d, p) for d, ports in sorted(self.topology.switches.items()) if d not in self._held
               for p, up in sorted(ports.items()) if up and (d, p) not in self.guard.host_ports]
        rounds = 1
        if self._per_round and len(due) > self._per_round:  # the next ones, in turn
            rounds = -(-len(due) // self._per_round)
            start = self._next % len(due)
            due = (due[start:] + due[:start])[:self._per_round]
            self._next = start + self._per_round
        if self._interval:
            self.topology.link_timeout = max(DEFAULT_LINK_TIMEOUT,
                                              LOST_ROUNDS * rounds * self._interval)
        out = [(d, p, self.guard.probe(d, p, now)) for d, p in due]
        self._probed_at.update(((d, p), now) for d, p in due)
        self.sent["lldp_round"] += len(out)
        self.sent_bytes += sum(len(f) for _d, _p, f in out)
        return out

    def _stalled(self, now: float) -> None:
        """Note this round's lateness beyond one period, and forget stalls no link can
        still be waiting on."""
        period = self._interval or 1.0
        if self._last_round is not None and now - self._last_round > LATE_ROUNDS * period:
            self._stalls.append((now, now - self._last_round - period))
        self._last_round = now
        horizon = self.topology.link_timeout + sum(s for _at, s in self._stalls)
        self._stalls = [(at, s) for at, s in self._stalls if now - at <= horizon]

    def _paused(self, seen: float) -> float:
        """Seconds of stalls since ``seen``."""
        return sum(s for at, s in self._stalls if at > seen)

    def arp_probes(self, ip: str) -> list[tuple[int, int, bytes]]:
        """ARP requests for ``ip`` out of every host-facing leaf port."""
        frame = lldp.arp_request(PROBE_MAC, ip)
        fabric = self.recognised or self._recognised()[0]  # three tiers too
        out = [(d, p, frame) for d, p in probe_ports(self.topology, fabric)]
        self.sent["arp_locate"] += len(out)
        self.sent_bytes += len(frame) * len(out)
        return out

    def _probe_missing(self, problems: list[dict], now: float) -> None:
        """ARP requests for the addresses a host was not heard with on other planes
        (``host_missing_plane``), out of every host-facing port, each at most once per
        ``MISSING_PROBE_S`` and at most ``MISSING_FRAMES`` frames a call, the longest unasked
        first: an interface that has not spoken yet answers."""
        wanted = [ip for p in problems if p["kind"] == "host_missing_plane"
                  for ip in p.get("probe", [])]
        due = [ip for ip in wanted if now - self._missing_at.get(ip, -1e9) >= MISSING_PROBE_S]
        if not due:
            return
        self._missing_at = {ip: t for ip, t in self._missing_at.items() if ip in wanted}
        facing = self.topology.facing()
        ports = sorted((d, p) for d, ps in self.topology.switches.items()
                       for p, up in ps.items() if up and (d, p) not in facing)
        turn = max(1, MISSING_FRAMES // max(1, len(ports)))
        for ip in sorted(due, key=lambda ip: self._missing_at.get(ip, -1e9))[:turn]:
            self._missing_at[ip] = now
            frame = lldp.arp_request(PROBE_MAC, ip)
            for d, p in ports:
                self._send(d, p, frame, "arp_locate")

    def mac_of(self, ip: str) -> str | None:
        got = self.topology.host_by_ip(ip)
        return got[0] if got else None

    # ---- addresses ----------------------------------------------------------------------
    def _alive(self, at) -> bool:
        return self.topology.switches.get(at[0], {}).get(at[1]) is True

    def _owner_in(self, fabric: Clos | None, ip: str):
        if fabric is None or not fabric.wired:
            return None
        if self._owners[0] is not fabric:
            self._owners = (fabric, {ip: (mac.lower(), (fabric.dpids[leaf], fabric.ports[leaf][h]))
                                     for h, _, ip, mac, leaf in fabric.interfaces() if ip})
        return self._owners[1].get(ip)

    def _owner(self, ip: str):
        """(MAC, (dpid, port)) of the address's owner: the declaration, else the host last
        heard with it, else the fabric in use."""
        if self.declared is not None:
            return self._owner_in(self.declared, ip)
        got = self.topology.host_by_ip(ip)
        if got is not None:
            return got[0], (got[1].dpid, got[1].port)
        return self._owner_in(self.recognised, ip)

    def _name(self, dpid: int) -> str:
        f = self.declared or self.recognised
        return (f.switch_of_dpid.get(dpid) if f is not None and f.wired else None) \
            or f"{dpid:#x}"

    # ---- link speed ---------------------------------------------------------------------
    def link_speed(self) -> dict:
        """The link speed a discovered fabric assumes and where it comes from: the option
        (``--mlroute-link-gbps``), else the slowest current speed switches report for ports
        that carry a link or a host (``port_desc``), else 100 Gb/s (``default``). A declared
        fabric says its own (``declared``: its leaf tier's, and in ``tiers`` every tier's it has)."""
        if self.declared is not None:
            gbps = self.declared.link_gbps
            tiers = {t: v for t, v in gbps.items() if t != "core" or self.declared.tiers > 2}
            return {"gbps": gbps["leaf"], "source": "declared", "tiers": tiers}
        used = self.topology.facing() | self.guard.host_ports
        used |= {(h.dpid, h.port) for h in self.topology.hosts.values()}
        kbps = [v for k, v in self.speeds.items() if k in used] or list(self.speeds.values())
        reported = {"ports_reporting": len(self.speeds),
                    "reported_gbps": sorted({v / 1e6 for v in kbps})}
        if self.link_gbps is not None:
            return {"gbps": self.link_gbps, "source": "option", **reported}
        if kbps:
            return {"gbps": min(kbps) / 1e6, "source": "port_desc", **reported}
        return {"gbps": DEFAULT_GBPS, "source": "default", **reported}

    # ---- recognition ------------------------------------------------------------------
    def _recognised(self):
        gbps = self.link_speed()["gbps"]
        key = (self.topology.version, id(self.recognised), gbps)
        if self._cache[0] != key:
            fabric, problems = discover(self.topology, self.recognised, gbps)
            self._cache = (key, fabric, problems)
        return self._cache[1], self._cache[2]

    def _consistent(self, fabric: Clos | None, problems: list[dict], now: float) -> bool:
        """The switch graph can be adopted without waiting: every probe seen both ways, every
        link of the model cabled, every port of a switch above the leaves (spine, aggregation
        switch, core) cabled, every switch part of it, and no switch connected in the last
        ``SWITCH_QUIET_S``. An upper switch's port that is up and faces no switch is a cable
        LLDP has not crossed yet: leaves were read from the ports that face no switch, so the
        reading waits for that probe (or for ``QUIET_S``)."""
        if fabric is None or fabric.down or now - self._switch_at < SWITCH_QUIET_S:
            return False
        if any(p["kind"] not in _HOST_PROBLEMS for p in problems):
            return False
        t, leaves = self.topology, set(fabric.leaves)
        facing = t.facing()
        if any(up and (d, p) not in facing for name, d in fabric.dpids.items()
               if name not in leaves for p, up in t.switches.get(d, {}).items()):
            return False
        return set(t.switches) <= set(fabric.switch_of_dpid)

    def _relays(self, fabric: Clos | None, problems: list[dict], now: float,
                adopting: bool, keys: set | None = None) -> bool:
        """Links between leaf ports (of two leaves, or of one) are relayed probes: no Clos
        cables two leaves, silent hosts that forward each other's probes do (issue 59). Once
        the rest of the reading could be adopted (``adopting``: forced, quiet or declared; or
        consistent without them) their ports are host ports (``Guard.relayed``) and the links
        go, so the fabric is adopted at once and those ports' hosts are heard when they speak,
        instead of every change waiting ``QUIET_S`` and those hosts never heard. True if any.
        ``keys``: only these links can be relayed (None: every link)."""
        if fabric is None or not fabric.wired:
            return False
        leaves = {fabric.dpids[leaf] for leaf in fabric.leaves}
        links = self.topology.links
        pairs = {tuple(sorted(((a, pa), (b, pb))))
                 for (a, pa), (b, pb, _t) in (links.items() if keys is None else
                                              ((k, links[k]) for k in keys if k in links))
                 if a in leaves and b in leaves}
        if not pairs:
            return False
        ports = {x for pair in pairs for x in pair}
        rest = [p for p in problems if (p["dpid"], p["port"]) not in ports]
        if not (adopting or self._consistent(fabric, rest, now)):
            return False
        for a, b in sorted(pairs):
            self.guard.relayed(a, b, now, fabric.switch_of_dpid)
        self.topology.drop_ports(ports, now)
        return True

    def settle(self, now: float, force: bool = False) -> Clos | None:
        """The fabric the topology shows if it changed (zero configuration), as soon as it is
        consistent, after a quiet period otherwise, or at once when forced; else None. With a
        declared fabric, only the problems (wiring checked against the declaration) are
        updated, after a quiet period, and None is returned."""
        self._verify_due(now)
        t = self.topology
        if self.declared is None:  # every call: a missing interface may stay silent
            self._probe_missing(self._recognised()[1], now)
        if t.version == self._checked:
            return None
        quiet = now - t.changed_at >= QUIET_S
        if self.declared is not None:  # adopting: each relayed link goes when first seen, so
            # only the links new since the last call are looked at (every link, at k = 16 4,096
            # of them, at each batch of probes while they came in took 5% of a restart's CPU)
            fresh = t.take_fresh()
            self._relays(self.declared, [], now, True, None if self._scan_all else fresh)
            self._scan_all = False
            if force or (quiet and not self._held):  # no link missed for a held probe
                self._checked = t.version
                self.problems = check_declared(self.declared, t)
            return None
        fabric, problems = self._recognised()
        if self._relays(fabric, problems, now, force or quiet):
            fabric, problems = self._recognised()
        if not (force or quiet or self._consistent(fabric, problems, now)):
            return None
        self._checked = t.version
        self.problems = problems
        if fabric is None or (self.recognised is not None and
                              _same(fabric, self.recognised)):
            return None
        self.last_cause = _cause(self.recognised, fabric)
        self.recognised = fabric
        self._answer_asked(fabric, now)
        return fabric

    @property
    def checked(self) -> bool:
        """Whether ``problems`` were computed for the fabric held now (not since it was
        declared or recognised, or a new master restarted the quiet period)."""
        return self._checked >= 0

    def view(self) -> dict:
        return {"mode": "checking the declared fabric" if self.declared is not None
                else "discovering", "problems": self.problems,
                "problem_lines": [format_problem(p) for p in self.problems],
                "security": self.guard.view(), "link_speed": self.link_speed(),
                "probes": {"sent": dict(self.sent), "sent_bytes": self.sent_bytes,
                           "received": self.probes_received,
                           "per_round": self._per_round or None,
                           "link_timeout_s": self.topology.link_timeout},
                "echoes": self.liveness.view(self._name)}


def _same(a: Clos, b: Clos) -> bool:
    """The same fabric (discovery's and the one in use, both ``Clos``)."""
    return a.to_dict() == b.to_dict()


def _cause(old: Clos | None, new: Clos) -> str:
    """What a newly recognised fabric changes, for the event: the first fabric, hosts heard
    (the switch graph unchanged), or the switches and links, with the shape read."""
    if old is None:
        return f"fabric discovered: {_shape(new)}"
    if (old.switches(), old.down, old.link_gbps) == (new.switches(), new.down, new.link_gbps) \
            and all(new.ports.get(sw, {}).get(p) == n for sw in old.switches()
                    for p, n in old.ports[sw].items() if p not in old.hosts):
        added = sorted(set(new.hosts) - set(old.hosts))
        gone = sorted(set(old.hosts) - set(new.hosts))
        return "; ".join(x for x in (f"hosts heard: {', '.join(added)}" if added else "",
                                     f"hosts gone: {', '.join(gone)}" if gone else "")
                         if x) or "hosts changed"
    return f"fabric changed: {_shape(new)}"


def _shape(f: Clos) -> str:
    """The shape read, in a few words: "3 tiers: 4 pods, 8 leaves, 8 aggregation switches,
    4 cores, 0 hosts, 0 links down"."""
    planes = f.planes
    p = planes[0]
    words = (f"{len(planes)} planes, " if len(planes) > 1 else "") + (
        f"{p.tiers} tiers: {len(p.pods)} pods, {len(p.leaves)} leaves, "
        f"{sum(map(len, p.aggs))} aggregation switches, {sum(map(len, p.cores))} cores"
        if p.cores else f"2 tiers: {len(p.aggs[0])} spines, {len(p.leaves)} leaves")
    return f"{words}, {len(f.hosts)} hosts, {len(f.down)} links down"
