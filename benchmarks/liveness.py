"""The controller's CPU for echoes through the switches' data planes (issue 59, item 11): pure
core, fake switches, no root. JSON in bench/liveness.json.

On a k-ary fat-tree (k = 16: 320 switches) and the paper's leaf-spine (32 x 64 x 16), each
declared, every switch connected and synchronised, a ``RouteService`` on ``FakeSwitches`` with
a manual clock and a 128-host ring running (``benchmarks.controlplane``'s, across the pods):

* ``rounds``: ``--rounds`` echo rounds, one every ``--interval`` seconds of the clock
  (``RouteService.echo_round``: the last round's echoes judged, this round's signed and sent),
  each echo carried through the fake switches' tables (``fake_switch.lldp_packet_ins``; not
  timed: the switches' work) and handed back as packet-ins in the shell's batches
  (``core.PACKET_BATCH``: guard, liveness). Per round: echoes, process CPU to send and to
  read them back; ``core_share``: their sum over the interval, the share of one core the
  controller's Python spends on them at that rate;
* ``ryu_per_echo_us``: Ryu's own CPU per echo, a packet-out encoded and a packet-in parsed
  (the shell's event dispatch and socket work are not in it);
* ``failure``: the aggregation switch (two tiers: the spine) most ring routes cross stops
  forwarding, its connection open: rounds until no route crosses it (``detected_s``, on the
  clock), and the process CPU of the round that judged it and re-planned the ring.

    python -m benchmarks.liveness --fat-tree 16 [--rounds 50] [--out bench/liveness.json]
"""
from __future__ import annotations

import argparse
import importlib
import json
import struct
import sys
import time

from benchmarks.controlplane import fat_tree, leaf_spine, ring_hosts
from benchmarks.scale import busiest_middle
from controller.discovery.lldp import ECHO_INTERVAL
from controller.service import api
from controller.service.route_service import RouteService
from controller.shell.core import PACKET_BATCH
from emulation.harness.busy_service import ManualClock
from emulation.harness.fake_switch import FakeSwitches, lldp_packet_ins


def cpu() -> float:
    return time.process_time()


class Bench:
    def __init__(self, fabric, interval: float):
        self.f, self.interval = fabric, interval
        self.clock = ManualClock()
        self.sw = FakeSwitches(fabric.dpids.values(), fabric)
        self.svc = RouteService(self.sw, fabric, clock=self.clock, sleep=self.clock.sleep)
        self.svc.finder.liveness.interval = interval
        for name in fabric.switches():
            self.svc.switch_connected(fabric.dpids[name],
                                      {p: True for p in fabric.ports[name].values()})
        code, view = api.handle(self.svc, "POST", "/v1/jobs", json.dumps(
            {"id": "ring", "ranks": ring_hosts(fabric), "bytes": 1e9}).encode())
        if code != 201:
            raise RuntimeError(f"POST ring: {code} {view}")
        self.routes = view["routes"]
        self.dead: set[int] = set()
        self.sw.packets_out.clear()
        self.svc.tick()  # one LLDP round: every cable seen, as the declared check wants
        self.svc.packets_in(lldp_packet_ins(fabric, self.sw, self.sw.packets_out))

    def round(self) -> tuple[float, float, int]:
        """One echo round: (CPU to send, CPU to read back, echoes)."""
        self.sw.packets_out.clear()
        self.clock.sleep(self.interval)
        t0 = cpu()
        self.svc.echo_round()
        t1 = cpu()
        frames = list(self.sw.packets_out)
        packets = lldp_packet_ins(self.f, self.sw, frames, self.dead)
        t2 = cpu()
        for k in range(0, len(packets), PACKET_BATCH):
            self.svc.packets_in(packets[k:k + PACKET_BATCH])
        return t1 - t0, cpu() - t2, len(frames)

    def crossing(self, switch: str) -> bool:
        return any(switch in r["path"] for r in
                   api.handle(self.svc, "GET", "/v1/routes")[1]["routes"])


def ryu_per_echo_us(n: int = 2000) -> float | None:
    """Ryu's CPU for one echo: its packet-out encoded, its packet-in parsed (microseconds)."""
    try:
        parser_mod = importlib.import_module("ryu.ofproto.ofproto_parser")
        ofp = importlib.import_module("ryu.ofproto.ofproto_v1_3")
        parser = importlib.import_module("ryu.ofproto.ofproto_v1_3_parser")
    except ImportError:
        return None
    from controller.discovery.guard import Guard
    from controller.shell import translate

    class Datapath:
        id, ofproto, ofproto_parser, xid = 0x10001, ofp, parser, 0

        def set_xid(self, msg):
            self.xid += 1
            msg.set_xid(self.xid)
    dp, guard = Datapath(), Guard(b"k" * 32)
    frame, _nonce = guard.echo(dp.id, 3, 100.0)
    match = bytearray()
    parser.OFPMatch(in_port=3).serialize(match, 0)
    body = struct.pack("!IHBBQ", ofp.OFP_NO_BUFFER, len(frame), ofp.OFPR_ACTION, 0, 0)
    size = 8 + len(body) + len(match) + 2 + len(frame)
    packet_in = struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_PACKET_IN, size, 1) + body \
        + bytes(match) + b"\x00\x00" + frame
    t0 = cpu()
    for _ in range(n):
        msg = translate.packet_out(dp, 3, frame)
        dp.set_xid(msg)
        msg.serialize()
        got = parser_mod.msg(dp, *parser_mod.header(packet_in), packet_in)
        assert got.data == frame
    return round((cpu() - t0) / n * 1e6, 2)


def run(name: str, fabric, rounds: int, interval: float) -> dict:
    b = Bench(fabric, interval)
    while b.clock() < 1000.0 + 3.0:  # every switch proven; discovery's quiet period passed
        b.round()
    sends, reads, echoes = [], [], []
    for _ in range(rounds):
        s, r, n = b.round()
        sends.append(s)
        reads.append(r)
        echoes.append(n)
    per_round = (sum(sends) + sum(reads)) / rounds
    middle = busiest_middle(fabric, b.routes)
    b.dead.add(fabric.dpids[middle])
    b.sw.silent.add(fabric.dpids[middle])
    t0, worst = b.clock(), 0.0
    while b.crossing(middle) and b.clock() - t0 < 5.0:
        s, r, _n = b.round()
        worst = max(worst, s + r)
    return {"fabric": name, "switches": len(fabric.dpids), "interval_s": interval,
            "rounds": rounds, "echoes_per_round": round(sum(echoes) / rounds, 1),
            "echoes_per_s": round(sum(echoes) / rounds / interval),
            "send_cpu_ms": round(sum(sends) / rounds * 1e3, 3),
            "read_cpu_ms": round(sum(reads) / rounds * 1e3, 3),
            "core_share": round(per_round / interval, 4),
            "failure": {"switch": middle, "detected_s": round(b.clock() - t0, 3),
                        "left": not b.crossing(middle),
                        "round_cpu_ms": round(worst * 1e3, 1)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.liveness",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--fat-tree", type=int, default=16, metavar="K", help="even k (16)")
    ap.add_argument("--rounds", type=int, default=50, help="echo rounds measured (50)")
    ap.add_argument("--interval", type=float, default=ECHO_INTERVAL, metavar="S",
                    help=f"seconds between rounds ({ECHO_INTERVAL:g}, the controller's)")
    ap.add_argument("--out", default=None, help="JSON results (bench/liveness.json)")
    args = ap.parse_args(argv)
    result = {"command": f"python -m benchmarks.liveness --fat-tree {args.fat_tree} "
                         f"--rounds {args.rounds}", "python": sys.version.split()[0],
              "ryu_per_echo_us": ryu_per_echo_us(), "fabrics": []}
    for name, build in ((f"fat-tree k={args.fat_tree}", lambda: fat_tree(args.fat_tree)),
                        ("leaf-spine 32 x 64 x 16", leaf_spine)):
        result["fabrics"].append(run(name, build(), args.rounds, args.interval))
        print(json.dumps(result["fabrics"][-1]), flush=True)
    print(json.dumps({"ryu_per_echo_us": result["ryu_per_echo_us"]}))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
