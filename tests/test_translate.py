"""Every neutral message kind through the Ryu shell's translator and Ryu's own OpenFlow 1.3
parser: the message serialises, parses back, and a flow entry read back from a switch (flow
stats carry the same match and instructions) is the rule that was written."""
import pytest

pytest.importorskip("ryu")

from ryu.ofproto import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser  # noqa: E402

from controller.shell.app import MlrouteApp  # noqa: E402
from controller.model.fabric import Fabric  # noqa: E402
from controller.model.jobs import Flow  # noqa: E402
from controller.enforcement.openflow import GroupEntry, Message  # noqa: E402
from controller.enforcement.rules import all_static, flow_rules  # noqa: E402


class Datapath:
    ofproto = ofproto_v1_3
    ofproto_parser = ofproto_v1_3_parser
    id = 0x10001

    def __init__(self):
        self.xid = 0

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)


def every_rule():
    f = Fabric.generate(2, 2, 2, 0.01, wiring=True)
    rules, groups = [], []
    for r, g in all_static(f).values():
        rules += r
        groups += g
    flows = [Flow("j", "h0_0", "h1_0", 1.0), Flow("j", "h0_1", "h1_1", 1.0, 17, 50000, 4791),
             Flow("j", "h1_0", "h0_1", 1.0, 6, 0, 5001)]
    for mode in ("flow", "sr"):
        for fl in flows:
            rules += flow_rules(f, fl, ((0, 0.5), (1, 0.5)), mode, 7)
    return rules, groups


def roundtrip(dp, msg):
    msg.serialize()
    version, msg_type, length, xid = ofproto_parser.header(bytes(msg.buf))
    return ofproto_parser.msg(dp, version, msg_type, length, xid, bytes(msg.buf))


def test_every_message_kind_serialises_and_reads_back():
    dp = Datapath()
    rules, groups = every_rule()
    kinds = set()
    for r in rules:
        for kind in ("flow_add", "flow_delete"):
            parsed = roundtrip(dp, MlrouteApp._translate(dp, Message(kind, rule=r)))
            kinds.add(kind)
            assert parsed.priority == r.priority and parsed.table_id == r.table
            assert parsed.cookie == r.cookie
            if kind == "flow_add":  # what flow stats would report for this entry
                assert MlrouteApp._rule_of(r.dpid, parsed) == r
    for g in groups + [GroupEntry(dp.id, 9, ((("output", 1),), (("output", 2),)))]:
        for kind in ("group_add", "group_modify", "group_delete"):
            msg = MlrouteApp._translate(dp, Message(kind, group=g))
            msg.serialize()  # Ryu parses no group-mod: read the buckets back from the bytes
            buf = bytes(msg.buf)
            kinds.add(kind)
            assert int.from_bytes(buf[12:16], "big") == g.group_id
            buckets, offset = [], ofproto_v1_3.OFP_GROUP_MOD_SIZE
            while offset < len(buf):
                b = ofproto_v1_3_parser.OFPBucket.parser(buf, offset)
                buckets.append(MlrouteApp._actions_of(b.actions))
                offset += b.len
            assert tuple(buckets) == (() if kind == "group_delete" else g.buckets)
    assert kinds == {"flow_add", "flow_delete", "group_add", "group_modify", "group_delete"}
    actions = {a[0] for r in rules for a in r.actions}
    assert actions == {"output", "controller", "group", "push_mpls", "pop_mpls", "set_field"}
