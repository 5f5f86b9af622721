"""The OpenFlow 1.3 translator: neutral messages (``controller/enforcement/openflow.py``) to the
framework's OFP message objects and back, and the few requests the shell sends.

Every function takes the datapath (or its ``ofproto`` module), whose ``ofproto`` and
``ofproto_parser`` are Ryu's or os-ken's OpenFlow 1.3 modules: the two frameworks share the
class and constant names, so this module imports neither and serves both adapters.
"""
from __future__ import annotations

from controller.enforcement.openflow import (
    COOKIE_EXACT,
    COOKIE_JOB,
    COOKIE_OWNER_MASK,
    FlowRule,
    GroupEntry,
    Message,
    SwitchState,
)
from controller.enforcement.rules import T_FORGED

GROUP_COMMANDS = ("group_add", "group_modify", "group_delete")


def _actions(dp, spec) -> list:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    out = []
    for a in spec:
        if a[0] == "output":
            out.append(parser.OFPActionOutput(a[1]))
        elif a[0] == "controller":
            out.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))
        elif a[0] == "group":
            out.append(parser.OFPActionGroup(a[1]))
        elif a[0] == "push_mpls":
            out.append(parser.OFPActionPushMpls(a[1]))
        elif a[0] == "pop_mpls":
            out.append(parser.OFPActionPopMpls(a[1]))
        elif a[0] == "set_field":
            out.append(parser.OFPActionSetField(**{a[1]: a[2]}))
        else:
            raise ValueError(f"unknown action {a!r}")
    return out


def encode(dp, m: Message):
    """The OFP message (flow mod or group mod) for one neutral message; no xid set yet."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    if m.kind in ("flow_add", "flow_delete"):
        r = m.rule
        match = parser.OFPMatch(**r.match_dict())
        if m.kind == "flow_delete":
            return parser.OFPFlowMod(dp, cookie=r.cookie, cookie_mask=COOKIE_EXACT,
                                     table_id=r.table, command=ofp.OFPFC_DELETE_STRICT,
                                     priority=r.priority, match=match,
                                     out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)
        inst = []
        if r.actions:
            inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                                     _actions(dp, r.actions)))
        if r.goto is not None:
            inst.append(parser.OFPInstructionGotoTable(r.goto))
        return parser.OFPFlowMod(dp, cookie=r.cookie, table_id=r.table, command=ofp.OFPFC_ADD,
                                 priority=r.priority, match=match, instructions=inst)
    if m.kind not in GROUP_COMMANDS:
        raise ValueError(f"unknown message kind {m.kind!r}")
    g = m.group
    command = {"group_add": ofp.OFPGC_ADD, "group_modify": ofp.OFPGC_MODIFY,
               "group_delete": ofp.OFPGC_DELETE}[m.kind]
    buckets = [parser.OFPBucket(weight=1, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                actions=_actions(dp, b))
               for b in g.buckets] if m.kind != "group_delete" else []
    return parser.OFPGroupMod(dp, command, ofp.OFPGT_SELECT, g.group_id, buckets)


# ---- flow mods encoded once -------------------------------------------------------------------
BODIES = 16384  # flow mod bodies kept (k = 16: 11,264 static entries, 3,262 bodies)
_bodies: dict = {}  # (parser module, kind, the rule but its switch) -> bytes after the header
_senders: dict = {}  # parser module -> its flow mod class that sends bytes encoded before


def encoded(dp, m: Message):
    """``encode`` for sending: a flow mod's bytes after its header are encoded once per rule
    but its switch, and reused (group mods are encoded each time). Why: the static entries of
    a switch repeat on the others (a k = 16 fat-tree: 11,264 entries, 3,262 distinct), and
    building and serialising each as the framework's objects (its match normalises every
    address) was a quarter of the controller's CPU in a first start (issue 74)."""
    if m.kind not in ("flow_add", "flow_delete"):
        return encode(dp, m)
    r, parser = m.rule, dp.ofproto_parser
    key = (parser, m.kind, r.table, r.priority, r.match, r.actions, r.goto, r.cookie)
    body = _bodies.get(key)
    if body is None:
        msg = encode(dp, m)
        msg.serialize()
        body = bytes(msg.buf[dp.ofproto.OFP_HEADER_SIZE:])
        if len(_bodies) >= BODIES:
            _bodies.clear()
        _bodies[key] = body
    sender = _senders.get(parser)
    if sender is None:
        sender = _senders[parser] = _sender(parser)
    return sender(dp, body)


def _sender(parser):
    class Encoded(parser.OFPFlowMod):
        """A flow mod whose bytes after the header were encoded before (``encoded``)."""

        def __init__(self, datapath, body: bytes):
            parser.MsgBase.__init__(self, datapath)
            self.body = body

        def _serialize_body(self):
            self.buf += self.body
    return Encoded


def actions_of(ofp, acts) -> tuple:
    """OFP actions as the neutral tuples the rule builders write."""
    out = []
    for a in acts:
        name = type(a).__name__
        if name == "OFPActionOutput":
            out.append(("controller",) if a.port == ofp.OFPP_CONTROLLER else ("output", a.port))
        elif name == "OFPActionGroup":
            out.append(("group", a.group_id))
        elif name == "OFPActionPushMpls":
            out.append(("push_mpls", a.ethertype))
        elif name == "OFPActionPopMpls":
            out.append(("pop_mpls", a.ethertype))
        elif name == "OFPActionSetField":
            out.append(("set_field", a.key, a.value))
        else:  # something mlroute never writes: keep it distinct so the entry is replaced
            out.append(("unknown", repr(a)))
    return tuple(out)


def rule_of(ofp, dpid: int, s) -> FlowRule:
    """A flow stats entry (or a parsed flow mod) as the rule builders would have written it."""
    actions, goto = (), None
    for inst in s.instructions:
        if hasattr(inst, "actions"):
            actions = actions_of(ofp, inst.actions)
        elif hasattr(inst, "table_id"):
            goto = inst.table_id
    return FlowRule(dpid, s.table_id, s.priority, tuple(sorted(s.match.items())), actions, goto,
                    s.cookie)


def state_of(ofp, dpid: int, flows, groups, pause=None, every: int = 128) -> SwitchState:
    """A switch's tables from its flow stats and group descriptions; ``pause()`` after every
    ``every`` entries (a spine of the paper's scale holds about 1,100: 30-50 ms of work that
    would otherwise hold the event loop in one piece)."""
    state = SwitchState()
    for k, s in enumerate(flows, 1):
        r = rule_of(ofp, dpid, s)
        state.rules[r.key] = r
        if pause is not None and k % every == 0:
            pause()
    for g in groups:
        state.groups[g.group_id] = GroupEntry(
            dpid, g.group_id, tuple(actions_of(ofp, b.actions) for b in g.buckets))
    return state


# ---- requests the shell sends ------------------------------------------------------------------
def barrier(dp):
    return dp.ofproto_parser.OFPBarrierRequest(dp)


def table_requests(dp) -> list:
    """Every flow entry (flow stats) and every group (group description)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return [parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, 0, 0,
                                       parser.OFPMatch()),
            parser.OFPGroupDescStatsRequest(dp, 0)]


def stats_requests(dp) -> list:
    """Port counters, the counters of the job rules (cookie owner JOB) and of a leaf's drop
    of forged sources (its one entry of table ``T_FORGED``; other switches answer none)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return [parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY),
            parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                       COOKIE_JOB, COOKIE_OWNER_MASK, parser.OFPMatch()),
            parser.OFPFlowStatsRequest(dp, 0, T_FORGED, ofp.OFPP_ANY, ofp.OFPG_ANY, 0, 0,
                                       parser.OFPMatch())]


def port_desc_request(dp):
    return dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0)


def packet_out(dp, out_port: int, frame: bytes, in_port: int | None = None):
    """``frame`` sent out of ``out_port`` (a port number, or OFPP_TABLE to run it through the
    switch's tables as if it came in on ``in_port``)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                               in_port=ofp.OFPP_CONTROLLER if in_port is None else in_port,
                               actions=[parser.OFPActionOutput(out_port)], data=frame)


def role_request(dp, master: bool, generation: int):
    ofp = dp.ofproto
    return dp.ofproto_parser.OFPRoleRequest(
        dp, ofp.OFPCR_ROLE_MASTER if master else ofp.OFPCR_ROLE_SLAVE, generation)


def role_name(ofp, role: int) -> str:
    return {ofp.OFPCR_ROLE_MASTER: "master", ofp.OFPCR_ROLE_SLAVE: "slave"}.get(role, "equal")


# ---- replies and events ------------------------------------------------------------------------
def _up(ofp, p) -> bool:
    return not (p.state & ofp.OFPPS_LINK_DOWN or p.config & ofp.OFPPC_PORT_DOWN)


def ports_of(ofp, body) -> dict[int, bool]:
    """Port description reply: physical port -> up."""
    return {p.port_no: _up(ofp, p) for p in body if p.port_no < ofp.OFPP_MAX}


def port_speeds(ofp, body) -> dict[int, int]:
    """Port description reply: physical port -> current speed in kbps (0: not reported)."""
    return {p.port_no: int(getattr(p, "curr_speed", 0) or 0) for p in body
            if p.port_no < ofp.OFPP_MAX}


def port_status(ofp, msg) -> tuple[int, bool]:
    """Port status message: (port, up); a deleted port is down."""
    return msg.desc.port_no, msg.reason != ofp.OFPPR_DELETE and _up(ofp, msg.desc)


def flow_counters(body) -> list[tuple]:
    """Flow stats as the service reads them: (table, priority, match, bytes, packets)."""
    return [(s.table_id, s.priority, dict(s.match.items()), s.byte_count, s.packet_count)
            for s in body]
