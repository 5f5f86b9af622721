"""benchmarks/replan.py runs and writes what the results page reads: per failed element the
routes over it, the routes each code moved, the max against the lower bound."""
import json

from benchmarks import replan


def test_the_replan_benchmark_compares_failures_old_and_new(tmp_path):
    out = tmp_path / "replan.json"
    assert replan.main(["--fat-tree", "4", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (fabric,) = doc["fabrics"]
    assert fabric["fabric"] == "fat-tree k=4" and len(fabric["cases"]) == 4
    assert {c["element"] for c in fabric["cases"]} == {
        "core link", "leaf link", "aggregation switch", "core switch"}
    for c in fabric["cases"]:
        assert c["crossed"] > 0
        assert c["new"]["moved"] >= c["crossed"]  # the routes over it had to move
        assert c["new"]["max_link_load"] >= c["lower_bound"] - 1e-9
        assert c["new"]["restored"]["max_link_load"] >= c["lower_bound_restored"] - 1e-9
    assert set(doc["targets"]) == {"moved_over_crossed_max", "max_at_bound_after_off_path",
                                   "replan_ms_k16_max"}
