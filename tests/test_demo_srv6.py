"""``make demo-srv6 FABRIC=fattree``'s options reach the run (``emulation.demo_srv6``)."""
import argparse

from emulation import demo_srv6
from emulation.harness import router_jobs


def test_the_fat_tree_demo_passes_no_probes_and_steps_on(monkeypatch, tmp_path):
    seen = {}

    def run(folder, **kw):
        seen.update(kw, folder=folder)
        return {"jobs": {}}
    monkeypatch.setattr(router_jobs, "run", run)
    monkeypatch.setattr(router_jobs, "table", lambda doc: "table")
    args = argparse.Namespace(out=str(tmp_path / "out"), steps=3, no_probes=True)
    assert demo_srv6.fat_tree(args) == 0
    assert seen["probes"] is False and seen["steps"] == 3
    assert (tmp_path / "out" / "summary.json").exists()
