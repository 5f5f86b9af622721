"""The control plane benchmark (benchmarks.controlplane) on a k = 4 fat-tree: every phase
runs, the first start makes every switch ready, a restart sends nothing, the ring crosses
pods, a core link goes down and comes back, an aggregation switch is lost, every phase has
a longest stretch between yields, and --per-host stripes the addresses."""
import json

import pytest

from benchmarks import controlplane


@pytest.mark.parametrize("extra", [[], ["--per-host"]], ids=["prefix", "per-host"])
def test_the_bench_runs_every_phase_on_a_small_fat_tree(tmp_path, extra):
    out = tmp_path / "controlplane.json"
    assert controlplane.main(["--fat-tree", "4", "--only", "fat-tree", "--out", str(out),
                              *extra]) == 0
    doc = json.loads(out.read_text())
    (tree,) = doc["fabrics"]
    phases = tree["phases"]
    assert list(phases) == ["first_start", "lldp_round", "restart", "post_ring",
                            "post_all_to_all", "views", "link_down", "link_up", "switch_lost",
                            "delete"]
    assert phases["first_start"]["ready"] and phases["first_start"]["messages"] > 0
    assert phases["restart"]["ready"] and phases["restart"]["messages"] == 0
    assert phases["post_ring"]["flows"] == 8 and phases["post_all_to_all"]["flows"] == 56
    assert phases["link_down"]["link"].startswith("a") and "-c" in phases["link_down"]["link"]
    assert phases["link_down"]["error"] is None and phases["link_up"]["error"] is None
    lost = phases["switch_lost"]
    assert lost["switch"].startswith("a") and lost["links"] == 4 and lost["error"] is None
    assert lost["moved_flows"] > 0 and lost["messages"] > 0
    assert all(p["yields"] > 0 and 0 < p["longest_stretch_cpu_ms"] < 1e3
               and " -> " in p["longest_stretch_at"] for p in phases.values())
    assert all(p["seconds"] > 0 and p["cpu_s"] >= 0 for p in phases.values())
    assert doc["per_host"] == bool(extra) and ("per host" in tree["fabric"]) == bool(extra)
