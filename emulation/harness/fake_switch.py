"""A small OpenFlow 1.3 table interpreter (in the spirit of Faucet's fake tables): applies the
controller's messages to per-switch tables and traces packets through the fabric, so rule
builders and the service are checked without a switch. It also acts as the service's Installer.
"""
from __future__ import annotations

import hashlib
import ipaddress

from controller.enforcement.echo import IN_PORT
from controller.enforcement.openflow import ETH_IPV4, ETH_MPLS, FlowRule, SwitchState
from controller.errors import InstallError

PREREQ = {"ipv4_src": ("eth_type", ETH_IPV4), "ipv4_dst": ("eth_type", ETH_IPV4),
          "ip_proto": ("eth_type", ETH_IPV4), "tcp_src": ("ip_proto", 6),
          "tcp_dst": ("ip_proto", 6), "udp_src": ("ip_proto", 17), "udp_dst": ("ip_proto", 17),
          "mpls_label": ("eth_type", ETH_MPLS), "mpls_bos": ("eth_type", ETH_MPLS),
          "ip_dscp": ("eth_type", ETH_IPV4)}


class FakeSwitches:
    def __init__(self, dpids, fabric=None):
        self.fabric = fabric  # wiring, needed only to follow probes from leaf to spine
        self.probes = 0  # probe packets sent by the controller (host mode)
        self.lose_probes = 0  # probes to lose (none reaches a spine)
        self.rules = {d: {} for d in dpids}  # dpid -> key -> FlowRule
        self.groups = {d: {} for d in dpids}
        self.fail = set()  # dpids that reject their next batch (once)
        self.offline = set()  # dpids that do not answer table reads
        # dpids that answer nothing (table reads, barriers) and apply nothing: a call that
        # waits for one lasts ``timeout`` seconds of ``stall`` (a test's FakeClock.sleep);
        # no straggler is given up on early here, as ``shell.switches.Switches`` does
        self.silent = set()
        self.timeout = 5.0
        self.stall = lambda seconds: None
        # dpid -> entries each flow table holds at most: an addition beyond is refused and
        # the batch goes on, as Open vSwitch with ``flow_limit`` and ``overflow_policy=refuse``
        # (OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL)
        self.limit = {}
        self.packets_out = []  # (dpid, port, frame) sent by the controller
        self.sent = []  # every message, in order

    # Installer
    def install(self, batches):
        """Every switch applies its batch, as real ones do; one in ``fail`` applies the first
        message only (a half-applied batch) and is named in the error; one whose table is
        full applies all but the refused additions; a silent one applies nothing."""
        failed, full = {}, set()
        for dpid, msgs in batches.items():
            if dpid in self.silent:
                failed[dpid] = f"switch {dpid:#x} did not confirm its rules"
            elif dpid in self.fail:
                self._apply(dpid, msgs[:1])
                self.fail.discard(dpid)
                failed[dpid] = f"switch {dpid:#x} rejected a rule"
            elif self._apply(dpid, msgs):
                failed[dpid] = f"switch {dpid:#x} rejected a rule (its flow table is full)"
                full.add(dpid)
        if self.silent & set(batches):
            self.stall(self.timeout)
        if failed:
            raise InstallError(next(iter(failed.values())), failed, full)

    def packet_out(self, dpid, port, frame):
        self.packets_out.append((dpid, port, frame))

    def read_tables(self, dpid):
        if dpid in self.offline:
            raise InstallError(f"switch {dpid:#x} did not answer")
        if dpid in self.silent:
            self.stall(self.timeout)
            raise InstallError(f"switch {dpid:#x} did not send its tables within "
                               f"{self.timeout:g} s")
        return SwitchState(dict(self.rules[dpid]), dict(self.groups[dpid]))

    def read_many(self, dpids, ready=None):
        """The tables of ``dpids``, each its state or InstallError; with silent ones among
        them, those that answer go to ``ready`` first (if given), as ``Switches.read_many``
        streams them, and the silent ones are waited for together."""
        out = {}
        for dpid in dpids:
            if dpid not in self.silent:
                try:
                    out[dpid] = self.read_tables(dpid)
                except InstallError as e:
                    out[dpid] = e
        quiet = [d for d in dpids if d in self.silent]
        if quiet:
            if ready is not None and out:
                ready(out)
                out = {}
            self.stall(self.timeout)
        for dpid in quiet:
            out[dpid] = InstallError(f"switch {dpid:#x} did not send its tables within "
                                     f"{self.timeout:g} s")
        return out

    def _apply(self, dpid, msgs) -> int:
        """Apply ``msgs``; returns the additions refused because their table was full."""
        refused = 0
        for m in msgs:
            self.sent.append(m)
            if m.kind == "flow_add":
                for f, _ in m.rule.match:
                    if f in PREREQ:
                        field, value = PREREQ[f]
                        assert m.rule.match_dict().get(field) == value, f"{f} without {field}"
                cap, table = self.limit.get(dpid), self.rules[dpid]
                if cap is not None and m.rule.key not in table and sum(
                        r.table == m.rule.table for r in table.values()) >= cap:
                    refused += 1
                    continue
                self.rules[dpid][m.rule.key] = m.rule
            elif m.kind == "flow_delete":
                self.rules[dpid].pop(m.rule.key, None)
            elif m.kind in ("group_add", "group_modify"):
                self.groups[dpid][m.group.group_id] = m.group
            elif m.kind == "group_delete":
                self.groups[dpid].pop(m.group.group_id, None)
        return refused

    def snapshot(self):
        return {d: set(r.values()) for d, r in self.rules.items()}, \
               {d: dict(g) for d, g in self.groups.items()}

    # packet processing
    def process(self, dpid: int, pkt: dict, bucket=None) -> list[tuple[int, dict]]:
        """Outputs (port, packet) of a packet entering ``dpid``; ``bucket`` picks select-group
        buckets (None: hash of the packet)."""
        pkt = dict(pkt, mpls=list(pkt.get("mpls", [])))
        table, outputs = 0, []
        for _ in range(8):
            r = self._lookup(dpid, table, pkt)
            if r is None:
                return outputs
            for a in r.actions:
                self._act(dpid, a, pkt, outputs, bucket)
            if r.goto is None:
                return outputs
            table = r.goto
        raise AssertionError("goto loop")

    def _act(self, dpid, a, pkt, outputs, bucket):
        if a[0] == "output":  # OFPP_IN_PORT: back where it came in (the echo entry)
            port = pkt["in_port"] if a[1] == IN_PORT else a[1]
            outputs.append((port, dict(pkt, mpls=list(pkt["mpls"]))))
        elif a[0] == "controller":
            outputs.append(("controller", dict(pkt)))
        elif a[0] == "group":
            g = self.groups[dpid][a[1]]
            if bucket is None:
                h = hashlib.sha256(repr(sorted((k, str(v)) for k, v in pkt.items())).encode())
                i = int.from_bytes(h.digest()[:4], "big") % len(g.buckets)
            else:
                i = bucket % len(g.buckets)
            for b in g.buckets[i]:
                self._act(dpid, b, pkt, outputs, bucket)
        elif a[0] == "push_mpls":
            pkt["mpls"].insert(0, 0)
        elif a[0] == "pop_mpls":
            pkt["mpls"].pop(0)
        elif a[0] == "set_field" and a[1] == "eth_dst":
            pkt["eth_dst"] = a[2]
        elif a[0] == "set_field":
            assert a[1] == "mpls_label"
            pkt["mpls"][0] = a[2]
        else:
            raise AssertionError(a)

    def _lookup(self, dpid, table, pkt) -> FlowRule | None:
        fields = self._fields(pkt)
        best = None
        for r in self.rules[dpid].values():
            if r.table != table:
                continue
            if all(_matches(fields.get(k), v) for k, v in r.match):
                if best is None or r.priority > best.priority:
                    best = r
        return best

    @staticmethod
    def _fields(pkt) -> dict:
        f = {"in_port": pkt["in_port"]}
        if pkt["mpls"]:
            f.update(eth_type=ETH_MPLS, mpls_label=pkt["mpls"][0], mpls_bos=int(len(pkt["mpls"]) == 1))
            return f
        f["eth_type"] = pkt["eth_type"]
        if "eth_dst" in pkt:  # LLDP probes and echoes; IPv4 is matched by address only
            f["eth_dst"] = pkt["eth_dst"]
        if pkt["eth_type"] == ETH_IPV4:
            f.update(ipv4_src=pkt["ipv4_src"], ipv4_dst=pkt["ipv4_dst"], ip_proto=pkt["ip_proto"])
            l4 = {6: "tcp", 17: "udp"}.get(pkt["ip_proto"])
            if l4:
                f[f"{l4}_src"] = pkt["sport"]
                f[f"{l4}_dst"] = pkt["dport"]
            f["ip_dscp"] = pkt.get("dscp", 0)
        return f

    # host mode: probes injected at a leaf (packet-out to the table), answered by a trap above
    def probe(self, probes) -> dict:
        """Every probe through the leaf's tables from its host port, then switch by switch
        until a switch sends it to the controller; that packet-in is (dpid, in_port). Lost
        probes are absent."""
        from controller.enforcement.probepacket import parse_probe
        f = self.fabric
        out = {}
        for p in probes:
            self.probes += 1
            if self.lose_probes > 0:
                self.lose_probes -= 1
                continue
            h = parse_probe(p.data)
            pkt = {"in_port": p.in_port, "eth_type": ETH_IPV4, "ipv4_src": h["ipv4_src"],
                   "ipv4_dst": h["ipv4_dst"], "ip_proto": h["proto"], "sport": h["sport"],
                   "dport": h["dport"], "dscp": h["dscp"], "mpls": []}
            sw = f.switch_of_dpid[p.dpid]
            for _hop in range(6):
                outs = self.process(f.dpids[sw], pkt)
                if any(where == "controller" for where, _ in outs):
                    out[p.token] = (f.dpids[sw], pkt["in_port"])
                    break
                nxt = [(f.peer(sw, port), port, pk) for port, pk in outs]
                nxt = [x for x in nxt if x[0] in f.dpids]
                if len(nxt) != 1:
                    break
                peer, port, pk = nxt[0]
                pkt = dict(pk, in_port=arrival(f, sw, port))
                sw = peer
        return out


def _matches(have, want) -> bool:
    """An OpenFlow match value: exact, or (value, mask) for a masked field (integers, or an
    IPv4 address and netmask as dotted strings, as Ryu reports a masked ``ipv4_dst``)."""
    if isinstance(want, tuple):
        value, mask = want
        if have is None:
            return False
        if isinstance(value, str):
            have, value, mask = (int(ipaddress.IPv4Address(x)) for x in (have, value, mask))
        return have & mask == value & mask
    return have == want


def arrival(fabric, switch: str, port: int) -> int:
    """The port a packet sent out of ``switch``'s ``port`` enters its peer on: the same member
    of a bundle at the other end."""
    peer = fabric.peer(switch, port)
    return fabric.ports_to(peer, switch)[fabric.member(switch, port)]


def trace(fabric, switches: FakeSwitches, src: str, dst: str, proto=6, sport=1234, dport=80,
          bucket=None, plane: int = 0, members: list | None = None):
    """Follow an IPv4 packet from host ``src`` to ``dst``: (switches crossed, host reached or
    None, MPLS labels still on the packet). ``plane`` (a Clos of several planes): the packet
    leaves on the host's interface to that plane, with that plane's addresses. ``members``, a
    list: gets the member of the bundle (0: a single link) of every switch-to-switch hop."""
    if plane:
        sw, ips = fabric.host_leaves[src][plane], fabric.plane_ips(plane)
    else:
        sw, ips = fabric.hosts[src], fabric.host_ip
    pkt = {"in_port": fabric.port(sw, src), "eth_type": ETH_IPV4,
           "ipv4_src": ips[src], "ipv4_dst": ips[dst], "ip_proto": proto,
           "sport": sport, "dport": dport, "mpls": []}
    path = []
    for _ in range(6):
        path.append(sw)
        out = switches.process(fabric.dpids[sw], pkt, bucket)
        if not out:
            return path, None, []
        assert len(out) == 1, f"{sw} sent the packet out of {len(out)} ports"
        port, pkt = out[0]
        peer = fabric.peer(sw, port)
        if peer in fabric.hosts:
            return path, peer, pkt["mpls"]
        if members is not None:
            members.append(fabric.member(sw, port))
        pkt = dict(pkt, in_port=arrival(fabric, sw, port))
        sw = peer
    raise AssertionError(f"loop: {path}")


def lldp_packet_ins(fabric, switches: FakeSwitches, frames, dead=frozenset(),
                    cut=frozenset()) -> list[tuple[int, int, bytes]]:
    """The packet-ins that LLDP frames the controller sent out of switch ports ((dpid, port,
    frame) each, as ``packets_out`` holds them) make: a frame crosses its cable and the far
    switch's tables decide, to the controller or out of a port (an echo goes back where it
    came in, ``enforcement/echo.py``), and so on. ``dead``: dpids that forward nothing;
    ``cut``: (switch, peer) pairs whose cable carries nothing, its carrier up. A packet-in is
    (dpid, in_port, frame), the frame with the destination the last switch set."""
    out = []

    def send(dpid, port, frame, hops):
        name = fabric.switch_of_dpid[dpid]
        peer = fabric.peer(name, port)
        if dpid in dead or peer not in fabric.dpids or hops > 3 or (name, peer) in cut \
                or (peer, name) in cut or fabric.dpids[peer] in dead:
            return
        at, in_port = fabric.dpids[peer], arrival(fabric, name, port)
        pkt = {"in_port": in_port, "eth_type": 0x88CC, "mpls": [],
               "eth_dst": ":".join(f"{b:02x}" for b in frame[:6])}
        for where, p in switches.process(at, pkt):
            sent = bytes.fromhex(p["eth_dst"].replace(":", "")) + frame[6:]
            if where == "controller":
                out.append((at, in_port, sent))
            else:
                send(at, where, sent, hops + 1)
    for dpid, port, frame in frames:
        send(dpid, port, frame, 0)
    return out
