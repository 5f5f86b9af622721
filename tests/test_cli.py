"""The offline commands, run as a user runs them (subprocesses), including their error paths."""
import json
import re
import subprocess
import sys

import pytest

from controller.planners.registry import names
from controller.service.settings import Settings


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def files(tmp_path):
    fab = tmp_path / "fabric.json"
    assert run("controller", "fabric", "--spines", "4", "--leaves", "8", "--hosts-per-leaf", "2",
               "--out", str(fab)).returncode == 0
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [
        {"id": "a", "collective": "ring_allreduce", "ranks": [f"h{i}_0" for i in range(8)],
         "bytes": 8e8},
        {"id": "b", "flows": [{"src": "h0_1", "dst": "h5_1", "bytes": 1e8, "proto": "udp",
                               "sport": 1000, "dport": 4791}]}]}))
    return tmp_path, fab, jobs


def test_fabric_with_out_writes_the_file_and_prints_one_line(tmp_path):
    fab = tmp_path / "f.json"
    r = run("controller", "fabric", "--spines", "4", "--leaves", "8", "--hosts-per-leaf", "2",
            "--out", str(fab))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"wrote {fab}: 4 spines, 8 leaves, 16 hosts\n" and r.stderr == ""
    doc = json.loads(fab.read_text())
    assert len(doc["spines"]) == 4 and len(doc["hosts"]) == 16
    r = run("controller", "fabric", "--spines", "2", "--leaves", "2", "--hosts-per-leaf", "1")
    assert r.returncode == 0 and json.loads(r.stdout)["leaves"] == ["l0", "l1"]  # no --out


def test_plan_prints_routes(files):
    tmp, fab, jobs = files
    out = tmp / "routes.json"
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs), "--algorithm",
            "greedy", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"wrote {out}: greedy plan, objective flows: 9 routes, max link load 1 "
                        "(lower bound 1)\n") and r.stderr == ""  # one line, not the routes
    doc = json.loads(out.read_text())
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs), "--algorithm",
            "greedy")
    assert r.returncode == 0, r.stderr
    assert {k: v for k, v in doc.items() if k != "runtime_ms"} == {
        k: v for k, v in json.loads(r.stdout).items() if k != "runtime_ms"}
    assert doc["algorithm"] == "greedy" and doc["objective"] == "flows"
    assert len(doc["routes"]) == 9
    assert doc["routes"][8] == {"job": "b", "src": "h0_1", "dst": "h5_1", "proto": 17,
                                "sport": 1000, "dport": 4791, "spine": doc["routes"][8]["spine"]}
    assert doc["max_link_load"] == 1


@pytest.mark.slow
def test_the_command_is_mlroute_with_its_version():
    import controller
    r = run("controller", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: mlroute ")
    assert "python -m controller" in r.stdout  # the alias, named
    r = run("controller", "--version")
    assert r.returncode == 0 and r.stdout == f"mlroute {controller.__version__}\n"


def test_job_show_is_short_for_people_and_whole_with_json():
    """``job show``'s view of a real answer (``GET /v1/jobs/ID``): a line per fact, routes
    cut after ``ROUTES_SHOWN``; ``--json`` prints the answer itself (``run_job_command``)."""
    from controller.jobtext import job_text
    from controller.model.clos import Clos
    from controller.service.route_service import RouteService
    from emulation.harness.fake_switch import FakeSwitches
    f = Clos.generate(2, 4, 2, 100.0, wiring=True)
    svc = RouteService(FakeSwitches(f.dpids.values()), f)
    for d in f.dpids.values():
        svc.switch_connected(d, {})
    svc.post_job({"id": "r", "collective": "ring_allreduce", "bytes": 4e6,
                  "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"]})
    svc.post_job({"id": "m", "members": ["h0_1", "h1_1"], "learn": True})
    lines = job_text(svc.job_view("r")).splitlines()
    assert lines[:3] == ["job r: auto, flow mode, 4 flows, matrix declared",
                         "members: h0_0 h1_0 h2_0 h3_0",
                         "All-Reduce: predicted 0.48 ms, ideal 0.48 ms (1.00x), links of "
                         "100 Gbit/s"]
    assert lines[3].startswith("learning: 0 samples; not acting: no samples")
    assert lines[4] == "routes (src -> dst: path):"
    assert [l.split()[:3] for l in lines[5:]] == [
        ["h0_0", "->", "h1_0"], ["h1_0", "->", "h2_0"], ["h2_0", "->", "h3_0"],
        ["h3_0", "->", "h0_0"]]
    assert len(job_text(svc.job_view("r"), routes_shown=2).splitlines()) == 5 + 2 + 1
    lines = job_text(svc.job_view("m")).splitlines()
    assert lines[0] == "job m: auto, flow mode, 0 flows, matrix learning"
    assert lines[2].startswith("All-Reduce: no prediction: no flow to predict yet")


TIER_HEADS = ("leaf-agg", "agg-core")


def compare_table(out: str) -> dict[str, dict]:
    """``compare``'s table, read by its head (one form on every shape): per algorithm, and
    ``ideal``, its objective, max load, the max of each tier (``tiers``, on three tiers),
    links at max, slowest rate and each job's All-Reduce seconds (``ar``). The table ends at
    the first empty line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("algorithm "))
    spans = list(re.finditer(r"\S+(?: \S+)*", lines[start]))
    heads = [m[0] for m in spans]
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        # the first two columns are left-aligned, the figures right-aligned under their head
        cells = {"algorithm": line[:spans[1].start()].strip(),
                 "objective": line[spans[1].start():spans[1].end()].strip()}
        cells |= {h: line[spans[i - 1].end():spans[i].end()].strip()
                  for i, h in enumerate(heads) if i > 1}
        number = (lambda h: float(cells[h]) if cells[h] else None)
        rows[cells["algorithm"]] = {
            "objective": cells["objective"], "max": number("max load"),
            "at_max": int(cells["at max"]) if cells["at max"] else None,
            "slowest": number("slowest Gb/s"),
            "tiers": {h: number(h) for h in heads if h in TIER_HEADS},
            "ar": {h[:-len(" AR s")]: number(h) for h in heads if h.endswith(" AR s")}}
    return rows


def test_compare_table(files):
    _, fab, jobs = files
    r = run("controller", "compare", "--fabric", str(fab), "--jobs", str(jobs))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "fabric: 4 spines, 8 leaves, 16 hosts"
    assert re.split(r"\s{2,}", lines[1])[:3] == ["algorithm", "objective", "max load"]
    rows = compare_table(r.stdout)
    # every planner, after the ideal, then the spraying baseline: one table on every fabric
    assert list(rows) == ["ideal"] + names() + ["spray"] == ["ideal", "greedy", "ecmp",
        "ecmp-polarised", "edge-coloring", "annealing", "ilp", "split", "auto", "jobs", "spray"]
    # the controller's objective where it applies (auto on this fabric; jobs fixes its own),
    # flows elsewhere
    assert {a: row["objective"] for a, row in rows.items()} == {"ideal": "", "spray": "LP bound"} | {
        a: Settings.objective if a == "auto" else "jobs" if a == "jobs" else "flows"
        for a in names()}
    assert rows["jobs"] | {"algorithm": ""} == rows["auto"] | {"algorithm": ""}  # one plan
    assert rows["ideal"]["max"] == 1 and rows["ideal"]["ar"] == {"a": 0.112, "b": 0.008}
    assert rows["greedy"] | {"objective": ""} == rows["ideal"] | {
        "at_max": 18, "slowest": 100.0}  # the greedy reaches the ideal
    assert all(row["tiers"] == {} for row in rows.values())  # one tier: no column per tier
    # what each objective ranks by, after the table
    assert lines[-4:] == ["objective flows: max-min fair link flow counts, the paper's",
                          "objective jobs: the jobs' predicted iteration slowdowns, worst then "
                          "mean, then flow counts",
                          "spray: per-packet spraying over every alive path, the fluid LP bound "
                          "(the best split for the slowest flow), at 0.99 of its goodput "
                          "(--spray-penalty 0.01); not a plan mlroute installs",
                          "ideal: the max link load's lower bound; each job alone at line rate"]


def test_compare_has_the_same_table_on_a_fat_tree(tmp_path):
    """The same table on three tiers, with a column per tier; --json has the same fields."""
    fab = tmp_path / "fattree.json"
    assert run("controller", "fabric", "--fat-tree", "4", "--gbps", "0.005",
               "--out", str(fab)).returncode == 0
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [
        {"id": f"ring{k}", "collective": "ring_allreduce", "bytes": 4e6,
         "ranks": [f"h{i}_{k}" for i in (0, 2, 4, 6, 1, 3, 5, 7)]} for k in (0, 1)]}))
    args = ("controller", "compare", "--fabric", str(fab), "--jobs", str(jobs), "--algorithms",
            "ecmp,auto,jobs")
    r = run(*args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("fabric: 1 plane(s) x 3 tiers: 8 leaves")
    assert lines[1].split() == ["algorithm", "objective", "max", "load", "leaf-agg", "agg-core",
                                "at", "max", "slowest", "Gb/s", "ring0", "AR", "s", "ring1",
                                "AR", "s", "runtime", "ms"]
    rows = compare_table(r.stdout)
    assert list(rows) == ["ideal", "ecmp", "auto", "jobs"]
    assert rows["ideal"]["max"] == 1 and rows["ideal"]["ar"] == {"ring0": 11.2, "ring1": 11.2}
    # flows on a Clos fabric but auto (the controller's default objective, jobs) and the jobs planner
    assert [rows[a]["objective"] for a in ("ecmp", "auto", "jobs")] == ["flows", "jobs", "jobs"]
    assert rows["ecmp"]["max"] == 4 and rows["ecmp"]["tiers"] == {"leaf-agg": 2, "agg-core": 4}
    assert rows["ecmp"]["ar"] == {"ring0": 44.8, "ring1": 44.8}
    assert rows["auto"]["max"] == 1 and rows["auto"]["at_max"] == 64
    assert rows["auto"]["slowest"] == 0.005 and rows["auto"]["ar"]["ring0"] == 11.2
    assert lines[-1].endswith("; leaf-agg, agg-core: the max load of each tier")
    assert "objective jobs: " in r.stdout
    r = run(*args, "--json")
    doc = json.loads(r.stdout)
    assert [set(x) for x in doc] == [{"algorithm", "objective", "max_link_load", "links_at_max",
                                      "lower_bound", "max_load_by_tier", "slowest_gbps",
                                      "allreduce_s", "runtime_ms", "info", "cut_bound_s",
                                      "cuts"}] * 3
    assert all(x["cuts"] == [] for x in doc)  # no job's demand exceeds a cut


@pytest.mark.slow
def test_simulate_cli(files):
    _, fab, jobs = files
    r = run("simulation.simulate", "--fabric", str(fab), "--jobs", str(jobs), "--iterations", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["jobs"]["a"]["allreduce_s"]) == 2
    assert doc["jobs"]["a"]["allreduce_s"][0] == pytest.approx(doc["jobs"]["a"]["ideal_s"])
    assert set(doc) >= {"jobs", "flows", "planner_ms"}


@pytest.mark.slow
@pytest.mark.parametrize("jobs_text, message", [
    ("{not json", "not valid JSON"),
    ('{"jobs": [{"id": "x", "ranks": ["h0_0", "zz"], "bytes": 1}]}', "unknown host 'zz'"),
    ('{"jobs": [{"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": -1}]}', "must be positive"),
    ('{"jobs": [{"id": "x", "ranks": [], "bytes": 1}]}', "ring 0 is empty"),
])
def test_bad_jobs_exit_nonzero_with_one_line(files, jobs_text, message):
    tmp, fab, _ = files
    bad = tmp / "bad.json"
    bad.write_text(jobs_text)
    for cmd in (("controller", "plan"), ("controller", "compare"), ("simulation.simulate",)):
        r = run(*cmd, "--fabric", str(fab), "--jobs", str(bad))
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and message in r.stderr and r.stdout == ""


@pytest.mark.slow
def test_all_spines_down_and_unknown_algorithm(files):
    tmp, _, jobs = files
    fab = tmp / "dead.json"
    assert run("controller", "fabric", "--spines", "2", "--leaves", "8", "--failed-spines", "2",
               "--out", str(fab)).returncode == 0
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs))
    assert r.returncode == 2 and "no alive path from h0_0 to h1_0" in r.stderr
    r = run("controller", "plan", "--fabric", str(tmp / "fabric.json"), "--jobs", str(jobs),
            "--algorithm", "magic")
    assert r.returncode == 2 and "unknown algorithm 'magic'" in r.stderr


@pytest.mark.slow
def test_missing_file(files):
    tmp, fab, _ = files
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(tmp / "nope.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr


@pytest.mark.slow
def test_plan_auto_is_the_default_and_takes_objective_and_budget(files):
    """The defaults are the controller's (Settings): auto, and its objective."""
    _, fab, jobs = files
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["algorithm"] == Settings.algorithm == "auto" and doc["info"]["optimal"] is True
    assert doc["objective"] == doc["info"]["objective"] == Settings.objective
    assert doc["info"]["max_link_load"] == doc["max_link_load"] == doc["lower_bound"]
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs), "--algorithm",
            "auto", "--objective", "jobs", "--ilp-time-limit", "0")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)["info"]
    assert info["objective"] == "jobs" and set(info["predicted_slowdown"]) == {"a", "b"}
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs), "--objective",
            "flows")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["objective"] == doc["info"]["objective"] == "flows"
    assert "predicted_slowdown" not in doc["info"]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("--objective", "bogus"), "unknown objective 'bogus'"),
    (("--algorithm", "greedy", "--objective", "jobs"), "objective 'jobs' needs algorithm 'auto'"),
    (("--algorithm", "auto", "--ilp-time-limit", "-1"), "ilp_time_limit must be a number"),
    (("--algorithm", "ilp", "--ilp-time-limit", "0"), "time limit must be a positive number"),
])
def test_plan_bad_objective_and_budget(files, args, message):
    _, fab, jobs = files
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs), *args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and message in r.stderr


# ---- job add|delete|list|show against a recording stand-in of the REST API -----------------
from emulation.harness.ports import free_port  # noqa: E402
from tests.fake_controller import FakeController  # noqa: E402


@pytest.fixture
def ctl():
    with FakeController(token="tok") as f:
        yield f


def job(ctl, *args, token=True):
    token = token and "--token-file" not in args
    return run("controller", "job", *args, "--url", ctl.url, *(["--token", "tok"] if token else []))


@pytest.mark.slow
def test_job_add_members_list_show_delete(ctl, tmp_path):
    r = job(ctl, "add", "--members", "10.0.0.1, h1_0,10.0.2.1", "--id", "j", "--bytes", "4e6",
            "--no-learn", "--algorithm", "greedy", "--mode", "host")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("job j added")
    assert ctl.writes()[0]["body"] == {"id": "j", "members": ["10.0.0.1", "h1_0", "10.0.2.1"],
                                       "bytes": 4e6, "learn": False, "algorithm": "greedy",
                                       "mode": "host"}
    assert ctl.writes()[0]["headers"]["Authorization"] == "Bearer tok"
    f = tmp_path / "job.json"
    f.write_text(json.dumps({"id": "r", "collective": "ring_allreduce",
                             "ranks": ["h0_0", "h1_0"], "bytes": 1e6}))
    tok = tmp_path / "token"
    tok.write_text("tok\n")
    r = run("controller", "job", "add", str(f), "--url", ctl.url, "--token-file", str(tok),
            "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["job"] == ctl.jobs["r"] == json.loads(f.read_text())
    r = job(ctl, "list", token=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "algorithm", "mode"]
    assert [l.split()[0] for l in lines[1:]] == ["j", "r"]
    r = job(ctl, "show", "j", token=False)  # for people: a few lines
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["job j: 0 flows, matrix learning",
                                         "members: 10.0.0.1 h1_0 10.0.2.1"]
    r = job(ctl, "show", "j", "--json", token=False)
    assert r.returncode == 0 and json.loads(r.stdout)["job"]["members"][1] == "h1_0"
    r = job(ctl, "show", "j", "--ports", token=False)
    assert r.returncode == 0 and r.stdout.startswith("# source_ip")
    r = job(ctl, "delete", "j", "r")
    assert r.returncode == 0 and r.stdout.splitlines() == ["job j deleted", "job r deleted"]
    assert ctl.jobs == {}


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("add", "--members", "a,b"), "--members needs --id"),
    (("add", "--members", "a,,b", "--id", "x"), "an empty member name"),
    (("add", "--members", "a,b", "--id", "x", "--bytes", "0"), "--bytes must be positive"),
    (("add",), "needs a job file or --members"),
    (("add", "/nonexistent.json"), "cannot read /nonexistent.json"),
    (("add", "--token-file", "/nonexistent", "--members", "a,b", "--id", "x"),
     "cannot read token file /nonexistent"),
    (("add", "--token-file", "/dev/null", "--token", "t", "--members", "a,b", "--id", "x"),
     "--token or --token-file, not both"),
])
def test_job_bad_input_exits_2_and_sends_nothing(ctl, args, message):
    r = job(ctl, *args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and message in r.stderr
    assert ctl.requests == []


@pytest.mark.slow
def test_job_controller_errors_exit_1_with_one_line(ctl):
    assert job(ctl, "add", "--members", "a,b", "--id", "x").returncode == 0
    r = job(ctl, "add", "--members", "a,b", "--id", "x")  # 409
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "HTTP 409: job 'x' already exists" in r.stderr
    r = job(ctl, "delete", "x", token=False)  # 401: nothing deleted
    assert r.returncode == 1 and "HTTP 401" in r.stderr and "Bearer" in r.stderr
    assert list(ctl.jobs) == ["x"]
    r = job(ctl, "show", "nope")
    assert r.returncode == 1 and "HTTP 404: no job 'nope'" in r.stderr
    r = run("controller", "job", "list", "--url", f"http://127.0.0.1:{free_port()}",
            "--timeout", "3")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: GET http://127.0.0.1:") and "unreachable" in r.stderr


@pytest.mark.slow
def test_job_add_answered_202_warns(ctl):
    """Redundant controllers whose etcd died during the write answer 202 with an operation."""
    answer = ctl.answer
    op = {"id": "c1/3/1", "state": "pending", "see": "http://c1/v1/cluster",
          "reason": "etcd at http://e:2379 became unreachable during the request"}
    ctl.answer = lambda *a: (202, dict(answer(*a)[1], operation=op))
    r = job(ctl, "add", "--members", "a,b", "--id", "x")
    assert r.returncode == 0 and r.stdout.startswith("job x added")
    assert r.stderr.startswith("warning: etcd at http://e:2379 became unreachable")
    assert "c1/3/1" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.slow
def test_plan_split_takes_max_parts(files):
    _, fab, jobs = files
    for n in ("1", "0"):
        r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs),
                "--algorithm", "split", "--max-parts", n)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout).get("info", {})
        if n == "1":
            assert info.get("max_parts", 1) == 1
    r = run("controller", "plan", "--fabric", str(fab), "--jobs", str(jobs), "--algorithm",
            "split", "--max-parts", "-2")
    assert r.returncode == 2 and "max_parts must be an integer >= 0" in r.stderr


@pytest.mark.parametrize("main, name", [
    ("simulation.simulate", "mlroute-simulate"), ("simulation.workloads", "mlroute-workloads"),
    ("controller.integrations.slurm", "mlroute-slurm"), ("controller.agent.main", "mlroute-agent"),
    ("controller.cli", "mlroute")])
def test_every_console_script_prints_its_version(main, name, capsys):
    import importlib

    from controller import __version__
    try:  # the Slurm hooks return 0 whatever happens (Slurm must not drain for mlroute)
        code = importlib.import_module(main).main(["--version"])
    except SystemExit as e:
        code = e.code
    assert code == 0
    assert capsys.readouterr().out.strip() == f"{name} {__version__}"
