"""The three-tier grid of `make paper` (simulation.paper_clos), quick: files, shape, claims."""
import json

import pytest

from simulation.paper_clos import ALGORITHMS, main


@pytest.mark.slow
def test_quick_grid_writes_its_files_and_auto_meets_the_bound(tmp_path, capsys):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "clos_summary.json").read_text())
    assert summary == json.loads(capsys.readouterr().out)
    algs = summary["algorithms"]
    assert set(algs) == set(ALGORITHMS) and summary["cells"] == 3
    assert algs["auto"]["cells_at_lower_bound"] == algs["auto"]["cells"] == 3
    assert algs["auto"]["mean_slowdown"] < algs["ecmp"]["mean_slowdown"]
    assert algs["ecmp"]["mean_slowdown"] < algs["ecmp-polarised"]["mean_slowdown"]
    rows = (tmp_path / "clos_jobs.csv").read_text().splitlines()
    assert len(rows) == 1 + sum(a["jobs"] for a in algs.values())
    assert (tmp_path / "clos_slowdown_cdf.png").stat().st_size > 10_000
