"""The trace replay's runs, its JSON (bench/trace_replay.json), its figure and its docs page.

``run_all`` replays the trace once per scenario (placement policy and arrival speedup,
``trace_replay.SCENARIOS`` unless ``--placement``/``--speedup`` name one) and algorithm, adds
for ``auto`` the same-state comparison with ECMP (ECMP planned and predicted on the very jobs
auto routes, at every re-plan), and writes the JSON and the CDF figure. ``page`` turns the JSON into
docs/results/trace-replay.md (``docs/gen_reference.py`` calls it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict

import numpy as np

from controller.jsonio import first_paragraph
from controller.model import hosttable
from simulation import trace_replay as tr

COMMAND = "python -m simulation.trace_report --workers 2"


def scenario_name(placement: str, speedup: float) -> str:
    return placement if speedup == 1.0 else f"{placement}, arrivals x{speedup:g}"


def _one(task: tuple) -> tuple:
    name, placement, algorithm, trace, shape, workload, seed = task
    fabric = hosttable.load(tr.TOPO, shape)
    t0 = time.perf_counter()
    run = tr.replay(trace, fabric, algorithm, workload, placement, seed,
                    compare="ecmp" if algorithm == "auto" else None)
    wall = time.perf_counter() - t0
    out = tr.summarise(run)
    stats = run["stats"]
    out["same_state_vs_ecmp"] = same_state(stats.pop("compare"))
    out["stats"] = {**stats, "wall_s": round(wall, 2)}
    return name, algorithm, out


def same_state(compare: list | None) -> dict | None:
    """Per (re-plan, job) auto's predicted communication time against ECMP's on the same
    jobs: how often auto is slower, equal, faster, and its worst ratio to ECMP."""
    if compare is None:
        return None
    pairs = [v for event in compare for v in event.values()]
    ratio = np.array([a / e for a, e in pairs]) if pairs else np.ones(0)
    rel = 1e-9
    return {"job_events": len(pairs),
            "auto_slower": int((ratio > 1 + rel).sum()),
            "equal": int((abs(ratio - 1) <= rel).sum()),
            "auto_faster": int((ratio < 1 - rel).sum()),
            "worst_auto_over_ecmp": round(float(ratio.max()), 6) if len(ratio) else None,
            "events_max_auto_over_max_ecmp": round(max(
                (max(a for a, _ in ev.values()) / max(e for _, e in ev.values())
                 for ev in compare if ev), default=1.0), 6)}


def run_all(args) -> int:
    t0 = time.perf_counter()
    shape = hosttable.Shape(**{k: getattr(args, k) for k in hosttable.Shape().to_dict()})
    workload = tr.Workload(tokens_per_host=args.tokens_per_host, gpu_tflops=args.gpu_tflops)
    fabric = hosttable.load(args.topology, shape)
    algorithms = [a for a in args.algorithms.split(",") if a]
    for a in algorithms:
        if a not in tr.ALGORITHMS:
            raise SystemExit(f"error: unknown algorithm {a!r} (one of {', '.join(tr.ALGORITHMS)})")
    if args.placement or args.speedup:
        scenarios = [(args.placement or "locality", args.speedup or 1.0)]
    else:
        scenarios = list(tr.SCENARIOS)
    traces = {f: tr.read_trace(args.trace, args.jobs, args.days, f) for _, f in scenarios}
    trace = traces[scenarios[0][1]]
    names = [scenario_name(p, f) for p, f in scenarios]
    tasks = [(n, p, a, traces[f], shape, workload, args.seed)
             for n, (p, f) in zip(names, scenarios) for a in algorithms]
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            done = list(pool.map(_one, tasks))
    else:
        done = [_one(t) for t in tasks]
    result = {n: {"placement": p, "speedup": f, "algorithms": {}}
              for n, (p, f) in zip(names, scenarios)}
    for p, a, out in done:
        result[p]["algorithms"][a] = out
        print(f"{p:22s} {a:15s} {out['stats']['wall_s']:7.1f} s  jct p99 "
              f"{out['jct_slowdown'].get('p99', 1):.4f}  slowed>5% "
              f"{out['slowed_over_5pct']['of_multi_host']:.3f}", flush=True)
    for p in names:
        result[p]["removed"] = removed(result[p]["algorithms"])
    ideal = workload.ring_bytes(64) * 2 / fabric.link_bps("host")
    doc = {
        "command": COMMAND, "seed": args.seed, "commit": commit_id(),
        "trace": {"file": os.path.relpath(args.trace, tr.REPO), "jobs": len(trace),
                  "arrival_span_days": round((trace[-1].arrival - trace[0].arrival) / 86400, 3)
                  if trace else 0, "cut": {"jobs": args.jobs, "days": args.days}},
        "fabric": {"file": os.path.relpath(args.topology, tr.REPO), "summary": fabric.summary(),
                   "shape": shape.to_dict(), "oversubscription": hosttable.oversubscription(fabric)},
        "workload": {**asdict(workload), "models": [list(m) for m in workload.models],
                     "ideal_comm_over_compute_large_ring": round(
                         ideal / workload.compute_s(64), 4)},
        "prediction": "controller.model.iteration.predict_clos_times",
        "scenarios": result,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        fh.write(_compact(json.dumps(doc, indent=1)) + "\n")
    print("wrote", args.out, f"({doc['wall_s']} s)")
    if args.figure:
        figure(doc, args.figure)
        print("wrote", args.figure)
    return 0


def _compact(text: str) -> str:
    """Lists of numbers on one line (the CDFs)."""
    return re.sub(r"\[\s+([-+\d.eE, \n]+?)\s+\]",
                  lambda m: "[" + " ".join(m.group(1).split()) + "]", text)


def commit_id() -> str | None:
    """The repository's short HEAD commit (None outside a git checkout): what a figure was
    measured on."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tr.REPO, text=True,
                              capture_output=True, timeout=10).stdout.strip() or None
    except OSError:
        return None


def removed(algos: dict) -> dict:
    """Per threshold: the share of multi-host jobs slowed under ECMP and under auto, and the
    fraction of ECMP's slowed jobs that auto removes."""
    out = {}
    if "ecmp" not in algos or "auto" not in algos:
        return out
    for key in (k for k in algos["ecmp"] if k.startswith("slowed_over_")):
        e, a = algos["ecmp"][key]["of_multi_host"], algos["auto"][key]["of_multi_host"]
        out[key] = {"ecmp": e, "auto": a,
                    "removed": round(1 - a / e, 4) if e > 0 else None}
    return out


def figure(doc: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    places = doc["scenarios"]
    fig, axes = plt.subplots(len(places), 2, figsize=(9, 3.2 * len(places)), squeeze=False)
    styles = {"ecmp": ("C3", "-"), "ecmp-polarised": ("C1", ":"), "greedy": ("C0", "--"),
              "auto": ("C2", "-")}
    for row, (p, res) in zip(axes, places.items()):
        for ax, key, label in ((row[0], "cdf_jct_slowdown", "job completion time / duration"),
                               (row[1], "cdf_comm_slowdown", "communication time / ideal")):
            for a, out in res["algorithms"].items():
                pts = out[key]
                if not pts["x"]:
                    continue
                xs, ys = [1.0] + pts["x"], [0.0] + pts["y"]
                color, ls = styles.get(a, ("k", "-"))
                ax.step(xs, ys, where="post", color=color, ls=ls, label=a)
            ax.set_xlabel(label)
            ax.set_ylabel("fraction of multi-host jobs")
            ax.set_title(p, fontsize=9)
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Crux trace on the Alibaba cluster ({doc['trace']['jobs']} jobs): "
                 f"{doc['command']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------- docs page


def _pct(x) -> str:
    return f"{100 * x:.1f}%"


def page(doc: dict, note: str = "") -> str:
    """docs/results/trace-replay.md from bench/trace_replay.json."""
    f, w = doc["fabric"], doc["workload"]
    sh, ov = f["shape"], f["oversubscription"]
    rows = []
    for p, res in doc["scenarios"].items():
        for a, out in res["algorithms"].items():
            j, c = out["jct_slowdown"], out["comm_slowdown"]
            rows.append([p, f"`{a}`", out["multi_host_jobs"], f"{j['p50']:.4f}",
                         f"{j['p90']:.4f}", f"{j['p99']:.4f}", f"{j['max']:.3f}",
                         f"{c['mean']:.3f}", f"{c['p99']:.3f}",
                         _pct(out["slowed_over_5pct"]["of_multi_host"]),
                         _pct(out["slowed_over_10pct"]["of_multi_host"]),
                         f"{out['stats']['wall_s']:.0f} s"])
    lines = []
    for p, res in doc["scenarios"].items():
        r = res.get("removed", {})
        if r:
            e5, e10 = r["slowed_over_5pct"], r["slowed_over_10pct"]
            gone = " and ".join(_pct(e["removed"]) if e["removed"] is not None else "none (ECMP "
                                "slows none)" for e in (e5, e10))
            lines.append(f"* **{p}**: ECMP slows {_pct(e5['ecmp'])} of the multi-host "
                         f"jobs by more than 5% and {_pct(e10['ecmp'])} by more than 10%; "
                         f"`auto` {_pct(e5['auto'])} and {_pct(e10['auto'])}: it removes "
                         f"{gone} of them.")
        same = res["algorithms"].get("auto", {}).get("same_state_vs_ecmp")
        if same:
            lines.append(f"  Same jobs, same moment ({same['job_events']:,} job re-plans): auto's "
                         f"predicted communication time is below ECMP's in "
                         f"{same['auto_faster']:,}, equal in {same['equal']:,}, above in "
                         f"{same['auto_slower']:,} (worst auto / ECMP "
                         f"{same['worst_auto_over_ecmp']:g}).")
    head = ["scenario", "algorithm", "multi-host jobs", "JCT p50", "JCT p90", "JCT p99",
            "JCT max", "comm mean", "comm p99", "slowed > 5%", "slowed > 10%", "replay time"]
    table = ("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
             + "".join("| " + " | ".join(str(x) for x in r) + " |\n" for r in rows))
    agg = ", ".join(f"{k} {v:g}:1" for k, v in ov["aggregation_per_pod"].items())
    models = ", ".join(f"up to {g} GPUs {p / 1e9:g}B" if g < 1 << 29 else f"more {p / 1e9:g}B"
                       for g, p in w["models"])
    return f"""{note}# Trace-driven cluster evaluation

*Made by* `{doc['command']}` *(written to* `bench/trace_replay.json` *and*
`docs/trace_replay_cdf.png`*; `make bench` runs it). {doc['trace']['jobs']:,} jobs, whole replay
in {doc['wall_s']:.0f} s on a shared 2-core machine, seed {doc['seed']}.*

The training jobs of an Alibaba production GPU cluster (the Crux trace: arrival, GPUs and
duration of {doc['trace']['jobs']:,} jobs arriving over {doc['trace']['arrival_span_days']:g}
days) replayed on that cluster's own three-tier fabric (its host table: {f['summary']}), once
per routing algorithm and placement policy. At every change of the jobs that cross the fabric,
the running jobs are re-planned as the controller does, and each job's iteration time comes
from the shared prediction (`{doc['prediction']}`): a job progresses at
(compute + ideal communication) / (compute + predicted communication) of its trace duration per
second, so a slowed job leaves later. JCT is a job's completion time over its trace duration
(time in the queue excluded); comm is its communication time per iteration over the ideal,
averaged over its run. Both over the jobs on two hosts or more (a job on one host never
reaches the network: its slowdown is 1).

{chr(10).join(lines)}

{table}
![trace replay CDFs](../trace_replay_cdf.png)

*Figure: CDFs of job completion time over duration and of communication time over ideal, per
algorithm and placement (`{doc['command']}`).*

## What the files do not give: assumptions

* **Fabric** (`controller/model/hosttable.py`, `Shape`; all are options of the command): one
  host is one port of {sh['host_gbps']:g} Gb/s, the fabric modelled is one *rail*: a host of
  this cluster has 8 GPUs with a NIC each (2 x 200 Gb/s in Alibaba HPN, SIGCOMM'24), and the 8
  rails carry the same ring on the same hosts, so one stands for all. Per pod
  {sh['aggs_per_pod']} aggregation switches (PSW), every ToR linked to each by
  {sh['leaf_bundle']} x {sh['leaf_gbps']:g} Gb/s: 1:1 at the fullest ToR (8 hosts; mean
  {ov['tor_mean']:g}:1 over the 119 ToRs of 2-8 hosts), as HPN's tier 1 is non-blocking.
  {sh['cores_per_group']} cores (DSW) per aggregation slot, {sh['core_bundle']} x
  {sh['core_gbps']:g} Gb/s to every pod: oversubscribed {agg} at the aggregation switches, of
  the order of the 15:1 HPN reports between its pods (few jobs cross pods).
* **Placement** (the original per-worker placement is not public): whole hosts, ceil(GPUs / 8)
  per job. `locality`: the fullest ToR that holds the job, else the pod with the fewest free
  hosts that holds it (its emptiest ToRs first), else across pods; `random`: free hosts
  uniformly at random (a scheduler blind to the topology). Jobs wait in arrival order and
  start as soon as they fit (backfilling). A ring follows its hosts in topology order.
* **Traffic** (`simulation/trace_replay.py`, `Workload`): data parallel across hosts, tensor
  parallel inside a host; each rail all-reduces {w['bytes_per_param']:g} bytes per parameter /
  {w['rails']} per iteration in one ring (RoCEv2, UDP port 4791, a source port per job).
  Parameters by job size (LLaMA-2 class): {models}. Compute per iteration: 6 x parameters x
  {w['tokens_per_host']:,} tokens per host at {w['gpu_tflops']:g} TFLOP/s per GPU, not
  overlapped with communication; ideal communication is then
  {w['ideal_comm_over_compute_large_ring']:g} of compute for every model size.
* **Time**: a trace duration is the job's run time without collisions; ECMP hashes with a salt
  from the seed, independently per tier (`ecmp`) or with one hash (`ecmp-polarised`); `auto`
  runs its local search to its local optimum (never to a deadline), so a seed gives one result.

What this does not model: jobs of one host sharing it (a job takes whole hosts), pipeline
parallelism across hosts, failures, and traffic other than the training rings.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulation.trace_report",
                                 description=first_paragraph(tr.__doc__))
    ap.add_argument("--jobs", type=int, help="the first N jobs of the trace")
    ap.add_argument("--days", type=float, help="the jobs that arrive in the first D days")
    ap.add_argument("--placement", choices=tr.PLACEMENTS,
                    help="one placement policy (default: the scenarios of SCENARIOS)")
    ap.add_argument("--speedup", type=float,
                    help="arrival times divided by this (default: the scenarios of SCENARIOS)")
    ap.add_argument("--algorithms", default=",".join(tr.ALGORITHMS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1, help="algorithms replayed in parallel")
    ap.add_argument("--trace", default=tr.TRACE)
    ap.add_argument("--topology", default=tr.TOPO)
    ap.add_argument("--out", default=os.path.join(tr.REPO, "bench", "trace_replay.json"))
    ap.add_argument("--figure", default=os.path.join(tr.REPO, "docs", "trace_replay_cdf.png"),
                    help="the CDF figure ('' for none)")
    for name, default in hosttable.Shape().to_dict().items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(default), default=default,
                        help=f"fabric: {name} (default {default})")
    for name in ("tokens_per_host", "gpu_tflops"):
        default = getattr(tr.Workload(), name)
        ap.add_argument("--" + name.replace("_", "-"), type=type(default), default=default,
                        help=f"workload: {name} (default {default})")
    args = ap.parse_args(argv)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
