"""What learning a job's traffic costs at the paper's scale (``make bench``): bench/learning.json.

The fabric of the paper (64 leaves x 32 spines, 32 hosts a leaf, 2,048 hosts, 100 Gb/s links)
is fully busy: two jobs of 1,024 ranks, each a ring whose every hop crosses leaves (rank r on
leaf r mod 64), every host sending at line rate, RoCEv2 frames of 4,158 bytes (4,096-byte
payload MTU, the worst case for sampling load: more packets than 9,000-byte frames). For each
sampling setting, sFlow samples are drawn as a switch draws them (Poisson counts per pair and
sampling point per window), packed 7 to a datagram as an agent packs them (28 + 7 x 192 =
1,372 bytes with 128-byte headers), encoded as sFlow v5, and fed through the real decoder
(``SflowCollector.feed``) into the real learner. Measured: the controller CPU per second of
traffic (process time of decoding and aggregating, socket receive not included) and the time
until the learner reports the job's 1,024 pairs, exactly and steady. Computed beside it: the
alternative of OpenFlow counters on per-pair entries (entries per leaf, flow-statistics bytes).

Lifecycle (issue 36, ``--lifecycle``; root, Open vSwitch, gloo and Open MPI): jobs learned across
their ordinary life with real parts (``emulation/harness/lifecycle.py``): on each fabric (two
tiers and the k = 4 fat-tree, discovered with no configuration and declared) a controller
started cold, then every case one after the other (members only, the correct declaration, the
ring declared the other way, post -> launch -> pause -> relaunch -> delete -> post again under
a new id -> launch, two jobs of disjoint hosts at once), each case first on one fabric (a fresh
controller) and after others on the rest. Per job: seconds of traffic until it acted on what it
measured, whether by the end of its second launch, its later launches' median over the correct
declaration's (run in the same invocation), and re-plans after it was learned.
``--lifecycle-only`` measures that section alone and keeps the file's others; without
``--lifecycle`` the file's lifecycle section is kept.

Freeze (issue 74, ``--freeze-only``; also in every run): windows a low-rate job's learning
stays frozen after one sFlow datagram at 1 in 2^20 or one agent report of 60 s at line rate,
as counted before the bounds of ``measurement/usual.py`` and now (``freeze``).

Settings: 1 in 8,192 is a common switch default (Extreme Networks' documented default, and
the rate the issue names); ``all`` samples on every switch (what Open vSwitch does: bridge
wide), ``edge`` only on the leaves' host-facing ports (a packet is sampled once, where it
enters the fabric: per-port sFlow, as data-centre switches offer). Sampling is shared by
all jobs, so its cost does not grow with the number of jobs or pairs, only with traffic.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import socket
import struct
import sys
import time
from collections import defaultdict

import numpy as np

from controller.measurement.estimate import MatrixEstimate
from controller.measurement.learner import TrafficLearner, clos_samplers, compare
from controller.measurement.sflow import SflowCollector
from controller.model.clos import Clos

FRAME = 4158  # 4,096 payload + Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4
HEADER_BYTES = 128
PER_DATAGRAM = 7
DATAGRAM_HEADER = 28  # version, address type, IPv4 agent, sub-agent, sequence, uptime, count
SETTINGS = [(8192, "all"), (8192, "edge"), (65536, "edge"), (262144, "edge"), (1 << 20, "edge")]
WINDOW_S = 2.0
START_S = 0.7  # the job starts this far into a window (the first window is partial)
WINDOWS = 4
MAX_WINDOWS = 30  # learning-time runs stop once learned, or after this many windows
LEARNING_TIMES = [("ring", 64), ("ring", 1024), ("all-to-all", 64)]
LEARNING_TIME_SETTINGS = [(8192, "all"), (65536, "edge")]
ESTIMATE_DEFAULTS = {k: v for k, v in vars(MatrixEstimate()).items()
                     if isinstance(v, (int, float)) and k in (
                         "active_share", "min_samples", "share", "silent_windows",
                         "steady_windows")}
# OpenFlow 1.3 per-pair counting entry in a flow-statistics reply: ofp_flow_stats 48 bytes,
# match eth_type + ipv4_src + ipv4_dst 32 bytes (padded), goto-table instruction 8 bytes
FLOW_STATS_ENTRY = 88
MULTIPART_MAX = 65535 - 16
TYPICAL_BUDGET = 4096  # "a few thousand" flow entries: the order of a switch's TCAM


def placement(fabric: Clos, ranks: int, offset: int = 0) -> list[str]:
    """Rank r on leaf r mod L, host slot offset + r // L: every ring hop crosses leaves."""
    leaves = fabric.leaves
    return [fabric.hosts_of_leaf[leaves[r % len(leaves)]][offset + r // len(leaves)]
            for r in range(ranks)]


def _sample_blob(src: str, dst: str, sport: int, rate: int, in_if: int) -> bytes:
    """One flow sample (format 1) holding a RoCEv2 packet's first 128 bytes."""
    eth = b"\x02\0\0\0\0\x01" + b"\x02\0\0\0\0\x02" + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, FRAME - 18, 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack("!HHHH", sport, 4791, FRAME - 38, 0)
    header = (eth + ip + udp + b"\x00" * HEADER_BYTES)[:HEADER_BYTES]
    record = struct.pack("!IIII", 1, FRAME, 4, len(header)) + header
    body = struct.pack("!8I", 1, 1, rate, 0, 0, in_if, 1, 1) + struct.pack("!II", 1,
                                                                          len(record)) + record
    return struct.pack("!II", 1, len(body)) + body


class _Clock:
    now = 0.0


def ring_pairs(job: list[str]) -> list[tuple[str, str, float]]:
    """(source, destination, share of the source's line rate) of a ring: rank r -> r + 1."""
    return [(h, job[(i + 1) % len(job)], 1.0) for i, h in enumerate(job)]


def alltoall_pairs(job: list[str]) -> list[tuple[str, str, float]]:
    """Every rank to every other, its line rate split evenly (a mixture-of-experts layer)."""
    return [(a, b, 1.0 / (len(job) - 1)) for a in job for b in job if a != b]


def run_setting(fabric: Clos, jobs: list[list[tuple[str, str, float]]], rate: int,
                where: str, gbps: float, windows: int = WINDOWS, window_s: float = WINDOW_S,
                seed: int = 1) -> dict:
    """Feed up to ``windows`` windows of the busy fabric's samples through the decoder, the
    learner and the first job's estimate (``measurement.estimate``, its defaults): the cost,
    and when the first job's matrix was learned exactly (all its pairs, nothing else,
    steady). ``jobs``: each a list of (source, destination, share of line rate)."""
    rng = np.random.default_rng(seed)
    leaf_of = {fabric.address(h): fabric.leaf_of(h) for h in fabric.hosts}
    pps = gbps * 1e9 / 8 / FRAME
    points = {"all": 3, "edge": 1}[where]
    spines = fabric.planes[0].aggs[0]  # the leaf-spine's
    pairs = []  # (src ip, dst ip, sampling switches, packets per second)
    for job in jobs:
        for h, nxt, share in job:
            a, b = fabric.leaf_of(h), fabric.leaf_of(nxt)
            spine = spines[(len(pairs) * 7919) % len(spines)]  # ECMP pick
            switches = [a, spine, b][:points] if a != b else [a]
            pairs.append((fabric.address(h), fabric.address(nxt), switches, pps * share))
    blobs = [[_sample_blob(s, d, 49152 + i % 16384, rate, k + 1) for k in range(len(sw))]
             for i, (s, d, sw, _) in enumerate(pairs)]
    agents = {sw: socket.inet_aton(f"10.255.{i // 256}.{i % 256}")
              for i, sw in enumerate(spines + fabric.leaves)}
    clock = _Clock()
    learner = TrafficLearner(window_s=window_s, samplers=clos_samplers(leaf_of, where))
    collector = SflowCollector(on_samples=lambda s: learner.observe(s, clock.now))
    estimate = MatrixEstimate()
    target = {(s, d) for s, d, _, _ in pairs[:len(jobs[0])]}  # the first job's pairs
    members = {x for p in target for x in p}
    rates = np.array([[p[3]] for p in pairs])
    cpu = fed_samples = fed_datagrams = 0
    learned_at = None
    per_window = []
    seq = defaultdict(int)
    folded = -1
    for w in range(windows):
        active = window_s - START_S if w == 0 else window_s
        counts = rng.poisson(rates * active / rate, size=(len(pairs), points))
        per_switch = defaultdict(list)
        for i, (_s, _d, switches, _r) in enumerate(pairs):
            for k, sw in enumerate(switches):
                if counts[i, k]:
                    per_switch[sw].extend([blobs[i][k]] * int(counts[i, k]))
        clock.now = w * window_s + window_s / 2
        for sw, items in per_switch.items():
            grams = []
            for c in range(0, len(items), PER_DATAGRAM):
                chunk = items[c:c + PER_DATAGRAM]
                seq[sw] += 1
                grams.append(struct.pack("!II", 5, 1) + agents[sw] +
                             struct.pack("!4I", 0, seq[sw], 0, len(chunk)) + b"".join(chunk))
            t = time.process_time()
            for g in grams:
                collector.feed(g)
            cpu += time.process_time() - t
            fed_datagrams += len(grams)
            fed_samples += len(items)
        t = time.process_time()
        for win in learner.closed(folded, (w + 1) * window_s):
            b = {p: v for p, v in win.bytes.items() if p[0] in members and p[1] in members}
            estimate.fold(b, {p: win.samples[p] for p in b})
            folded = win.index
        cpu += time.process_time() - t
        found = set(estimate.matrix())
        exact = found == target
        per_window.append({"window": w, "found_pairs": len(found & target),
                           "extra_pairs": len(found - target), "steady": estimate.steady,
                           "exact": exact})
        if learned_at is None and exact and estimate.steady:
            learned_at = (w + 1) * window_s - START_S
            break
    assert collector.errors == 0 and collector.callback_errors == 0
    traffic_s = len(per_window) * window_s - START_S
    samples_s = sum(len(sw) * r for _, _, sw, r in pairs) / rate
    backwards = [(b, a) for a, b in target]
    check = compare(backwards, estimate.matrix()) if estimate.matrix() else None
    lam = min(r for *_, r in pairs[:len(jobs[0])]) * window_s / rate * points
    return {
        "sampling": f"1 in {rate}", "rate": rate, "where": where, "sampling_points": points,
        "pairs": len(target), "samples_per_s": round(samples_s),
        "datagrams_per_s": round(samples_s / PER_DATAGRAM),
        "sflow_mbit_s": round(samples_s / PER_DATAGRAM * (DATAGRAM_HEADER + PER_DATAGRAM * 192)
                              * 8 / 1e6, 1),
        "fed_samples": fed_samples, "fed_datagrams": fed_datagrams,
        "controller_cpu_s": round(cpu, 3), "traffic_s": traffic_s,
        "cpu_per_traffic_s": round(cpu / traffic_s, 3),
        "us_per_sample": round(cpu / max(fed_samples, 1) * 1e6, 2),
        "samples_per_pair_per_window": round(lam, 2),
        "p_pair_below_min_samples": _poisson_below(lam, 4),
        "learned_after_s": learned_at,
        "windows_to_learn": None if learned_at is None else math.ceil(
            (learned_at + START_S) / window_s),
        "windows": per_window,
        "declared_backwards": {"share": round(check.share, 3), "says": check.description}
        if check else None,
        "flow_entries_added": 0,
    }


def _poisson_below(lam: float, k: int) -> float:
    """P(X < k) for X ~ Poisson(lam): a pair missing from a window's steady check."""
    return float(sum(math.exp(-lam) * lam ** i / math.factorial(i) for i in range(k)))


def recommend(results: list[dict], pairs: int, share: float = 0.25) -> dict | None:
    """The sparsest edge setting that learned here and would still learn if every pair sent
    only ``share`` of line rate (a communication duty cycle of 25%, or a quarter of a link):
    fewer than 1% odds that any pair misses the 4 samples of a steady window."""
    fits = [r for r in results if r["where"] == "edge" and r["learned_after_s"] is not None
            and 2 * pairs * _poisson_below(r["samples_per_pair_per_window"] * share, 4) < 0.01]
    if not fits:
        return None
    best = max(fits, key=lambda r: r["rate"])
    return {"sampling": best["sampling"], "where": best["where"],
            "cpu_per_traffic_s": best["cpu_per_traffic_s"],
            "datagrams_per_s": best["datagrams_per_s"], "learned_after_s": best["learned_after_s"],
            "why": f"the sparsest setting whose pairs still get 4 samples a window at "
                   f"{share:.0%} of line rate"}


def per_pair_entries(fabric: Clos, job: list[str], window_s: float) -> dict:
    """The alternative: an OpenFlow counting entry per (member on this leaf, member on another
    leaf) pair at every leaf, polled once a window."""
    on_leaf = defaultdict(int)
    for h in job:
        on_leaf[fabric.leaf_of(h)] += 1
    per_leaf = {leaf: n * (len(job) - n) for leaf, n in on_leaf.items()}
    worst = max(per_leaf.values())
    hosts = len(fabric.hosts_of_leaf[fabric.leaves[0]])
    any_pair = hosts * (len(fabric.hosts) - hosts)
    reply = sum(per_leaf.values()) * FLOW_STATS_ENTRY
    return {
        "entries_per_leaf_for_this_job": worst,
        "entries_per_leaf_for_any_job": any_pair,
        "typical_budget": TYPICAL_BUDGET,
        "times_over_budget": round(worst / TYPICAL_BUDGET, 1),
        "flow_stats_reply_bytes_per_window": reply,
        "flow_stats_mbit_s": round(reply * 8 / window_s / 1e6, 1),
        "multipart_messages_per_window": sum(math.ceil(n * FLOW_STATS_ENTRY / MULTIPART_MAX)
                                             for n in per_leaf.values()),
        "note": "computed from the placement; an entry counts one pair at its ingress leaf",
    }


def run(spines=32, leaves=64, hosts_per_leaf=32, ranks=1024, gbps=100.0, settings=None,
        windows=WINDOWS, window_s=WINDOW_S, learning_times=LEARNING_TIMES) -> dict:
    fabric = Clos.generate(spines, leaves, hosts_per_leaf, gbps, wiring=True)
    if 2 * ranks > len(fabric.hosts) or ranks % leaves:
        raise ValueError(f"two jobs of {ranks} ranks need {2 * ranks} hosts, a multiple of "
                         f"{leaves} ranks each; the fabric has {len(fabric.hosts)}")
    job = placement(fabric, ranks)
    other = placement(fabric, ranks, offset=ranks // leaves)
    results = [run_setting(fabric, [ring_pairs(job), ring_pairs(other)], rate, where, gbps,
                           windows, window_s)
               for rate, where in (settings or SETTINGS)]
    times = []
    for kind, n in learning_times:
        members = placement(fabric, n)
        flows = ring_pairs(members) if kind == "ring" else alltoall_pairs(members)
        for rate, where in LEARNING_TIME_SETTINGS:
            r = run_setting(fabric, [flows], rate, where, gbps, MAX_WINDOWS, window_s)
            times.append({"pattern": kind, "ranks": len(members), "pairs": r["pairs"],
                          "sampling": r["sampling"], "where": where,
                          "samples_per_pair_per_window": r["samples_per_pair_per_window"],
                          "learned_after_s": r["learned_after_s"],
                          "windows_to_learn": r["windows_to_learn"]})
    return {
        "recommendation": recommend(results, 2 * ranks),
        "fabric": {"leaves": leaves, "spines": spines, "hosts": len(fabric.hosts),
                   "link_gbps": gbps},
        "traffic": {"jobs": 2, "ranks_per_job": ranks, "pattern": "ring, every hop across "
                    "leaves", "frame_bytes": FRAME, "load": "every host at line rate",
                    "packets_per_s_per_host": round(gbps * 1e9 / 8 / FRAME)},
        "estimate": {"window_s": window_s, **ESTIMATE_DEFAULTS,
                     "job_starts_s_into_window": START_S},
        "sflow": results,
        "learning_time": times,
        "openflow_per_pair_counters": per_pair_entries(fabric, job, window_s),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }


FREEZE_SAMPLING = 256  # the low-rate job's sampling: about 12 samples a pair a window


def _frozen(states: list[str], at: int) -> int:
    """Windows after window ``at`` until the job's first active one (all: never)."""
    after = states[at + 1:]
    return next((i for i, c in enumerate(after) if c == "active"), len(after))


def freeze(gbps: float = 10.0, pair_mbps: float = 36.0, window_s: float = WINDOW_S,
           horizon: int = 400, poisoned_at: int = 10) -> dict:
    """Issue 74, item 6: windows a low-rate job's learning stays frozen (its windows too
    quiet to count) after one sFlow datagram of one 9,000-byte sample at 1 in 2^20, and after
    one agent report claiming 60 s at line rate a second after its previous one; as they
    were counted before the bounds of ``measurement/usual.py`` (the sample at its rate, the
    report at its claim) and as they are now. An 8-rank ring across 4 leaves (2 x 4 x 2,
    ``gbps`` links), each pair ``pair_mbps``, sampled at 1 in ``FREEZE_SAMPLING`` on every
    switch (datagrams of 7 samples) or reported by every host each second."""
    from types import SimpleNamespace

    from controller.errors import InputError
    from controller.measurement.sflow import PacketSample
    from controller.service import hostcounts
    f = Clos.generate(2, 4, 2, gbps, wiring=True)
    ring = sorted(f.hosts, key=lambda h: (h.split("_")[1], h))
    ip = f.host_ip
    pairs = [(ip[h], ip[ring[(i + 1) % len(ring)]]) for i, h in enumerate(ring)]
    per_window = pair_mbps * 1e6 / 8 * window_s
    leaf_of = {ip[h]: f.hosts[h] for h in f.hosts}
    n = round(per_window * 3 / (9000 * FREEZE_SAMPLING))  # 3 sampling points a pair
    datagram = [PacketSample("10.255.0.1", 0, 0, 1, FREEZE_SAMPLING, 0, 0, 1, 2, 9000, a, b,
                             6, 40000, 5201) for a, b in pairs for _ in range(n)]
    poison = PacketSample("10.255.0.1", 0, 0, 1, 1 << 20, 0, 0, 1, 2, 9000, *pairs[0], 6,
                          40000, 5201)

    def run(case: str, before: bool) -> dict:
        learner = TrafficLearner(window_s, samplers=clos_samplers(leaf_of, "all"))
        est, states, folded, extra, refused = MatrixEstimate(), [], -1, 0.0, None
        for w in range(horizon):
            t = w * window_s + 0.1
            if case == "sflow":
                for i in range(0, len(datagram), PER_DATAGRAM):
                    learner.observe(datagram[i:i + PER_DATAGRAM], t)
                if w == poisoned_at:
                    if before:  # counted at its rate, as the learner did
                        extra = 9000 * (1 << 20) / 3
                    else:
                        learner.observe([poison], t)
            else:
                service = SimpleNamespace(state=SimpleNamespace(fabric=f),
                                          learning=SimpleNamespace(learner=learner))
                for k in range(round(window_s)):
                    now = t + k
                    for h, (a, b) in zip(ring, pairs):
                        doc = {"interval_s": 1.0, "pairs": [
                            {"src": a, "dst": b, "bytes": per_window / window_s,
                             "packets": 100}]}
                        if w == poisoned_at and k == 0 and h == ring[0]:  # instead
                            doc = {"interval_s": 60.0, "pairs": [
                                {"src": a, "dst": b, "bytes": f.link_bps("host") * 60,
                                 "packets": 10 ** 6}]}
                            if before:  # believed at its claim, as hostcounts did
                                learner.count(hostcounts.parse(doc, f, h)[0], now)
                                continue
                        try:
                            hostcounts.counted(service, h, doc, now)
                        except InputError as e:
                            refused = str(e)
            for win in learner.closed(folded, (w + 1) * window_s + 0.01):
                folded = win.index
                b = {p: v for p, v in win.bytes.items() if p in set(pairs)}
                if win.index == poisoned_at and extra:
                    b[pairs[0]] += extra
                states.append(est.fold(b, {p: win.samples[p] for p in b}))
            if len(states) > poisoned_at + 1 and states[-1] == "active" and \
                    w > poisoned_at:
                break
        frozen = _frozen(states, poisoned_at)
        return {"frozen_windows": frozen, "frozen_s": round(frozen * window_s, 1),
                **({"refused": refused} if refused else {}),
                **({"clipped_samples": learner.clipped} if case == "sflow" else {})}

    return {"job": {"ranks": len(ring), "pair_mbps": pair_mbps, "link_gbps": gbps,
                    "sampling": f"1 in {FREEZE_SAMPLING}", "window_s": window_s,
                    "poisoned_window": poisoned_at},
            "sflow_datagram_at_2^20": {"before": run("sflow", True),
                                       "now": run("sflow", False)},
            "report_of_60s_at_line_rate": {"before": run("report", True),
                                           "now": run("report", False)}}


# shape, declared, library, link Mbit/s, tensor MiB, cases (the first meets a fresh controller)
LIFECYCLE = [
    ("leaf-spine", False, "gloo", 20.0, 4, ["members", "wrong", "repost", "two_jobs", "correct"]),
    ("leaf-spine", True, "mpi", 20.0, 4, ["wrong", "correct", "members", "two_jobs", "repost"]),
    ("fat-tree", False, "gloo", 10.0, 2, ["two_jobs", "members", "correct", "wrong", "repost"]),
    ("fat-tree", True, "mpi", 10.0, 2, ["correct", "repost", "two_jobs", "wrong", "members"]),
]


def lifecycle(progress, sequences=LIFECYCLE) -> dict:
    """The lifecycle section (module docstring): one ``lifecycle.sequence`` per fabric, and
    per case the figures of the issue's targets over every fabric it ran on."""
    from emulation.harness import collectives as co
    from emulation.harness import lifecycle as lc
    run_dir = os.path.join(co.LOG_ROOT, "bench-lifecycle-" + time.strftime("%Y%m%d-%H%M%S"))
    out, t0 = [], time.monotonic()
    for k, (shape, declared, library, bw, mib, cases) in enumerate(sequences):
        why = co.missing(library)
        if why:
            out.append({"fabric": f"{shape}, {'declared' if declared else 'zero config'}",
                        "library": library, "skipped": why})
            continue
        t = time.monotonic()
        with lc.Emulation(shape, declared, bw, os.path.join(run_dir, f"emu{k}"),
                          progress=progress) as emu:
            res = lc.sequence(emu, library, cases, mib=mib, iters=3, pause_s=6.0,
                              logdir=os.path.join(run_dir, f"seq{k}"), progress=progress)
        res.update(link_mbps=bw, wall_s=round(time.monotonic() - t), failures=lc.failures(res))
        out.append(res)
    jobs = [(c["case"], j) for r in out for c in r.get("cases", ()) for j in c["jobs"]]
    per_case = {}
    for name in lc.CASES:
        js = [j for c, j in jobs if c == name]
        if js:
            learned = [j["traffic_s_until_learned"] for j in js
                       if j["traffic_s_until_learned"] is not None]
            per_case[name] = {
                "jobs": len(js), "learned_by_second_launch": sum(
                    j["learned_by_second_launch"] for j in js),
                "traffic_s_until_learned_max": max(learned) if learned else None,
                "later_over_correct_max": max(j["over_correct"] for j in js),
                "replans_after_learned_max": max(j["replans_after_learned"] or 0 for j in js)}
    return {"targets": {"learned_by_launch": lc.LEARNED_BY, "later_over_correct":
                        lc.SAME_SPEED, "replans_after_learned": 1},
            "launches": lc.LAUNCHES, "cases": per_case, "sequences": out,
            "failures": [f for r in out for f in r.get("failures", ())],
            "wall_s": round(time.monotonic() - t0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.learning",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench/learning.json")
    ap.add_argument("--quick", action="store_true",
                    help="8 leaves x 4 spines, 2 x 64 ranks (a check, not the paper's scale)")
    ap.add_argument("--lifecycle", action="store_true",
                    help="also the lifecycle section: real jobs in Mininet (root, about 45 "
                         "minutes)")
    ap.add_argument("--freeze-only", action="store_true",
                    help="the freeze section alone (issue 74: one poisoned datagram or "
                         "report), keeping the output file's others")
    ap.add_argument("--lifecycle-only", action="store_true",
                    help="the lifecycle section alone, keeping the output file's others")
    args = ap.parse_args(argv)

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.freeze_only:
        with open(args.out) as fh:
            doc = json.load(fh)
        doc["freeze"] = freeze()
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
        print(json.dumps(doc["freeze"], indent=1), file=sys.stderr)
        return 0
    if args.lifecycle_only:
        with open(args.out) as fh:
            doc = json.load(fh)
        doc["lifecycle"] = lifecycle(progress)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
        print("\n".join(doc["lifecycle"]["failures"]) or "lifecycle: every target held",
              file=sys.stderr)
        return 0
    kw = dict(spines=4, leaves=8, hosts_per_leaf=16, ranks=64,
              learning_times=[("ring", 64), ("all-to-all", 64)]) if args.quick else {}
    t = time.monotonic()
    doc = run(**kw)
    doc["freeze"] = freeze()
    doc["bench_wall_s"] = round(time.monotonic() - t, 1)
    if args.lifecycle:
        doc["lifecycle"] = lifecycle(progress)
    elif os.path.exists(args.out):  # measured by an earlier --lifecycle: kept
        with open(args.out) as fh:
            old = json.load(fh).get("lifecycle")
        if old:
            doc["lifecycle"] = old
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"recommended: {doc['recommendation']}", file=sys.stderr)
    for r in doc["sflow"]:
        print(f"{r['sampling']:>14} {r['where']:>4}: {r['samples_per_s']:>9} samples/s, "
              f"{r['datagrams_per_s']:>8} datagrams/s, CPU {r['cpu_per_traffic_s']:.3f} s/s, "
              f"{r['samples_per_pair_per_window']:>7} samples/pair/window, learned after "
              f"{r['learned_after_s']} s", file=sys.stderr)
    print(json.dumps(doc["openflow_per_pair_counters"], indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
