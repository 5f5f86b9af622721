"""Every neutral message kind through the shell's translator (``controller/shell/translate.py``)
and the framework's own OpenFlow 1.3 parser, for Ryu and os-ken alike (each when installed): the
message serialises, parses back, and a flow entry read back from a switch (flow stats carry the
same match and instructions) is the rule that was written."""
import importlib

import pytest

from controller.enforcement.clos_rules import clos_all_static, clos_static_rules
from controller.enforcement.desired import job_flow_rules
from controller.enforcement.openflow import GroupEntry, Message, SwitchState
from controller.enforcement.rules import T_FORGED
from controller.model.clos import Clos, as_clos
from controller.model.jobs import Flow
from controller.shell import translate

FRAMEWORKS = ["ryu", "os_ken"]


@pytest.fixture(params=FRAMEWORKS)
def ofproto(request):
    """(ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser) of one framework."""
    pytest.importorskip(request.param, reason=f"{request.param} is not installed in this venv")
    return tuple(importlib.import_module(f"{request.param}.ofproto.{m}")
                 for m in ("ofproto_parser", "ofproto_v1_3", "ofproto_v1_3_parser"))


def datapath(ofproto):
    class Datapath:
        id = 0x10001

        def __init__(self):
            self.ofproto, self.ofproto_parser, self.xid = ofproto[1], ofproto[2], 0

        def set_xid(self, msg):
            self.xid += 1
            msg.set_xid(self.xid)
    return Datapath()


def every_rule():
    f = as_clos(Clos.generate(2, 2, 2, 0.01, wiring=True))  # a leaf-spine, as served
    rules, groups = [], []
    for r, g in clos_all_static(f).values():
        rules += r
        groups += g
    flows = [Flow("j", "h0_0", "h1_0", 1.0), Flow("j", "h0_1", "h1_1", 1.0, 17, 50000, 4791),
             Flow("j", "h1_0", "h0_1", 1.0, 6, 0, 5001)]
    for mode in ("flow", "sr"):
        for fl in flows:
            a, b = f.hosts[fl.src], f.hosts[fl.dst]
            rules += job_flow_rules(f, fl, (((a, "s0", b), 0.5), ((a, "s1", b), 0.5)), mode, 7)
    core = Clos.fat_tree(4, 2).wire()  # a core's pod prefixes (/23), its leaves' labels
    rules += clos_static_rules(core, "c0_0")[0]
    # sr between pods: two labels pushed (the destination leaf's, the core's on top)
    rules += job_flow_rules(core, Flow("j", "h0_0", "h2_0", 1.0, 6, 0, 5001),
                            ((("l0", "a0_0", "c0_0", "a1_0", "l2"), 1.0),), "sr", 7)
    return rules, groups


def roundtrip(dp, msg, ofproto_parser):
    dp.set_xid(msg)
    msg.serialize()
    version, msg_type, length, xid = ofproto_parser.header(bytes(msg.buf))
    return ofproto_parser.msg(dp, version, msg_type, length, xid, bytes(msg.buf))


def test_every_message_kind_serialises_and_reads_back(ofproto):
    ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser = ofproto
    dp = datapath(ofproto)
    rules, groups = every_rule()
    kinds = set()
    for r in rules:
        for kind in ("flow_add", "flow_delete"):
            parsed = roundtrip(dp, translate.encode(dp, Message(kind, rule=r)), ofproto_parser)
            kinds.add(kind)
            assert parsed.priority == r.priority and parsed.table_id == r.table
            assert parsed.cookie == r.cookie
            if kind == "flow_add":  # what flow stats would report for this entry
                assert translate.rule_of(ofproto_v1_3, r.dpid, parsed) == r
    for g in groups + [GroupEntry(dp.id, 9, ((("output", 1),), (("output", 2),)))]:
        for kind in ("group_add", "group_modify", "group_delete"):
            msg = translate.encode(dp, Message(kind, group=g))
            dp.set_xid(msg)
            msg.serialize()  # Ryu parses no group-mod: read the buckets back from the bytes
            buf = bytes(msg.buf)
            kinds.add(kind)
            assert int.from_bytes(buf[12:16], "big") == g.group_id
            buckets, offset = [], ofproto_v1_3.OFP_GROUP_MOD_SIZE
            while offset < len(buf):
                b = ofproto_v1_3_parser.OFPBucket.parser(buf, offset)
                buckets.append(translate.actions_of(ofproto_v1_3, b.actions))
                offset += b.len
            assert tuple(buckets) == (() if kind == "group_delete" else g.buckets)
    assert kinds == {"flow_add", "flow_delete", "group_add", "group_modify", "group_delete"}
    actions = {a[0] for r in rules for a in r.actions}
    assert actions == {"output", "controller", "group", "push_mpls", "pop_mpls", "set_field"}
    # leaf and pod prefixes (model.prefixes) read back as written: (network, netmask)
    assert {r.match_dict()["ipv4_dst"] for r in rules if isinstance(
        r.match_dict().get("ipv4_dst"), tuple)} >= {("10.0.1.0", "255.255.255.252"),
                                                    ("10.0.2.0", "255.255.254.0")}


def test_tables_read_back_as_switch_state(ofproto):
    """Flow stats and group descriptions as a switch sends them become the neutral state the
    reconciler compares with the wanted one."""
    _parser_mod, ofp, parser = ofproto
    dp = datapath(ofproto)
    rules, groups = every_rule()
    groups.append(GroupEntry(rules[0].dpid, 9, ((("output", 1),), (("output", 2),))))
    rules = [r for r in rules if r.dpid == rules[0].dpid]
    groups = [g for g in groups if g.dpid == rules[0].dpid]
    flows = [roundtrip(dp, translate.encode(dp, Message("flow_add", rule=r)), _parser_mod)
             for r in rules]
    descs = [parser.OFPGroupDescStats(ofp.OFPGT_SELECT, g.group_id, translate.encode(
        dp, Message("group_add", group=g)).buckets) for g in groups]
    state = translate.state_of(ofp, rules[0].dpid, flows, descs)
    assert state == SwitchState({r.key: r for r in rules}, {g.group_id: g for g in groups})
    pauses = []  # a long read gives the event loop back every `every` entries, same result
    paused = translate.state_of(ofp, rules[0].dpid, flows, descs, pause=lambda: pauses.append(1),
                                every=2)
    assert paused == state and len(pauses) == len(flows) // 2 > 0


def test_requests_and_events(ofproto):
    _parser_mod, ofp, parser = ofproto
    dp = datapath(ofproto)
    for msg in (translate.barrier(dp), *translate.table_requests(dp),
                *translate.stats_requests(dp), translate.port_desc_request(dp),
                translate.packet_out(dp, 3, b"\x00" * 60),
                translate.packet_out(dp, ofp.OFPP_TABLE, b"\x00" * 60, in_port=2),
                translate.role_request(dp, True, 7), translate.role_request(dp, False, 7)):
        dp.set_xid(msg)
        msg.serialize()  # every request the shell sends is a valid OpenFlow 1.3 message
        assert len(msg.buf) >= 8
    flow_stats = translate.stats_requests(dp)[1]
    assert flow_stats.cookie_mask and flow_stats.cookie  # the job rules only
    forged = translate.stats_requests(dp)[2]  # a leaf's drop of forged sources (source_check)
    assert forged.table_id == T_FORGED and not forged.cookie_mask
    assert translate.role_name(ofp, ofp.OFPCR_ROLE_MASTER) == "master"
    assert translate.role_name(ofp, ofp.OFPCR_ROLE_EQUAL) == "equal"

    def port(no, down=False, admin_down=False):
        return parser.OFPPort(no, "00:00:00:00:00:01", f"p{no}", ofp.OFPPC_PORT_DOWN * admin_down,
                              ofp.OFPPS_LINK_DOWN * down, 0, 0, 0, 0, 0, 0)
    assert translate.ports_of(ofp, [port(1), port(2, down=True), port(3, admin_down=True),
                                    port(ofp.OFPP_LOCAL)]) == {1: True, 2: False, 3: False}

    class Status:
        reason, desc = ofp.OFPPR_MODIFY, port(4)
    assert translate.port_status(ofp, Status) == (4, True)
    Status.reason = ofp.OFPPR_DELETE
    assert translate.port_status(ofp, Status) == (4, False)
    with pytest.raises(ValueError):
        translate.encode(dp, Message("flow_add", rule=every_rule()[0][0].__class__(
            1, 0, 1, (), (("teleport", 1),))))


def test_flow_mods_encoded_once_per_rule_send_the_same_bytes(ofproto):
    """``encoded``: a flow mod's body is encoded once per rule but its switch and reused, and
    every message sent is byte for byte what ``encode`` makes (but the xid, the sender's);
    group mods are encoded each time."""
    _parser_mod, ofp, parser = ofproto
    rules, groups = every_rule()

    def sent(msg, xid):
        msg.set_xid(xid)
        msg.serialize()
        return bytes(msg.buf)
    dp = datapath(ofproto)
    translate._bodies.clear()
    for xid, r in enumerate(rules, 1):
        for kind in ("flow_add", "flow_delete"):
            m = Message(kind, rule=r)
            fast = translate.encoded(dp, m)
            assert isinstance(fast, parser.OFPFlowMod)  # a framework flow mod (send_msg's check)
            assert sent(fast, xid) == sent(translate.encode(dp, m), xid)
    bodies = len(translate._bodies)
    assert 0 < bodies <= 2 * len(rules)
    other = [r.__class__(r.dpid + 1, *[getattr(r, k) for k in
                                       ("table", "priority", "match", "actions", "goto",
                                        "cookie")]) for r in rules]  # another switch's
    for r in other:
        m = Message("flow_add", rule=r)
        assert sent(translate.encoded(dp, m), 7) == sent(translate.encode(dp, m), 7)
    assert len(translate._bodies) == bodies  # its bodies were reused
    g = Message("group_add", group=GroupEntry(dp.id, 9, ((("output", 1),), (("output", 2),))))
    assert sent(translate.encoded(dp, g), 8) == sent(translate.encode(dp, g), 8)
    assert len(translate._bodies) == bodies
