"""benchmarks.start_ab's bookkeeping, with stand-in children (no Open vSwitch): the load
before a run is read before it, a run that times out is interrupted so that its cleanups run
and is recorded as an error, and the medians skip it."""
import json

import pytest

from benchmarks import start_ab

DONE = """
import json, sys
print("RESULT " + json.dumps({"restart_ready_s": 2.5, "k": int(sys.argv[1]),
      "restart_connected": {"all_connected_s": 2.0, "ready_s": 2.5}}))
"""

# stands in for a run that hangs: it records that its cleanup ran on the interrupt
HANGS = """
import sys, time
try:
    print("building bridges", file=sys.stderr, flush=True)
    time.sleep(60)
finally:
    open({marker!r}, "w").write("cleaned up")
"""


def test_a_finished_run_has_its_figures_and_the_load_around_it(tmp_path, monkeypatch):
    loads = iter([(1.25, 0, 0), (3.5, 0, 0)])
    monkeypatch.setattr(start_ab.os, "getloadavg", lambda: next(loads))
    r = start_ab.run_one(str(tmp_path), 16, 60, child=DONE)
    assert r["k"] == 16 and r["restart_ready_s"] == 2.5
    assert r["load_before"] == 1.25 and r["load_after"] == 3.5  # before: read before the run
    assert r["restart_after_connected_s"] == 0.5


@pytest.mark.timeout(60)
def test_a_run_that_times_out_cleans_up_and_is_recorded_as_an_error(tmp_path, monkeypatch):
    marker = tmp_path / "cleanup"
    monkeypatch.setattr(start_ab, "CLEANUP_S", 20)
    r = start_ab.run_one(str(tmp_path), 16, 1.5, child=HANGS.format(marker=str(marker)))
    assert r["error"].startswith("timed out after 1.5 s: ")
    assert "building bridges" in r["error"]
    assert marker.read_text() == "cleaned up"  # interrupted, not killed
    assert "load_before" in r and "load_after" in r
    assert start_ab.medians([r, {"restart_ready_s": 3.0}]) == {"restart_ready_s": 3.0}


def test_every_finished_run_is_written_before_the_next(tmp_path, monkeypatch):
    out = tmp_path / "ab.json"
    seen = []

    def run_one(tree, k, timeout):
        if seen:  # the second run finds the first already written
            doc = json.loads(out.read_text())
            seen.append([len(t["runs"]) for t in doc["trees"]])
            raise KeyboardInterrupt
        seen.append("first")
        return {"restart_ready_s": 2.0}
    monkeypatch.setattr(start_ab, "run_one", run_one)
    monkeypatch.setattr(start_ab.os, "geteuid", lambda: 0)
    monkeypatch.setattr(start_ab, "commit_of", lambda tree: "abc1234")
    with pytest.raises(KeyboardInterrupt):
        start_ab.main(["--tree", str(tmp_path), "--repeat", "2", "--out", str(out)])
    assert seen == ["first", [1]]
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["trees"][0]["median"] == {"restart_ready_s": 2.0}
