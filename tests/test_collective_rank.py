"""``emulation/harness/collective_rank.py`` without Mininet: four gloo ranks over loopback (the
hosts' Debian Python with python3-torch), the all-to-all in gloo's schedule and in pairwise
rounds: every block checked exactly on arrival, a wall-clock span per iteration."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

PY = "/usr/bin/python3"
RANK = os.path.join(os.path.dirname(__file__), "..", "emulation", "harness", "collective_rank.py")


def _has_torch() -> bool:
    return os.path.exists(PY) and subprocess.run(
        [PY, "-c", "import torch"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(not _has_torch(), reason="needs /usr/bin/python3 with torch")
@pytest.mark.parametrize("schedule, port", [("all", 29631), ("pairwise", 29632),
                                            ("recvfirst", 29633)])
def test_all_to_all_blocks_arrive_exactly_in_either_schedule(schedule, port):
    world, procs = 4, []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        for r in range(world):
            procs.append(subprocess.Popen(
                [PY, RANK, "gloo", "--master", "127.0.0.1", "--port", str(port), "--rank",
                 str(r), "--world", str(world), "--mib", "0", "--a2a-mib", "1", "--iters", "2",
                 "--ip", "127.0.0.1", "--timeout", "60", "--a2a-schedule", schedule],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert all(p.returncode == 0 for p in procs), [e[-500:] for _o, e in outs]
    results = [json.loads(o.split("RESULT ", 1)[1]) for o, _e in outs]
    assert sorted(r["rank"] for r in results) == list(range(world))
    for r in results:
        assert r["max_error"] == 0.0
        assert len(r["spans"]) == 2 and all(b <= e for b, e in r["spans"])
