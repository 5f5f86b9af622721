"""Benchmark of real collective libraries on the emulated fabric: All-Reduce time of PyTorch gloo
and Open MPI (ring forced) with one rank per host, for each way of telling the controller about
the job: nothing (ECMP), the ring declared in the library's data direction ("correct"), the ring
in rank order (gloo's pitfall: its data goes to rank - 1; a controller that learns may correct it during the
run), and, once the controller learns matrices, the wrong direction with ``"learn": false`` (the
pitfall as it was), the wrong direction corrected by learning and members only (both measured
after learning, with the learning time).

    python -m benchmarks.collectives [--library gloo,mpi] [--runs 10] [--mib 4]
        [--relaunch-runs 3] [--relaunches-only] [--out bench/collectives.json]

Relaunches (issue 22): the job posted once (by its members, or in rank order), then 3
launches of 4 All-Reduces, 6 s apart (a checkpoint's pause); per launch after the first, its
median over the correct declaration's median of the same invocation, and the (re-)plans made
on measured traffic after the first launch. ``--relaunches-only`` measures the correct
declaration and the relaunches, keeping the file's other results.

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


def measure_relaunches(s, library: str, hosts: list[str], runs: int, mib: int, outdir: str,
                       progress, correct_s: float) -> dict:
    """``runs`` rounds of the relaunch scenario per declaration (module docstring)."""
    out = {}
    for declare in ("members", "rank_order"):
        rounds = []
        for k in range(runs):
            res = co.relaunches(s, library, hosts, mib, RELAUNCH_ITERS,
                                os.path.join(outdir, f"relaunch-{declare}-{k}"),
                                members=declare == "members", launches=RELAUNCHES,
                                pause_s=PAUSE_S)
            first, *later = res["launches"]
            if not all(x["sums_ok"] for x in res["launches"]):
                raise RuntimeError(f"{library} relaunch {declare}: wrong sums; logs "
                                   f"{res['logs']}")
            rounds.append({
                "over_correct": [round(statistics.median(x["times"]) / correct_s, 3)
                                 for x in res["launches"]],
                "matrix": [x["matrix"] for x in res["launches"]],
                "planned_pairs": [x["planned_pairs"] for x in res["launches"]],
                "imbalance": [x["imbalance"] for x in res["launches"]],
                "replans_after_first_launch": later[-1]["replans"] - first["replans"]})
            progress(f"{library} relaunch {declare} {k + 1}/{runs}: "
                     f"{rounds[-1]['over_correct']} x correct, "
                     f"{rounds[-1]['replans_after_first_launch']} re-plans after launch 1")
        later = [r for x in rounds for r in x["over_correct"][1:]]
        out[declare] = {"rounds": rounds, "later_launches_over_correct": _summary(later),
                        "later_launches_within_10pct": sum(r <= 1.10 for r in later),
                        "later_launches": len(later),
                        "max_replans_after_first_launch": max(
                            x["replans_after_first_launch"] for x in rounds)}
    return {"launches": RELAUNCHES, "all_reduces_per_launch": RELAUNCH_ITERS,
            "pause_s": PAUSE_S, "correct_median_s": round(correct_s, 3), **out}


def measure(library: str, runs: int, mib: int, iters: int, outdir: str, progress,
            relaunch_runs: int = RELAUNCHES, relaunches_only: bool = False) -> dict:
    with Session(*SHAPE, BW, outdir, progress=progress) as s:
        hosts = co.rank_hosts(s.fabric)
        names = ["correct"] if relaunches_only else ["ecmp", "correct", "rank_order"]
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
        ref = statistics.median(r["seconds"] for r in records["correct"])
        relaunches = measure_relaunches(s, library, hosts, relaunch_runs, mib, outdir,
                                        progress, ref) if relaunch_runs else None
    if relaunches_only:
        return {"relaunches": relaunches}
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.collectives",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default=",".join(co.LIBRARIES),
                    help=f"comma-separated, of {', '.join(co.LIBRARIES)}")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--mib", type=int, default=4, help="tensor size per rank, MiB")
    ap.add_argument("--iters", type=int, default=1, help="All-Reduces per run (median kept)")
    ap.add_argument("--relaunch-runs", type=int, default=RELAUNCHES,
                    help="rounds of the relaunch scenario per declaration (0: none)")
    ap.add_argument("--relaunches-only", action="store_true",
                    help="measure the correct declaration and the relaunches only, keeping "
                         "the output file's other results")
    ap.add_argument("--out", default="bench/collectives.json")
    args = ap.parse_args(argv)
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
                                     or args.relaunches_only):
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
                      args.relaunch_runs, args.relaunches_only)
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
