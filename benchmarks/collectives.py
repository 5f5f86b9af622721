"""Benchmark of real collective libraries on the emulated fabric: All-Reduce time of PyTorch gloo
and Open MPI (ring forced) with one rank per host, for each way of telling the controller about
the job: nothing (ECMP), the ring declared in the library's data direction ("correct"), the ring
in rank order (gloo's pitfall: its data goes to rank - 1; a controller that learns may correct it during the
run), and, once the controller learns matrices, the wrong direction with ``"learn": false`` (the
pitfall as it was), the wrong direction corrected by learning and members only (both measured
after learning, with the learning time).

    python -m benchmarks.collectives [--library gloo,mpi] [--runs 10] [--mib 4]
        [--relaunch-runs 10] [--relaunches-only] [--variants members,...]
        [--out bench/collectives.json]

Relaunches (issue 22, ``emulation/harness/relaunch.py``): the jobs posted once, then 3
launches of 4 iterations, 6 s apart (a checkpoint's pause), for each variant: one ring
declared by its members or in rank order, a mixture-of-experts job (gloo: all-to-all then the
ring, members only), and two jobs at once by their members (gloo: DistributedDataParallel
training; Open MPI: ring All-Reduces). Each round runs the correct declaration once first
(with ``"learn": false``: planned as declared, whatever its launch sends first);
per launch after the first, each job's median over its correct declaration's median, whether
every pair was planned, and the (re-)plans made on measured traffic after the first launch.
``--relaunches-only`` measures the relaunches only, keeping the file's other results;
``--variants`` some of the variants only, keeping the others' results.

Each run starts the ranks anew (new TCP connections, so ECMP hashes anew); the rounds interleave
the scenarios so that drift hits all alike. Ratios are against the correctly declared run of the
same invocation. ECMP's balance per run is recorded, since its outcome depends on the hash. A
library given alone replaces only its own section of an existing output file (the two can run
under separate holds of the shared Open vSwitch lock). Needs root, Open vSwitch, Mininet and the
libraries (make system).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from emulation.harness import collectives as co
from emulation.harness import relaunch
from emulation.harness.session import Session, install_interrupt_handler

SHAPE = (2, 4, 2)
BW = 20.0


def _summary(values: list[float]) -> dict:
    return {"n": len(values), "median": round(statistics.median(values), 3),
            "min": round(min(values), 3), "max": round(max(values), 3)}


def _record(res: dict) -> dict:
    rec = {"seconds": round(statistics.median(res["times"]), 3), "sums_ok": res["sums_ok"],
           "imbalance": res["imbalance"], "direction": res["direction"],
           "uplinks": res["uplinks"], "launch_stalls": len(res["stalled"])}
    if "learning" in res:
        rec["learning_s"] = res["learning"]["seconds"]
        rec["learning_runs"] = len(res["learning"]["runs"])
    return rec


RELAUNCHES, RELAUNCH_ITERS, PAUSE_S = 3, 4, 6.0
RELAUNCH_ROUNDS = 10  # issue 22: the scenario repeated 10 times


def _relaunch_round(res: dict, ref: dict) -> dict:
    first, *later = res["launches"]
    return {"launches": [{"jobs": [{"median_s": statistics.median(j["times"]),
                                    "matrix": j["matrix"], "planned_pairs": j["planned_pairs"],
                                    "unplanned": j["unplanned"], "direction": j["direction"]}
                                   for j in x["jobs"]],
                          "imbalance": x["imbalance"]} for x in res["launches"]],
            "reference_median_s": [round(statistics.median(t), 3) for t in ref["times"]],
            "reference_imbalance": ref["imbalance"],
            "replans_after_first_launch": max(b["replans"] - a["replans"] for a, b in zip(
                first["jobs"], later[-1]["jobs"]))}


def measure_relaunches(s, library: str, hosts: list[str], runs: int, mib: int, outdir: str,
                       progress, variants=relaunch.VARIANTS) -> dict:
    """``runs`` rounds of the relaunch scenario per variant (``relaunch.VARIANTS``); each
    round first runs the correct declaration once (the reference), so that drift hits both
    alike. Per launch after the first, each job's median over its references' median."""
    out = {}
    for name in variants:
        if name in relaunch.GLOO_ONLY and library != "gloo":
            continue
        v = relaunch.variant(s, library, name, hosts, mib)
        t0 = time.time()
        refs: list[list[float]] = [[] for _ in v.groups]
        rounds = []
        for k in range(runs):
            logdir = os.path.join(outdir, f"relaunch-{name}-{k}")
            ref = relaunch.reference(s, library, v, mib, RELAUNCH_ITERS,
                                     os.path.join(logdir, "reference"))
            for j, times in enumerate(ref["times"]):
                refs[j] += times
            res = relaunch.relaunches(s, library, v, mib, RELAUNCH_ITERS, logdir,
                                      launches=RELAUNCHES, pause_s=PAUSE_S)
            rounds.append(_relaunch_round(res, ref))
            progress(f"{library} relaunch {name} {k + 1}/{runs}: launches "
                     f"{[[j['median_s'] for j in x['jobs']] for x in rounds[-1]['launches']]} s,"
                     f" reference {rounds[-1]['reference_median_s']} s, "
                     f"{rounds[-1]['replans_after_first_launch']} re-plans after launch 1")
        medians = [statistics.median(t) for t in refs]
        for r in rounds:
            r["over_correct"] = [[round(j["median_s"] / medians[i], 3)
                                  for i, j in enumerate(x["jobs"])] for x in r["launches"]]
            for x in r["launches"]:
                for j in x["jobs"]:
                    j["median_s"] = round(j["median_s"], 3)
        later = [o for r in rounds for x in r["over_correct"][1:] for o in x]
        pairs = [len(relaunch.correct_pairs(doc)) for doc in v.correct]
        out[name] = {
            "jobs": len(v.groups), "ranks_per_job": [len(g) for g in v.groups],
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
            "pairs_per_job": pairs, "ddp": v.ddp, "all_to_all_mib": v.a2a_mib,
            "reference_median_s": [round(m, 3) for m in medians], "rounds": rounds,
            "later_launches_over_correct": _summary(later),
            "later_launches_within_10pct": sum(o <= 1.10 for o in later),
            "later_launches": len(later),
            "later_launches_every_pair_planned": sum(  # the correct declaration's pairs
                j["unplanned"] == 0 for r in rounds for x in r["launches"][1:]
                for j in x["jobs"]),
            "max_replans_after_first_launch": max(r["replans_after_first_launch"]
                                                  for r in rounds)}
    return {"launches": RELAUNCHES, "iterations_per_launch": RELAUNCH_ITERS,
            "pause_s": PAUSE_S, "rounds": runs, "variants": list(out), **out}


def measure(library: str, runs: int, mib: int, iters: int, outdir: str, progress,
            relaunch_runs: int = RELAUNCH_ROUNDS, relaunches_only: bool = False,
            variants=relaunch.VARIANTS) -> dict:
    with Session(*SHAPE, BW, outdir, progress=progress) as s:
        hosts = co.rank_hosts(s.fabric)
        names = [] if relaunches_only else ["ecmp", "correct", "rank_order"]
        skipped = {}
        if relaunches_only:
            pass
        elif co.learning_supported(s.ctl):
            names += list(co.LEARNING_SCENARIOS)
        else:
            skipped = {n: "the controller does not take members-only jobs yet (issue 14)"
                       for n in co.LEARNING_SCENARIOS}
        records: dict[str, list[dict]] = {n: [] for n in names}
        for k in range(runs):
            for name in names:
                res = co.SCENARIOS[name](s, library, hosts, mib, iters,
                                         os.path.join(outdir, f"{name}-{k}"))
                if not res["sums_ok"]:
                    raise RuntimeError(f"{library} {name}: wrong sums; logs {res['logs']}")
                records[name].append(_record(res))
                progress(f"{library} run {k + 1}/{runs} {name}: "
                         f"{records[name][-1]['seconds']:.2f} s, imbalance {res['imbalance']:.2f}")
        relaunches = measure_relaunches(s, library, hosts, relaunch_runs, mib, outdir,
                                        progress, variants) if relaunch_runs else None
    if relaunches_only:
        return {"relaunches": relaunches}
    ref = statistics.median(r["seconds"] for r in records["correct"])
    out = {"ranks": hosts, "direction_measured": records["ecmp"][0]["direction"],
           "scenarios": {}, "skipped": skipped, "relaunches": relaunches}
    for name, recs in records.items():
        sec = [r["seconds"] for r in recs]
        entry = {"seconds": _summary(sec), "over_correct_median": round(
                     statistics.median(sec) / ref, 2),
                 "imbalance": _summary([r["imbalance"] for r in recs]), "runs": recs}
        if name == "ecmp":
            entry["collided_runs"] = sum(r["imbalance"] > 0.5 for r in recs)
            bal = [r["seconds"] for r in recs if r["imbalance"] <= 0.5]
            col = [r["seconds"] for r in recs if r["imbalance"] > 0.5]
            entry["seconds_when_balanced"] = _summary(bal) if bal else None
            entry["seconds_when_collided"] = _summary(col) if col else None
        if recs and "learning_s" in recs[0]:
            entry["learning_s"] = _summary([r["learning_s"] for r in recs])
        out["scenarios"][name] = entry
    out["line_rate_ideal_s"] = round(co.ideal_s(len(hosts), mib, BW), 3)
    return out


def _kept_variants(new: dict, old: dict) -> dict:
    """``new`` relaunch results with the variants it did not measure taken from ``old``."""
    kept = [v for v in old["variants"] if v not in new["variants"]]
    merged = {**new, **{v: old[v] for v in kept}}
    merged["variants"] = [v for v in relaunch.VARIANTS if v in new["variants"] or v in kept]
    return merged


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.collectives",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default=",".join(co.LIBRARIES),
                    help=f"comma-separated, of {', '.join(co.LIBRARIES)}")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--mib", type=int, default=4, help="tensor size per rank, MiB")
    ap.add_argument("--iters", type=int, default=1, help="All-Reduces per run (median kept)")
    ap.add_argument("--relaunch-runs", type=int, default=RELAUNCH_ROUNDS,
                    help="rounds of the relaunch scenario per variant (0: none)")
    ap.add_argument("--relaunches-only", action="store_true",
                    help="measure the relaunches only (with their correct declarations), "
                         "keeping the output file's other results")
    ap.add_argument("--variants", default=",".join(relaunch.VARIANTS),
                    help=f"relaunch variants, comma-separated, of {', '.join(relaunch.VARIANTS)}"
                         " (a subset keeps the file's results of the others)")
    ap.add_argument("--out", default="bench/collectives.json")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in relaunch.VARIANTS]
    if unknown:
        print(f"error: unknown relaunch variants {', '.join(unknown)}; of "
              f"{', '.join(relaunch.VARIANTS)}", file=sys.stderr)
        return 2
    libraries = args.library.split(",")
    for lib in libraries:
        why = co.missing(lib)
        if why:
            print(f"error: {lib}: {why}", file=sys.stderr)
            return 2
    if args.runs < 1 or args.mib < 1 or args.iters < 1:
        print("error: --runs, --mib and --iters must be at least 1", file=sys.stderr)
        return 2

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    doc = {}
    if os.path.exists(args.out) and (set(libraries) != set(co.LIBRARIES)
                                     or args.relaunches_only
                                     or set(variants) != set(relaunch.VARIANTS)):
        with open(args.out) as fh:
            doc = json.load(fh)
    if not args.relaunches_only:
        doc.update({"fabric": {"spines": SHAPE[0], "leaves": SHAPE[1],
                               "hosts_per_leaf": SHAPE[2], "link_mbps": BW,
                               "controller": "declared fabric, greedy, flow mode"},
                    "tensor_mib": args.mib, "runs": args.runs, "iterations_per_run": args.iters})
    run_dir = os.path.join(co.LOG_ROOT, "bench-" + time.strftime("%Y%m%d-%H%M%S"))
    for lib in libraries:
        t0 = time.time()
        res = measure(lib, args.runs, args.mib, args.iters, os.path.join(run_dir, lib), progress,
                      args.relaunch_runs, args.relaunches_only, variants)
        old = doc.get("libraries", {}).get(lib, {}).get("relaunches")
        if res.get("relaunches") and old and "variants" in old:
            res["relaunches"] = _kept_variants(res["relaunches"], old)
        if args.relaunches_only:
            res["relaunches"]["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                             time.gmtime(t0))
            doc.setdefault("libraries", {}).setdefault(lib, {})["relaunches"] = res["relaunches"]
        else:
            res["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))
            res["wall_s"] = round(time.time() - t0)
            doc.setdefault("libraries", {})[lib] = res
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
        for name, e in res.get("scenarios", {}).items():
            print(f"{lib:5} {name:14} median {e['seconds']['median']:.2f} s "
                  f"[{e['seconds']['min']:.2f}-{e['seconds']['max']:.2f}] "
                  f"{e['over_correct_median']:.2f}x correct, imbalance median "
                  f"{e['imbalance']['median']:.2f}")
    return 0


if __name__ == "__main__":
    install_interrupt_handler()
    sys.exit(main())
