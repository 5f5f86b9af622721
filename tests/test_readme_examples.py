"""The README's example commands run as written: a broken example fails here (all of its
no-root blocks also run, their output checked, in tests/test_docs.py)."""
import json
import os
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme_command(prefix: str) -> list[str]:
    """The README line that starts with ``prefix`` (exactly one), as arguments, comments
    dropped."""
    with open(os.path.join(REPO, "README.md")) as f:
        lines = [line.strip() for line in f if line.strip().startswith(prefix)]
    assert len(lines) == 1, lines
    line = lines[0].split("  #", 1)[0]
    assert "[" not in line, line  # pasted as written: no optional parts
    return shlex.split(line)


def _run(argv: list[str], names: dict[str, str]) -> subprocess.CompletedProcess:
    if argv[0] == "mlroute":  # the console script; python -m controller is the same command
        argv = ["python", "-m", "controller", *argv[1:]]
    assert argv[:2] == ["python", "-m"], argv
    args = [sys.executable, "-m", *(names.get(a, a) for a in argv[2:])]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_workloads_example_runs_on_the_fabric_the_readme_makes(tmp_path):
    names = {"fabric.json": str(tmp_path / "fabric.json"), "jobs.json": str(tmp_path / "jobs.json")}
    fabric = _readme_command("mlroute fabric --spines 32")
    workloads = _readme_command("python -m simulation.workloads")
    assert fabric[fabric.index("--out") + 1] == "fabric.json"  # one file, both
    assert workloads[workloads.index("--fabric") + 1] == "fabric.json"
    assert workloads[workloads.index("--out") + 1] == "jobs.json"
    r = _run(fabric, names)
    assert r.returncode == 0, r.stderr
    r = _run(workloads, names)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    jobs = json.loads((tmp_path / "jobs.json").read_text())["jobs"]
    assert [j["id"] for j in jobs] == ["bloom-0", "llama2-70b-1", "gpt3-2"]


def test_workloads_on_a_too_small_fabric_says_what_it_needs(tmp_path):
    fab = tmp_path / "small.json"
    r = _run(["python", "-m", "controller", "fabric", "--spines", "4", "--leaves", "8",
              "--hosts-per-leaf", "2", "--out", str(fab)], {})
    assert r.returncode == 0, r.stderr
    r = _run(["python", "-m", "simulation.workloads", "--fabric", str(fab), "--jobs", "3",
              "--ring-size", "4"], {})
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "the jobs need 960 hosts" in r.stderr and "the fabric has 16 hosts" in r.stderr
    assert "--spines 32 --leaves 64 --hosts-per-leaf 32" in r.stderr
