"""The framework-neutral switch I/O (``controller/shell/switches.py``) and role handling
(``roles.py``) under native threads, as os-ken 4 runs them: datapaths whose messages are real
OpenFlow 1.3 objects of Ryu or os-ken (each when installed), serialised by the framework, and a
switch that answers from a thread of its own in order (its event loop): barriers, errors,
multipart table reads, probes, role replies. No switch, no root."""
import importlib
import queue
import threading
import time
from types import SimpleNamespace

import pytest

from controller.enforcement.clos_rules import clos_all_static
from controller.enforcement.hostmode import PORT_MIN, make_probes
from controller.enforcement.openflow import GroupEntry, Message, SwitchState
from controller.errors import InstallError
from controller.model.clos import Clos, as_clos
from controller.shell.hub import THREADS
from controller.shell.roles import Roles
from controller.shell.switches import Switches


@pytest.fixture(params=["ryu", "os_ken"])
def ofp(request):
    pytest.importorskip(request.param, reason=f"{request.param} is not installed in this venv")
    return tuple(importlib.import_module(f"{request.param}.ofproto.{m}")
                 for m in ("ofproto_v1_3", "ofproto_v1_3_parser"))


class Switch:
    """A datapath and the switch behind it: applies flow and group mods, answers barriers,
    table reads (in two parts), probes (at ``spine``) and role requests, from one thread.
    ``limit``: entries a flow table holds; an addition beyond is refused as Open vSwitch
    refuses it with ``flow_limit`` and ``overflow_policy=refuse``."""

    def __init__(self, ofp, dpid, io: Switches, reject=False, silent=False, stale_role=False,
                 limit=None):
        self.ofproto, self.ofproto_parser = ofp
        self.id, self.xid, self.io = dpid, 0, io
        self.reject, self.silent, self.stale_role = reject, silent, stale_role
        self.limit = limit
        self.sent, self.flows, self.groups = [], {}, {}
        self.events = queue.Queue()
        self.roles = None  # the Roles under test, for role replies
        threading.Thread(target=self._loop, daemon=True).start()

    def set_xid(self, msg):
        self.xid += 1
        msg.set_xid(self.xid)

    def send_msg(self, msg):
        msg.serialize()  # the framework's own encoder: a valid OpenFlow 1.3 message
        if isinstance(msg, self.ofproto_parser.OFPFlowMod):  # what a switch reads: its bytes
            msg = self._parse(msg)  # (``translate.encoded`` sends bytes encoded before)
        self.sent.append(msg)
        self.events.put(msg)

    def _parse(self, msg):
        framework = importlib.import_module(self.ofproto_parser.__name__.rsplit(".", 1)[0]
                                            + ".ofproto_parser")
        buf = bytes(msg.buf)
        return framework.msg(self, *framework.header(buf), buf)

    def _reply(self, **kw):
        return SimpleNamespace(datapath=self, **kw)

    def _loop(self):
        ofp = self.ofproto
        while True:
            msg = self.events.get()
            name, xid = type(msg).__name__, msg.xid
            if name == "OFPFlowMod":
                key = (msg.table_id, msg.priority, tuple(sorted(msg.match.items())))
                full = self.limit is not None and key not in self.flows and sum(
                    k[0] == msg.table_id for k in self.flows) >= self.limit
                if self.reject or (full and msg.command == ofp.OFPFC_ADD):
                    self.io.on_error(self._reply(xid=xid, type=ofp.OFPET_FLOW_MOD_FAILED,
                                                 code=ofp.OFPFMFC_TABLE_FULL if full else 0))
                elif msg.command == ofp.OFPFC_ADD:
                    self.flows[key] = msg
                elif msg.command == ofp.OFPFC_DELETE_STRICT:
                    self.flows.pop(key, None)
            elif name == "OFPGroupMod":
                self.groups[msg.group_id] = SimpleNamespace(group_id=msg.group_id,
                                                            buckets=msg.buckets)
            elif name == "OFPBarrierRequest" and not self.silent:
                self.io.on_barrier_reply(self._reply(xid=xid))
            elif name in ("OFPFlowStatsRequest", "OFPGroupDescStatsRequest"):
                body = list((self.flows if name == "OFPFlowStatsRequest" else self.groups)
                            .values())
                half = len(body) // 2
                self.io.on_multipart(self._reply(xid=xid, body=body[:half],
                                                 flags=ofp.OFPMPF_REPLY_MORE))
                self.io.on_multipart(self._reply(xid=xid, body=body[half:], flags=0))
            elif name == "OFPPacketOut" and msg.data is not None:
                self.io.probe_arrived(0x99, 7, msg.data)
            elif name == "OFPRoleRequest":
                if self.stale_role:
                    self.roles.on_error(self._reply(xid=xid, type=ofp.OFPET_ROLE_REQUEST_FAILED,
                                                    code=0))
                else:
                    self.roles.on_reply(self._reply(xid=xid, role=msg.role))


def all_static(f):
    """Every switch's static entries, as the controller serves a leaf-spine: a Clos."""
    return clos_all_static(as_clos(f))


def static(f, name):
    rules, groups = all_static(f)[f.dpids[name]]
    return [Message("group_add", group=g) for g in groups] + \
        [Message("flow_add", rule=r) for r in rules]


def test_install_confirms_and_tables_read_back(ofp):
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 2.0, f.switch_of_dpid.get)
    sws = {name: Switch(ofp, f.dpids[name], io) for name in ("l0", "s0")}
    for sw in sws.values():
        io.connected(sw)
    batches = {sw.id: static(f, name) for name, sw in sws.items()}
    io.install(batches)
    for name, sw in sws.items():
        kinds = [type(m).__name__ for m in sw.sent]
        assert kinds[-1] == "OFPBarrierRequest" and len(kinds) == len(batches[sw.id]) + 1
        state = io.read_tables(sw.id)  # two multipart parts each
        rules, groups = all_static(f)[f.dpids[name]]
        assert state == SwitchState({r.key: r for r in rules}, {g.group_id: g for g in groups})
    assert not io._barriers and not io._reads and not io._errors  # nothing left registered


def test_rejected_silent_and_missing_switches_name_themselves(ofp):
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 0.3, f.switch_of_dpid.get)
    bad = Switch(ofp, f.dpids["l0"], io, reject=True)
    mute = Switch(ofp, f.dpids["l1"], io, silent=True)
    io.connected(bad)
    io.connected(mute)
    with pytest.raises(InstallError, match=r"switch l0 rejected a rule \(OpenFlow error type"):
        io.install({bad.id: static(f, "l0")})
    start = time.monotonic()
    with pytest.raises(InstallError, match="switch l1 did not confirm its rules within 0.3 s"):
        io.install({mute.id: static(f, "l1")})
    assert 0.25 < time.monotonic() - start < 2.0  # the wait ends by itself (native threads)
    with pytest.raises(InstallError, match="switch l2 is not connected"):
        io.install({f.dpids["l2"]: static(f, "l2")})
    assert io.disconnected(bad) and not io.disconnected(bad)
    with pytest.raises(InstallError, match="switch l0 is not connected"):
        io.read_tables(bad.id)
    assert not io._barriers and not io._errors


def test_many_switches_at_once_fail_each_on_its_own(ofp):
    """An install to several switches names every one that failed (``failed``) and confirms
    the others; tables of several switches are read at once, one gone named alone."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 0.3, f.switch_of_dpid.get)
    good = Switch(ofp, f.dpids["l0"], io)
    bad = Switch(ofp, f.dpids["l1"], io, reject=True)
    mute = Switch(ofp, f.dpids["l2"], io, silent=True)
    for sw in (good, bad, mute):
        io.connected(sw)
    gone = f.dpids["l3"]  # never connected (or left between its read and its repair)
    with pytest.raises(InstallError) as e:
        io.install({gone: static(f, "l3"),
                    **{sw.id: static(f, n) for sw, n in ((good, "l0"), (bad, "l1"),
                                                          (mute, "l2"))}})
    assert set(e.value.failed) == {bad.id, mute.id, gone}
    assert "rejected" in e.value.failed[bad.id] and "0.3 s" in e.value.failed[mute.id]
    assert "l3 is not connected" in e.value.failed[gone]
    assert str(e.value) == e.value.failed[gone]  # the first in the batches' order
    assert len(good.sent) > len(static(f, "l0"))  # the others were still sent theirs
    assert io.disconnected(bad)
    got = io.read_many([good.id, bad.id, mute.id])
    rules, groups = all_static(f)[good.id]
    assert got[good.id] == SwitchState({r.key: r for r in rules}, {g.group_id: g for g in groups})
    assert "l1 is not connected" in str(got[bad.id]) and isinstance(got[mute.id], SwitchState)
    assert not io._barriers and not io._reads and not io._errors


def test_a_full_table_is_told_apart_from_other_refusals(ofp):
    """Issue 59, item 4: a switch that refuses additions only because a flow table is full
    (OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL) is named in ``InstallError.full`` (the
    reconciler then makes room), one that refuses them otherwise is not; the others of the
    install confirm theirs."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 2.0, f.switch_of_dpid.get)
    full = Switch(ofp, f.dpids["l0"], io, limit=2)
    bad = Switch(ofp, f.dpids["l1"], io, reject=True)
    good = Switch(ofp, f.dpids["l2"], io)
    for sw in (full, bad, good):
        io.connected(sw)
    with pytest.raises(InstallError) as e:
        io.install({sw.id: static(f, n) for sw, n in ((full, "l0"), (bad, "l1"), (good, "l2"))})
    assert set(e.value.failed) == {full.id, bad.id} and e.value.full == {full.id}
    assert "table full" in e.value.failed[full.id] and "table full" not in e.value.failed[bad.id]
    assert sum(k[0] == 0 for k in full.flows) == 2  # the first two of table 0 were taken
    assert not io._barriers and not io._errors


@pytest.mark.slow
def test_many_silent_switches_are_waited_for_up_to_the_timeout(ofp):
    """Issue 59, item 2: stragglers are a minority. Of 8 switches, 1 that never confirms is
    given up on soon after the 7 others confirmed (well before a 6 s timeout); 4 that never
    confirm are waited for up to the timeout (2 s: a fabric slow as a whole is not a
    straggler)."""
    f = Clos.generate(2, 6, 1, 0.01, wiring=True)
    names = sorted(f.dpids)
    for quiet, timeout in ((1, 6.0), (4, 2.0)):
        io = Switches(THREADS, timeout, f.switch_of_dpid.get)
        sws = [Switch(ofp, f.dpids[n], io, silent=i < quiet) for i, n in enumerate(names)]
        for sw in sws:
            io.connected(sw)
        start = time.monotonic()
        with pytest.raises(InstallError) as e:
            io.install({sw.id: static(f, n) for sw, n in zip(sws, names)})
        took = time.monotonic() - start
        assert set(e.value.failed) == {sw.id for sw in sws[:quiet]}
        if quiet == 1:  # 0.5 s after the others (or four times what they took)
            assert took < 4.0 and "when the 7 others had" in e.value.failed[sws[0].id], took
        else:
            assert took >= 1.9 and "within 2 s;" in e.value.failed[sws[0].id], took


class Trickling(Switch):
    """A switch whose flow table read is answered ``delay`` seconds late."""

    def __init__(self, *args, delay: float = 0.0, **kw):
        super().__init__(*args, **kw)
        self.delay = delay

    def send_msg(self, msg):
        if type(msg).__name__ != "OFPFlowStatsRequest" or not self.delay:
            return super().send_msg(msg)
        msg.serialize()
        self.sent.append(msg)
        threading.Timer(self.delay, self.events.put, (msg,)).start()


def test_switches_read_together_are_handed_on_together_unless_one_straggles(ofp):
    """Issue 74: 64 switches read at once, answering 3 ms apart, come back in one piece
    (one repair, one install: handed on as each was read, a first start's batches came in
    2-4 installs, each waiting for its barriers under the service lock); with one silent,
    the 63 others are handed on (``ready``) once it was silent as long as they took, and
    it is given up on; with 16 silent (too many to be stragglers: waited for up to the
    timeout), the 48 others are handed on as soon."""
    f = Clos.generate(8, 56, 1, 0.01, wiring=True)
    names = sorted(f.dpids)
    for quiet in (0, 1, 16):
        io = Switches(THREADS, 5.0, f.switch_of_dpid.get)
        sws = [Trickling(ofp, f.dpids[n], io, delay=0.003 * i) for i, n in enumerate(names)]
        for sw in sws[len(sws) - quiet:]:
            sw.events = queue.Queue()  # it answers nothing from now on
        for sw in sws:
            io.connected(sw)
        handed: list[set] = []
        start = time.monotonic()
        got = io.read_many([sw.id for sw in sws], ready=lambda x: handed.append(set(x)))
        took = time.monotonic() - start
        answered = {sw.id for sw in sws[:len(sws) - quiet]}
        if not quiet:
            assert handed == [] and set(got) == answered, [len(x) for x in handed]
            assert not any(isinstance(x, InstallError) for x in got.values())
        elif quiet == 1:
            assert handed == [answered] and set(got) == {sws[-1].id}, [len(x) for x in handed]
            assert "did not send its tables within" in str(got[sws[-1].id]) and took < 4.0
        else:  # a quarter silent: no stragglers, waited for up to the timeout, but not the
            # others: handed on once those were silent as long as the others took
            assert handed == [answered] and len(got) == quiet, [len(x) for x in handed]
            assert all("within 5 s" in str(e) for e in got.values()) and took >= 4.9


def test_a_switch_gone_mid_install_or_read_ends_the_wait_at_once(ofp):
    """A switch lost with its connection (powered off) while the service waits for its barrier
    or its tables: the wait ends when the connection does, not at the timeout, and says so."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 30.0, f.switch_of_dpid.get)
    mute = Switch(ofp, f.dpids["l1"], io, silent=True)
    ok = Switch(ofp, f.dpids["l0"], io)
    io.connected(mute)
    io.connected(ok)
    io.install({ok.id: static(f, "l0")})  # answered before: stands after a disconnection
    threading.Timer(0.2, io.disconnected, (mute,)).start()
    start = time.monotonic()
    with pytest.raises(InstallError, match="switch l1 disconnected before it confirmed its "
                                           "rules; nothing was changed"):
        io.install({ok.id: static(f, "l0"), mute.id: static(f, "l1")})
    assert time.monotonic() - start < 5.0  # not the 30 s timeout
    assert not io._barriers and not io._cut and not io._errors

    io.connected(mute)  # back: its table read waits for a reply that never comes (silent
    mute.events = queue.Queue()  # to reads too: its loop no longer sees the requests)
    threading.Timer(0.2, io.disconnected, (mute,)).start()
    start = time.monotonic()
    with pytest.raises(InstallError, match="switch l1 disconnected while its tables were read"):
        io.read_tables(mute.id)
    assert time.monotonic() - start < 5.0
    assert not io._reads and not io._cut


def test_a_switch_that_reconnects_ends_the_waits_of_its_replaced_connection_at_once(ofp):
    """Issue 59, item 3: the switch reconnects before its old connection is declared dead
    (no disconnection event yet): the install and the table read waiting on the old one end
    as the new one arrives, not at the timeout; the old connection's later end is ignored."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 30.0, f.switch_of_dpid.get)
    old = Switch(ofp, f.dpids["l1"], io, silent=True)
    io.connected(old)
    threading.Timer(0.2, io.connected, (Switch(ofp, old.id, io),)).start()
    start = time.monotonic()
    with pytest.raises(InstallError, match="switch l1 disconnected before it confirmed"):
        io.install({old.id: static(f, "l1")})
    assert time.monotonic() - start < 5.0  # not the 30 s timeout
    assert not io._barriers and not io._cut and not io._errors

    old = io.get(old.id)
    old.events = queue.Queue()  # silent to reads too
    new = Switch(ofp, old.id, io)
    threading.Timer(0.2, io.connected, (new,)).start()
    start = time.monotonic()
    with pytest.raises(InstallError, match="switch l1 disconnected while its tables were read"):
        io.read_tables(old.id)
    assert time.monotonic() - start < 5.0
    assert not io._reads and not io._cut
    assert not io.disconnected(old) and io.holds(new)  # the old one's end changes nothing
    io.install({new.id: static(f, "l1")})  # the new connection confirms its own


def test_concurrent_senders_get_distinct_xids(ofp):
    """Installs, statistics requests and packet-outs from many threads: every message of a
    datapath gets its own xid, so no reply is taken for another's."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 5.0, f.switch_of_dpid.get)
    sw = Switch(ofp, f.dpids["l0"], io)
    io.connected(sw)
    errors = []

    def work(i):
        try:
            for _ in range(5):
                io.install({sw.id: [Message("group_add", group=GroupEntry(
                    sw.id, 1000 + i, ((("output", 1),),)))]})
                io.request_stats()
                io.packet_out(sw.id, 1, b"\x00" * 60)
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    deadline = time.monotonic() + 10  # packet-outs leave from the sender
    while len(sw.sent) < 8 * 5 * 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    xids = [m.xid for m in sw.sent]
    assert len(xids) == 8 * 5 * 6 and len(set(xids)) == len(xids)


def test_a_packet_out_never_waits_for_a_full_send_queue(ofp):
    """A datapath whose send blocks (its queue full): packet-outs return at once, and leave
    in order once it drains; a caller holding a lock (the service's) is not held up, and
    another switch's packet-outs leave meanwhile."""
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    io = Switches(THREADS, 5.0, f.switch_of_dpid.get)
    sw, other = Switch(ofp, f.dpids["l0"], io), Switch(ofp, f.dpids["l1"], io)
    drained = threading.Event()
    blocking_send = sw.send_msg

    def send_msg(msg):
        assert drained.wait(10)
        blocking_send(msg)
    sw.send_msg = send_msg
    io.connected(sw)
    io.connected(other)
    t0 = time.monotonic()
    for i in range(20):
        io.packet_out(sw.id, 1, bytes([i]) * 60)
    io.packet_out(other.id, 1, b"\x07" * 60)
    assert time.monotonic() - t0 < 1.0 and sw.sent == []
    deadline = time.monotonic() + 10
    while not other.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(other.sent) == 1 and sw.sent == []
    drained.set()
    deadline = time.monotonic() + 10
    while len(sw.sent) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [m.data[0] for m in sw.sent] == list(range(20))
    with pytest.raises(InstallError, match="not connected"):
        io.packet_out(0x999, 1, b"\x00" * 60)


def test_probe_batches_collect_arrivals_and_resend_lost_ones(ofp):
    f = as_clos(Clos.generate(2, 4, 2, 0.01, wiring=True))  # as the controller serves it
    io = Switches(THREADS, 0.3, f.switch_of_dpid.get)
    sw = Switch(ofp, f.dpids["l0"], io)
    io.connected(sw)
    probes = make_probes(f, ("h0_0", "h1_0", 17), range(PORT_MIN, PORT_MIN + 300), 1)
    got = io.probe(probes)
    assert got == {p.token: (0x99, 7) for p in probes}  # two batches (256 + 44)
    outs = [m for m in sw.sent if type(m).__name__ == "OFPPacketOut"]
    assert len(outs) == 300 and all(m.actions[0].port == sw.ofproto.OFPP_TABLE for m in outs)
    assert io.probe_arrived(1, 1, probes[0].data)  # a late probe is still no host traffic
    assert not io.probe_arrived(1, 1, b"\x00" * 60)
    sw.events = queue.Queue()  # the switch stops answering: every probe lost, sent twice
    assert io.probe(probes[:3]) == {}
    assert len([m for m in sw.sent if type(m).__name__ == "OFPPacketOut"]) == 300 + 6


class Cluster:
    def __init__(self):
        self.role, self.generation, self.switch_roles, self.took = "master", 3, {}, []
        self.store = SimpleNamespace(load=lambda: {"jobs": []})
        self.shares = None  # one master of every switch

    def switch_role(self, dpid, role):
        self.switch_roles[dpid] = role

    def took_over(self, generation, stats):
        self.took.append((generation, stats))


class Service:
    def __init__(self):
        self.calls = []

    def stand_by(self):
        self.calls.append("stand_by")

    def take_over(self, doc):
        self.calls.append(("take_over", doc))
        return {"switches": 2, "messages": 0}


def test_roles_ask_every_switch_then_take_over(ofp):
    io = Switches(THREADS, 0.5)
    cluster, service = Cluster(), Service()
    roles = Roles(cluster, service, io)
    sws = [Switch(ofp, 1, io), Switch(ofp, 2, io, stale_role=True)]
    for sw in sws:
        sw.roles = roles
        io.connected(sw)
    roles.apply("master", 3)
    assert service.calls == [("take_over", {"jobs": []})]
    assert cluster.switch_roles[1] == "master"
    assert cluster.switch_roles[2] == "master refused: a newer generation is known to the switch"
    assert cluster.took[0][0] == 3 and cluster.took[0][1]["role_requests"] == 2
    requests = [m for sw in sws for m in sw.sent if type(m).__name__ == "OFPRoleRequest"]
    assert [(m.role, m.generation_id) for m in requests] == \
        [(sws[0].ofproto.OFPCR_ROLE_MASTER, 3)] * 2
    roles.apply("slave", 3)  # not the cluster's current role: a newer change follows
    assert len(service.calls) == 1
    cluster.role, cluster.generation = "slave", 4
    roles.apply("slave", 4)
    assert service.calls[-1] == "stand_by" and cluster.switch_roles[1] == "slave"
    roles.on_disconnected(1)
    assert cluster.switch_roles[1] is None
    assert not roles._waits
