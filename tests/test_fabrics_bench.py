"""The Clos fabrics benchmark (benchmarks.fabrics) in its quick form: the JSON's shape and
the exactness claims it records."""
import json

import pytest

from benchmarks import fabrics


@pytest.mark.slow
def test_quick_fabric_bench_shape_and_exactness(tmp_path):
    out = tmp_path / "fabrics.json"
    assert fabrics.main(["--quick", "--out", str(out), "--ilp-time-limit", "20"]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) >= {"machine", "settings", "instances", "ilp_random_small", "targets",
                        "wall_s"}
    assert doc["settings"]["quick"] is True
    rows = doc["instances"]
    assert {r["pattern"] for r in rows} == set(fabrics.PATTERNS)
    assert {bool(r["failures"]) for r in rows} == {False, True}
    for r in rows:
        assert set(r["planners"]) == set(fabrics.PLANNERS)
        for p in r["planners"].values():
            assert p["over_bound"] >= 1.0 - 1e-9  # nothing beats the lower bound
            assert p["ms_median"] >= 0 and p["cpu_ms_median"] >= 0 and "ms_over_ecmp" in p
        assert r["planners"]["auto"]["max_link_load"] <= r["planners"]["greedy"]["max_link_load"]
        if r["pattern"] in fabrics.EQUAL_FLOWS and not r["failures"]:
            assert r["planners"]["auto"]["over_bound"] == 1.0 and r["auto"]["optimal"]
        if "ilp" in r:
            assert r["ilp"]["proved"]
            assert r["planners"]["auto"]["max_link_load"] >= r["ilp"]["objective"] - 1e-9
    assert any("ilp" in r for r in rows) and doc["ilp_random_small"]
    v = doc["auto_vs_ilp"]
    assert v["proved"] >= v["equal"] + len(v["auto_above"]) and v["proved"] > 0
    for s in doc["ilp_random_small"]:
        assert s["auto"] >= max(s["ilp"]["objective"], s["lower_bound"]) - 1e-9
        l2 = s["ilp"]["layer2"]
        assert l2["bound"] <= l2["links_at_max"] and l2["alpha"] <= s["auto"] + 1e-9
        if l2["auto_links_at_max"] is not None:  # auto at the ILP's max: never fewer links
            assert l2["auto_links_at_max"] >= l2["links_at_max"]
    v2 = doc["auto_vs_layer2_milp"]
    assert v2["instances"] == sum(1 for r in rows if r["hosts"] <= 64 and "ilp" in r) + len(
        doc["ilp_random_small"])
    assert v2["auto_at_ilp_max"] >= v2["auto_equal"] + len(v2["auto_above"])
    t = doc["targets"]
    for key in ("auto_exact_on_full_bisection_equal_flows", "auto_never_below_ilp_or_bound",
                "auto_optimal_claims_hold_where_ilp_proved",
                "auto_within_ilp_optimum_plus_reported_gap",
                "auto_links_at_max_never_below_layer2_bound"):
        assert t[key]["ok"] is True, (key, t[key])
    for key in ("auto_k32_ms<=200", "greedy_k32_ms<=100", "ecmp_k32_ms<=100"):
        assert t[key]["ok"] is None and t[key]["value"] is None  # k = 32 is not in --quick
