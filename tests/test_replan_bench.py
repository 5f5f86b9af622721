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
                                   "replan_ms_k16_max", "off_path_moved_after_post",
                                   "above_bound_s"}
    # where the request path left the max above the bound: today's off-path stage and the
    # one before (``--old-bound``, read with git) from the same routes, how long above it
    for c in fabric["cases"]:
        if "off_path" in c["new"]:
            row = c["new"]["off_path"]
            assert row["above_bound_s"] >= row["ms"] / 1e3
            assert row["moved_total"] == c["new"]["moved"] + row["moved"]
            assert ("off_path_old" in c["new"]) == (doc["old_bound"] is not None)
    assert doc["old_bound"] in (replan.OLD_BOUND, None)
    # the off-path stage after the all-to-all's POST, per objective, today's code and before
    # (the code before is read with git: not there in a clone without history)
    for objective in ("flows", "jobs"):
        rows = fabric["post_all_to_all"]["off_path"][objective]
        assert set(rows) == ({"new", "old"} if doc["old_offpath"] else {"new"})
        for row in rows.values():
            assert 0 <= row["moved"] <= row["found_moved"]
            assert ("why" in row) == (row["moved"] > 0)
    assert doc["old_offpath"] in (replan.OLD_OFFPATH, None)
