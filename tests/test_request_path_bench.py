"""The request-path benchmark (benchmarks.request_path) in its quick form: every issue-60
target with a numeric value and a boolean verdict, and the greedy baseline timed in the same
run on every case."""
import json

import pytest

from benchmarks import request_path


@pytest.mark.slow
def test_quick_request_path_bench_has_every_target_and_the_greedy_baseline(tmp_path):
    out = tmp_path / "request_path.json"
    assert request_path.main(["--quick", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) >= {"machine", "settings", "cases", "plans", "targets", "wall_s"}
    assert doc["settings"]["quick"] is True
    assert set(doc["targets"]) == set(request_path.TARGETS)
    for name, t in doc["targets"].items():
        assert isinstance(t["value"], (int, float)) and not isinstance(t["value"], bool), name
        assert isinstance(t["ok"], bool), name
        assert t["ok"] == (t["value"] <= request_path.TARGETS[name]), name
    assert {c["kind"] for c in doc["cases"]} == {"fat-tree", "realistic"}
    assert {c["failures"] for c in doc["cases"] if c["kind"] == "realistic"} == {
        "none", "3 links", "1 spine", "1 spine + 3 links"}
    for c in doc["cases"]:
        rp = c["request_path"]
        assert set(rp) == set(request_path.ALGORITHMS)
        greedy = rp["greedy"]
        assert greedy["cpu_ms"] > 0 and greedy["wall_ms"] > 0 and greedy["repeats"] >= 1
        assert "'greedy'" in greedy["call"]
        assert all(r["cpu_over_greedy"] is not None for r in rp.values())
        assert c["build"]["flows"] > 0
    two_tier = [c for c in doc["cases"] if c["kind"] == "realistic"]
    # on two tiers jobs is auto's group with objective jobs, as the controller plans a POST
    assert all("'auto', 'jobs'" in c["request_path"]["jobs"]["call"] for c in two_tier)
    for p in doc["plans"]:
        assert p["default"]["wall_s"] > 0 and p["greedy"]["wall_s"] > 0
        assert p["default"]["algorithm"] == "auto" and p["greedy"]["algorithm"] == "greedy"
