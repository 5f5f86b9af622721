"""Issue 74, point 5: ``auto`` by flow counts with and without its job-aware tie-break
(``planners/clos_tiebreak.py``), in one run: bench/tiebreak.json.

Per case, the shared prediction's (``model.iteration``) mean and worst job slowdown, the CPU
ms of ``clos_auto`` (the ILP stage off) without and with the tie-break, and what the tie-break
did; every link's flow count is checked equal (the tie-break is load-neutral). Cases: the
patterns bench's (``benchmarks.patterns``: all-to-all, pipeline, hybrid 3D, byte mixes with
and without a spine down, realistic 8 x 16 rings), 24 more byte mixes (4 jobs x 16 flows of
10 MB or 1 GB on 8 leaves x 4 spines, a spine down or not), 6 pipelines and 6 hybrids with a
spine down, realistic 8 x 16 clusters with and without failures; the paper's realistic grid
(24 cells at 64 x 32, every job's slowdown averaged); then the k = 32 fat-tree
permutation (8,192 hosts): the CPU ms of ``auto`` with objective flows (with the tie-break),
with objective jobs (the controller's default) and of ``clos_auto`` without it (medians of 5).

    python -m benchmarks.tiebreak [--out bench/tiebreak.json] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time

import numpy as np

from benchmarks.patterns import cases as pattern_cases
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, link_loads
from controller.model.jobs import Flow, Job
from controller.planners.clos_auto import clos_auto
from controller.planners.clos_jobs import clos_slowdowns
from controller.planners.clos_objective import auto_by_objective
from simulation.placement import realistic
from simulation.workloads import byte_mix, hybrid, pipeline


def cases(quick: bool = False):
    yield from ((f"patterns: {name}", f, jobs) for name, f, jobs in pattern_cases())
    if quick:
        return
    for seed in range(12):
        for dead in (0, 1):
            f = Clos.generate(4, 8, 8, 100.0, dead)
            yield f"byte mix 4x16 seed {seed} spines down {dead}", f, byte_mix(f, 4, 16,
                                                                                 seed=seed)
    for seed in range(6):
        f = Clos.generate(4, 8, 8, 100.0, 1)
        yield f"pipeline 4x8 seed {seed}", f, pipeline(f, [8, 8, 8, 8], seed=seed)
        used: set = set()
        yield f"hybrid 3D seed {seed}", f, (hybrid(f, 4, 2, 4, seed=seed, used=used)
                                            + hybrid(f, 2, 3, 4, seed=seed + 10, name="b",
                                                     used=used))
    for seed in range(1, 4):
        for links, dead in ((0, 0), (3, 1)):
            fab, jobs = realistic(8, 16, 0.9, seed, links, dead, 16, models=["bloom"],
                                  ring_sizes=(2, 4))
            yield f"realistic 8x16 seed {seed} links {links} spines {dead}", fab, jobs


def _stats(p: ClosProblem, r) -> dict:
    s = clos_slowdowns(p, r)
    return {"mean": round(sum(s.values()) / len(s), 4), "worst": round(max(s.values()), 4)}


def row(name: str, f: Clos, jobs) -> dict:
    p = ClosProblem.build(f, jobs, skip_unroutable=True)
    out: dict = {"case": name, "flows": len(p)}
    loads = []
    for label, tie in (("without", False), ("with", True)):
        t = time.process_time()
        r = clos_auto(p, ilp_time_limit=0, tiebreak=tie)
        ms = (time.process_time() - t) * 1e3
        loads.append(link_loads(p, r, hosts=True))
        out[label] = {**_stats(p, r), "max_link_load": r.info["max_link_load"],
                      "cpu_ms": round(ms, 1), **({"tiebreak": r.info["tiebreak"]} if tie else {})}
    out["loads_equal"] = bool(np.array_equal(*loads))
    return out


def realistic_grid() -> dict:
    """The paper's realistic grid (``simulation.paper.realistic_grid``: 24 cells of 64
    leaves x 32 spines x 32 NICs, utilisation 0.8-0.95, four failure cases, two seeds),
    ``clos_auto`` without and with the tie-break (ILP stage off): the mean slowdown over every
    job of every cell, the cells where it kept an exchange, CPU ms summed."""
    from simulation.paper import FAILURES
    from simulation.paper import realistic_grid as grid
    values: dict = {"without": [], "with": []}
    ms = {"without": 0.0, "with": 0.0}
    kept = found = 0
    cells = grid(True)
    for c in cells:
        links, dead = FAILURES[c["failures"]]
        fab, jobs = realistic(32, 64, c["utilisation"], c["seed"], links, dead, 32)
        p = ClosProblem.build(fab, jobs, skip_unroutable=True)
        for label, tie in (("without", False), ("with", True)):
            t = time.process_time()
            r = clos_auto(p, ilp_time_limit=0, tiebreak=tie)
            ms[label] += time.process_time() - t
            values[label] += list(clos_slowdowns(p, r).values())
            if tie:
                kept += r.info["tiebreak"]["kept"] is not None
                found += r.info["tiebreak"]["groups"]
    return {"cells": len(cells), "leaf_pairs_to_exchange": found, "cells_kept": kept,
            **{f"mean_{k}": round(sum(v) / len(v), 4) for k, v in values.items()},
            **{f"cpu_ms_{k}": round(v * 1e3) for k, v in ms.items()}}


def k32(repeats: int = 5) -> dict:
    f = Clos.fat_tree(32)
    hosts = list(f.host_leaves)
    perm = hosts[:]
    random.Random(1).shuffle(perm)
    job = Job("perm", explicit=[Flow("perm", a, b, 1e9) for a, b in zip(hosts, perm) if a != b])
    p = ClosProblem.build(f, [job])
    runs = {"flows (with the tie-break)": lambda: auto_by_objective(p, objective="flows"),
            "jobs (the default)": lambda: auto_by_objective(p, objective="jobs"),
            "clos_auto without the tie-break": lambda: clos_auto(p, tiebreak=False)}
    ms = {}
    for label, run in runs.items():
        run()  # warms the fabric's kept tables
        took = []
        for _ in range(repeats):
            t = time.process_time()
            run()
            took.append((time.process_time() - t) * 1e3)
        ms[label] = round(sorted(took)[len(took) // 2], 1)
    return {"flows": len(p), "cpu_ms_median": ms,
            "jobs_over_flows": round(ms["jobs (the default)"]
                                     / ms["flows (with the tie-break)"], 2),
            "tiebreak": auto_by_objective(p, objective="flows").info["tiebreak"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tiebreak",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench/tiebreak.json")
    ap.add_argument("--quick", action="store_true", help="the patterns bench's cases only, "
                    "no k = 32 (a check)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    rows = [row(*c) for c in cases(args.quick)]
    summary = {k: {"mean_sum": round(sum(r[k]["mean"] for r in rows), 4),
                   "worst_sum": round(sum(r[k]["worst"] for r in rows), 4),
                   "cpu_ms_sum": round(sum(r[k]["cpu_ms"] for r in rows), 1)}
               for k in ("without", "with")}
    summary.update(cases=len(rows),
                   lower_mean=sum(r["with"]["mean"] < r["without"]["mean"] for r in rows),
                   higher_mean=sum(r["with"]["mean"] > r["without"]["mean"] for r in rows),
                   higher_worst=sum(r["with"]["worst"] > r["without"]["worst"] for r in rows),
                   loads_equal=all(r["loads_equal"] for r in rows))
    doc = {"summary": summary, "rows": rows,
           **({} if args.quick else {"realistic_grid": realistic_grid(),
                                     "k32_permutation": k32()}),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
           "bench_wall_s": round(time.monotonic() - t0, 1)}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(json.dumps({k: doc.get(k) for k in ("summary", "realistic_grid", "k32_permutation")},
                     indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
