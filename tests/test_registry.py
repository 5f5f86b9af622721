"""The one planner registry (issue 37 item 3, ``controller/planners/registry.py``): every planner
name the CLI and REST accept, how it runs on a single two-tier plane and on a Clos fabric, and
the one place that refuses a name for a shape.

What must hold: the shape matrix is the one pinned here (a change is a decision, made here);
every name that runs on a shape plans there, offline and in the controller (jobs posted over
REST on fake switches, each route followed by its packets); a name a shape refuses is an
``InputError`` naming the algorithm, the shape and the reason, and a 400 that changes nothing;
the help texts, the REST errors, ``Settings``, the OpenAPI schema and the reference pages list
the same names.
"""
import json
import os
from dataclasses import replace

import pytest

from controller import cli
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import parse_job
from controller.planners import PLANNERS, planned_as, planner_for
from controller.planners.plan import make_plan, planner_options, run_options
from controller.planners.registry import CLOS, TWO_TIER, Way, listing, names, way
from controller.service import api
from controller.service.route_service import RouteService
from controller.service.settings import Settings
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.helpers import FakeClock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (runs on a single two-tier plane, runs on Clos): the decision, pinned
MATRIX = {"greedy": (True, True), "ecmp": (True, True), "ecmp-polarised": (True, True),
          "edge-coloring": (True, True), "annealing": (True, True), "ilp": (True, True),
          "split": (True, True), "auto": (True, True), "jobs": (True, True)}
SHAPES = {TWO_TIER: lambda: Clos.generate(4, 4, 2, 0.01, wiring=True),
          CLOS: lambda: Clos.fat_tree(4, 2, link_gbps=0.02).wire()}


def refuse(monkeypatch, name: str, shape: str, reason: str = "a test says so") -> None:
    """Make the registry refuse ``name`` on ``shape`` (every name runs everywhere today)."""
    p = PLANNERS[name]
    key = "two_tier" if shape == TWO_TIER else "clos"
    monkeypatch.setitem(PLANNERS, name, replace(p, **{key: Way("none", refused=reason)}))


# ---- the matrix ---------------------------------------------------------------------------
def test_the_shape_matrix_is_the_decided_one():
    assert list(PLANNERS) == list(MATRIX) == names()
    got = {n: (n in names(TWO_TIER), n in names(CLOS)) for n in PLANNERS}
    assert got == MATRIX
    for name, p in PLANNERS.items():
        assert p.name == name and p.what
        for shape in (TWO_TIER, CLOS):
            w = p.on(shape)
            assert w.how and (w.run is not None or w.refused)  # a refusal says why


def test_the_two_tier_alias_is_that_planner():
    """On two tiers jobs is auto with the jobs objective: the same function and options, and
    the controller's group of that planner. ecmp-polarised is its own name there too: the
    two-tier ecmp with the salt alone (the leaf tier's hash of the Clos planner)."""
    from controller.planners.auto import auto
    from controller.planners.ecmp import ecmp
    assert planner_for("ecmp-polarised", TWO_TIER).func is ecmp
    assert planner_for("ecmp-polarised", TWO_TIER).keywords == {"polarised": True}
    assert planner_for("jobs", TWO_TIER).func is auto
    assert planner_for("jobs", TWO_TIER).keywords == {"objective": "jobs"}
    assert planned_as("jobs", TWO_TIER) == ("auto", "jobs")
    assert planned_as("ecmp-polarised", TWO_TIER) == ("ecmp-polarised", None)
    assert planner_options("jobs", ilp_time_limit=3) == {"ilp_time_limit": 3, "objective": "jobs"}
    assert planner_options("ecmp-polarised", salt=5) == planner_options("ecmp", salt=5)
    with pytest.raises(InputError, match="'jobs' plans with objective 'jobs', not 'flows'"):
        planner_options("jobs", objective="flows")
    for name in PLANNERS:  # on Clos every name is its own planner
        assert planned_as(name, CLOS) == (name, None)


def small_jobs(fabric) -> list:
    hosts = sorted(fabric.host_leaves)
    ring = {"id": "r", "collective": "ring_allreduce", "ranks": hosts[::2], "bytes": 1e6}
    pairs = {"id": "a", "flows": [{"src": a, "dst": b, "bytes": 2e6, "dport": 5000 + k}
                                  for k, (a, b) in enumerate(zip(hosts[1::2], hosts[3::2]))]}
    return [parse_job(d, fabric) for d in (ring, pairs)]


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
@pytest.mark.parametrize("name", list(MATRIX))
def test_every_name_plans_on_the_shapes_that_run_it(name, shape):
    fabric = SHAPES[shape]()
    jobs = small_jobs(fabric)
    if not MATRIX[name][shape == CLOS]:
        with pytest.raises(InputError, match=f"'{name}' does not run on {shape} fabrics"):
            planner_for(name, fabric)
        return
    run = run_options(fabric, name, ilp_time_limit=5.0)  # each shape's options: the one entry
    doc = make_plan(fabric, jobs, run.algorithm, **run.options).to_dict()
    assert doc["algorithm"] == name and len(doc["routes"]) == sum(len(j.flows()) for j in jobs)
    assert doc["max_link_load"] >= doc["lower_bound"] > 0


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
def test_a_refusal_names_the_algorithm_the_shape_and_the_reason(shape, monkeypatch):
    refuse(monkeypatch, "annealing", shape, "no annealing here")
    with pytest.raises(InputError) as e:
        planner_for("annealing", SHAPES[shape]())
    text = str(e.value)
    assert "'annealing'" in text and f"on {shape} fabrics" in text and "no annealing here" in text
    assert "annealing" not in text.split("choose from")[1]  # the choices are the shape's
    other = CLOS if shape == TWO_TIER else TWO_TIER
    assert way("annealing", other).run is not None
    assert f"not on {shape} fabrics: annealing" in listing()
    Settings(algorithm="annealing")  # valid for some shape: a valid default
    with pytest.raises(InputError, match="unknown algorithm 'magic' .choose from greedy, ecmp"):
        planner_for("magic", other)


# ---- the controller -----------------------------------------------------------------------
def serve(shape: str, **settings):
    fabric = SHAPES[shape]()
    sw = FakeSwitches(fabric.dpids.values(), fabric=fabric)
    clock = FakeClock(100.0)
    svc = RouteService(sw, fabric, clock=clock, sleep=clock.sleep,
                       planner_opts={a: planner_options(a, ilp_time_limit=5.0) for a in PLANNERS},
                       **settings)
    for d in fabric.dpids.values():
        name = fabric.switch_of_dpid[d]
        svc.switch_connected(d, {p: True for peer in fabric.ports[name]
                                 for p in fabric.ports_to(name, peer)})
    return fabric, sw, svc


def post(svc, doc):
    return api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())


def job_doc(fabric, jid: str, **opts) -> dict:
    hosts = sorted(fabric.host_leaves)
    return {"id": jid, "collective": "ring_allreduce", "ranks": hosts[:: 3 if jid == "b" else 2],
            "bytes": 1e6, "proto": "udp", "dport": 4791 if jid == "a" else 5001, **opts}


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
@pytest.mark.parametrize("name", list(MATRIX))
def test_the_controller_runs_every_name_its_shape_runs(name, shape):
    """A job of each name beside an auto job: 201, the view names its algorithm, every route's
    packets reach their destination over the planned switches."""
    fabric, sw, svc = serve(shape)
    assert post(svc, job_doc(fabric, "a"))[0] == 201
    code, doc = post(svc, job_doc(fabric, "b", algorithm=name))
    assert code == 201, doc
    view = api.handle(svc, "GET", "/v1/jobs/b")[1]
    assert view["algorithm"] == name and view["unroutable_flows"] == 0
    for r in view["routes"]:
        path, reached, labels = trace(fabric, sw, r["src"], r["dst"], r.get("proto", 6),
                                      r.get("sport", 0), r.get("dport", 0))
        assert reached == r["dst"] and labels == []
        where = r.get("path") or ([fabric.hosts[r["src"]], r["spine"], fabric.hosts[r["dst"]]]
                                  if r.get("spine") else path)
        assert path == where, (r, path)


def test_jobs_on_two_tiers_is_planned_in_the_auto_group_of_objective_jobs():
    """The controller plans a two-tier ``jobs`` job with the auto jobs of objective jobs: one
    planner group (churn from the routes in force, the rest off the request path)."""
    fabric, sw, svc = serve(TWO_TIER)
    assert post(svc, job_doc(fabric, "a", objective="jobs"))[0] == 201
    code, doc = post(svc, job_doc(fabric, "b", algorithm="jobs"))
    assert code == 201, doc
    from controller.service import decide
    change = decide.optimize(svc.state, svc.settings)  # every running job, per planner group
    assert change.replanned.groups == [("auto", "jobs")]
    assert svc.unproven <= {("auto", "jobs")}
    code, doc = post(svc, job_doc(fabric, "c", algorithm="jobs", objective="flows"))
    assert code == 400 and "plans with objective 'jobs', not 'flows'" in doc["error"]


@pytest.mark.parametrize("default", [False, True], ids=["asked", "default"])
@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
def test_a_name_the_shape_refuses_is_a_400_that_changes_nothing(shape, default, monkeypatch):
    """Asked by the job or the controller's default (valid for the other shape): a 400 naming
    the algorithm, the shape and the reason; no table, job, route, number or event changes."""
    refuse(monkeypatch, "ilp", shape, "a test says so")
    fabric, sw, svc = serve(shape, **({"algorithm": "ilp"} if default else {}))
    assert post(svc, job_doc(fabric, "a", algorithm="greedy"))[0] == 201
    before = (json.dumps({d: sorted(map(str, t.values())) for d, t in sw.rules.items()}),
              api.handle(svc, "GET", "/v1/jobs")[1], api.handle(svc, "GET", "/v1/routes")[1],
              svc.state.next_number, svc.state.version, len(svc.state.events))
    code, doc = post(svc, job_doc(fabric, "b", **({} if default else {"algorithm": "ilp"})))
    assert code == 400, doc
    assert doc["error"].startswith(f"job b: algorithm 'ilp' does not run on {shape} fabrics")
    assert "a test says so" in doc["error"]
    code, advice = api.handle(svc, "POST", "/v1/advise", json.dumps(
        job_doc(fabric, "b", algorithm="ilp")).encode())
    assert code == 400 and "does not run on" in advice["error"]
    after = (json.dumps({d: sorted(map(str, t.values())) for d, t in sw.rules.items()}),
             api.handle(svc, "GET", "/v1/jobs")[1], api.handle(svc, "GET", "/v1/routes")[1],
             svc.state.next_number, svc.state.version, len(svc.state.events))
    assert after == before


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
def test_advice_plans_with_every_name(shape):
    fabric, sw, svc = serve(shape)
    for name in names(shape):
        code, doc = api.handle(svc, "POST", "/v1/advise", json.dumps(
            job_doc(fabric, "r", algorithm=name)).encode())
        assert code == 200 and doc["algorithm"] == name, (name, doc)
        assert doc["jobs"]["r"]["predicted_allreduce_s"]["given"] > 0


# ---- one list of names everywhere ---------------------------------------------------------
def help_of(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return capsys.readouterr().out


def test_help_errors_settings_schema_and_reference_list_the_same_names(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one name per word, none cut at its dash
    every = list(PLANNERS)
    from controller.shell.flags import OPTS
    flag = next(o for o in OPTS if o.name == "mlroute-algorithm")
    texts = {"flag": flag.help, "plan": help_of(capsys, "plan"),
             "compare": help_of(capsys, "compare"), "job add": help_of(capsys, "job", "add")}
    for where, text in texts.items():  # the registry's listing, whole
        assert ", ".join(every) in " ".join(text.split()), where
    assert listing() == ", ".join(every)  # no shape refuses a name today
    errors = {}
    with pytest.raises(InputError) as e:
        Settings(algorithm="magic")
    errors["Settings"] = str(e.value)
    fabric, sw, svc = serve(TWO_TIER)
    errors["REST"] = post(svc, job_doc(fabric, "x", algorithm="magic"))[1]["error"]
    with pytest.raises(InputError) as e:
        planner_for("magic", CLOS)
    errors["registry"] = str(e.value)
    for where, text in errors.items():
        assert f"(choose from {', '.join(every)})" in text, where
    for name in every:
        Settings(algorithm=name)  # every name valid for some shape is a valid default
    schema = api.openapi()["components"]["schemas"]["Job"]["properties"]["algorithm"]
    assert schema["enum"] == every
    with open(os.path.join(ROOT, "docs", "reference", "options.md")) as fh:
        page = fh.read()
    table = page[page.index("## Planners"):]
    rows = [line.split("|")[1].strip(" `") for line in table.splitlines()
            if line.startswith("| `")]
    assert rows == every
