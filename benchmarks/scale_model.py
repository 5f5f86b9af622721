"""What the measured costs of ``benchmarks.scale`` predict for fat-trees it could not build.

A k = 32 fat-tree is 1,280 switches and 16,384 links: on this 2-core machine ``ovs-vsctl``
added its patch ports at about 1,000 per 33 s once the 1,280 bridges existed (each transaction
re-reads a database that keeps growing: over 20 minutes for the 32,768 ports) and deleting
the bridges in one transaction took 87 s, so ``benchmarks.scale`` measures k = 4, 8 and 16
and this model extends them:

* the static entries of every tier are not modelled but counted: the rule builders run
  without a switch (``benchmarks.entries.count``, flow mode), O(entries);
* each time figure (first start and restart until ready, the controller's and Open vSwitch's
  CPU seconds meanwhile) is fitted by least squares as ``a + b x switches`` over the measured
  fat-trees (at least two); ``per_switch_ms`` is ``b``. The controller reads and repairs
  switches at a bounded concurrency (``tablesync.TABLE_READERS``) and ``ovs-vswitchd`` serves
  every bridge from one process, so both grow with the switches; a restart also grows with
  the entries per switch (k = 32 holds about twice k = 16's per switch), which a fit on
  switches alone leaves out: the prediction is a lower bound.

    python -m benchmarks.scale_model [bench/scale.json] [--fat-tree K ...]

prints the fits and the predictions; ``benchmarks.scale`` stores them in its JSON
(``model``). O(switches of the predicted fabrics) for the entries, O(measured) for the fits.

>>> fit([(20, 1.0), (80, 2.0), (320, 6.0)])
{'a': 0.667, 'per_switch_ms': 16.67, 'points': 3}
>>> fit([(20, 1.0)]) is None  # one point fixes no slope
True
"""
from __future__ import annotations

import argparse
import json
import sys

from benchmarks import entries
from topologies.clos import fattree_fabric

FITTED = ("first_start_ready_s", "restart_ready_s", "first_start_meter.controller_cpu_s",
          "first_start_meter.ovs_cpu_s", "restart_meter.controller_cpu_s",
          "restart_meter.ovs_cpu_s")
PREDICTED = (32,)


def fit(points: list[tuple[float, float]]) -> dict | None:
    """Least squares ``y = a + b x`` of (x, y) points: ``a``, ``b`` in ms (``per_switch_ms``
    when x counts switches); None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return {"a": round(my - b * mx, 3), "per_switch_ms": round(b * 1e3, 2), "points": n}


def _value(doc: dict, path: str):
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc if isinstance(doc, (int, float)) else None


def predict(result: dict, ks=PREDICTED) -> dict:
    """The fits of ``result``'s fat-trees (``benchmarks.scale`` JSON) and, for each k of
    ``ks``, its switches, exact static entries per tier and the fitted figures."""
    trees = [f for f in result.get("fabrics", []) if "error" not in f and f.get("switches")]
    fits = {}
    for path in FITTED:
        points = [(f["switches"], v) for f in trees if (v := _value(f, path)) is not None]
        fits[path] = fit(points)
    out = {"measured": [f["fabric"] for f in trees], "fits": fits, "fabrics": {}}
    for k in ks:
        fabric = fattree_fabric(k)  # as benchmarks.scale declares it
        n = len(fabric.switches())
        counted = entries.count(fabric)["flow"]
        out["fabrics"][f"fat-tree k={k}"] = {
            "switches": n, "static_entries": counted["total"],
            "static_entries_by_tier": counted["tiers"],
            **{path: round(f["a"] + f["per_switch_ms"] * n / 1e3, 2)
               for path, f in fits.items() if f is not None}}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale_model",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("result", nargs="?", default="bench/scale.json",
                    help="a benchmarks.scale JSON (default: bench/scale.json)")
    ap.add_argument("--fat-tree", type=int, action="append", metavar="K",
                    help="a k-ary fat-tree to predict (repeat; default: 32)")
    args = ap.parse_args(argv)
    try:
        with open(args.result) as fh:
            result = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"{args.result}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(predict(result, args.fat_tree or PREDICTED), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
