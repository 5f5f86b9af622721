"""``mlroute job show``'s view for people: a job's answer (``GET /v1/jobs/ID``) in a few lines,
what ``--json`` prints in full. Every field may be missing (an older controller, a stand-in).

>>> print(job_text({"id": "r", "algorithm": "auto", "mode": "flow", "flows": 2,
...     "unroutable_flows": 0, "matrix": "declared", "members": ["h0_0", "h1_0"],
...     "ideal_s": 0.00048, "predicted_allreduce_s": 0.00048, "link_speed": {"gbps": 100.0},
...     "learning": {"samples": 9, "reason": "not steady yet"}, "measured_flows": [
...         {"src": "h0_0", "dst": "h1_0", "bytes_per_s": 2500000, "declared": True}],
...     "routes": [{"src": "h0_0", "dst": "h1_0", "path": ["l0", "s0", "l1"]},
...                {"src": "h1_0", "dst": "h0_0", "split": [
...                    {"path": ["l1", "s0", "l0"], "share": 0.5},
...                    {"path": ["l1", "s1", "l0"], "share": 0.5}]}]}))
job r: auto, flow mode, 2 flows, matrix declared
members: h0_0 h1_0
All-Reduce: predicted 0.48 ms, ideal 0.48 ms (1.00x), links of 100 Gbit/s
learning: 9 samples; not acting: not steady yet
measured (src -> dst: bytes a second):
  h0_0 -> h1_0  2,500,000
routes (src -> dst: path):
  h0_0 -> h1_0  l0 s0 l1
  h1_0 -> h0_0  l1 s0 l0 (0.5) | l1 s1 l0 (0.5)

A job whose demand across a cut exceeds its capacity (``model.cuts``) says so:

>>> print(job_text({"id": "a", "ideal_s": 0.001, "predicted_allreduce_s": 0.002,
...     "cut_bound_s": 0.002, "cuts": [{"message": "job a: leaf l0: ... 2.00x its ideal"}]}))
job a: 0 flows
All-Reduce: predicted 2 ms, ideal 1 ms (2.00x)
where routing stops helping (no routing below 2 ms):
  job a: leaf l0: ... 2.00x its ideal
"""
from __future__ import annotations

ROUTES_SHOWN = 20  # routes listed before "... N more"
CUTS_SHOWN = 5  # cut-bound cuts (where routing stops helping) listed before "... N more"


def _seconds(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def _path(part: dict) -> str:
    where = " ".join(part["path"]) if part.get("path") else str(part.get("spine"))
    sport = f" sport {part['sport']}" if part.get("sport") is not None else ""
    return where + sport


def _route(r: dict) -> str:
    if r.get("unroutable"):
        where = "unroutable"
    elif r.get("split"):
        where = " | ".join(f"{_path(p)} ({p.get('share', 0):.3g})" for p in r["split"])
    else:
        where = _path(r)
    plane = f" [{r['plane']}]" if r.get("plane") else ""
    return f"  {r.get('src')} -> {r.get('dst')}  {where}{plane}"


def job_text(view: dict, routes_shown: int = ROUTES_SHOWN) -> str:
    """The job's kind, members, prediction, learning state and first routes."""
    flows = f"{view.get('flows', len(view.get('routes') or []))} flows"
    if view.get("unroutable_flows"):
        flows += f" ({view['unroutable_flows']} unroutable)"
    facts = [view.get("algorithm"), view.get("mode") and f"{view['mode']} mode", flows,
             view.get("matrix") and f"matrix {view['matrix']}"]
    out = [f"job {view.get('id')}: " + ", ".join(f for f in facts if f)]
    members = view.get("members") or (view.get("job") or {}).get("members")
    if members:
        out.append("members: " + " ".join(map(str, members)))
    predicted, ideal = view.get("predicted_allreduce_s"), view.get("ideal_s")
    gbps = (view.get("link_speed") or {}).get("gbps")
    links = f", links of {gbps:g} Gbit/s" if gbps else ""
    if predicted is not None and ideal:
        out.append(f"All-Reduce: predicted {_seconds(predicted)}, ideal {_seconds(ideal)} "
                   f"({predicted / ideal:.2f}x){links}")
    elif view.get("prediction_error"):
        out.append(f"All-Reduce: no prediction: {view['prediction_error']}")
    found = view.get("cuts") or []
    if found:
        bound = view.get("cut_bound_s")
        out.append("where routing stops helping" + (f" (no routing below {_seconds(bound)})"
                                                     if bound else "") + ":")
        out += [f"  {d.get('message')}" for d in found[:CUTS_SHOWN]]
        if len(found) > CUTS_SHOWN:
            out.append(f"  ... {len(found) - CUTS_SHOWN} more (--json for every cut)")
    if view.get("mismatch"):
        out.append(f"mismatch: {view['mismatch']}")
    learning = view.get("learning")
    if learning:
        state = f"learning: {learning.get('samples', 0)} samples"
        if learning.get("steady"):
            state += ", steady"
        if learning.get("replans"):
            state += f", {learning['replans']} re-plans"
        reason = learning.get("reason")
        out.append(state + (f"; not acting: {reason}" if reason else ""))
    elif view.get("learn") is False:
        out.append("learning: off (\"learn\": false)")
    measured = view.get("measured_flows") or []
    if measured:
        out.append("measured (src -> dst: bytes a second):")
        out += [f"  {m.get('src')} -> {m.get('dst')}  {m.get('bytes_per_s', 0):,}"
                + ("" if m.get("declared", True) else " (not declared)")
                for m in measured[:routes_shown]]
        if len(measured) > routes_shown:
            out.append(f"  ... {len(measured) - routes_shown} more (--json for every pair)")
    routes = view.get("routes") or []
    if routes:
        out.append("routes (src -> dst: path):")
        out += [_route(r) for r in routes[:routes_shown]]
        if len(routes) > routes_shown:
            out.append(f"  ... {len(routes) - routes_shown} more (--json for every route)")
    return "\n".join(out)
