"""benchmarks/churn.py runs and writes what the results page reads: per fabric and failed
link the re-plan against a fresh plan sent home, and the re-plan never above its max."""
import json

from benchmarks import churn


def test_the_churn_benchmark_compares_the_replan_with_a_fresh_plan(tmp_path):
    out = tmp_path / "churn.json"
    assert churn.main(["--fat-tree", "4", "--links", "3", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (fabric,) = doc["fabrics"]
    assert fabric["fabric"] == "fat-tree k=4" and len(fabric["cases"]) == 3
    for c in fabric["cases"]:
        assert c["routes_over_it"] > 0
        assert c["replan"]["moved"] >= c["routes_over_it"]  # the flows over it had to move
        assert c["replan"]["max_link_load"] <= c["fresh_sent_home"]["max_link_load"] + 1e-9
    assert doc["targets"]["replan_max_never_above_fresh"]["ok"] is True
