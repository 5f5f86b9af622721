"""The one planner registry (issues 37, 60, ``controller/planners/registry.py``): every planner
name the CLI and REST accept, and the one planner function it runs on every fabric.

What must hold: each name is one entry with one function (its Clos planner, imported when
asked) and the run options it takes; every name plans on every shape, offline and in the
controller (jobs posted over REST on fake switches, each route followed by its packets); an
unknown name is an ``InputError`` naming the choices, and a 400 that changes nothing; the help
texts, the REST errors, ``Settings``, the OpenAPI schema and the reference pages list the same
names.
"""
import inspect
import json
import os

import pytest

from controller import cli
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import parse_job
from controller.planners import PLANNERS, planner_for
from controller.planners.leaf_spine import kernel_for
from controller.planners.plan import make_plan, planner_options, run_options
from controller.planners.registry import CLOS, TWO_TIER, Ref, listing, names, runs_as
from controller.service import api
from controller.service.route_service import RouteService
from controller.service.settings import Settings
from emulation.harness.fake_switch import FakeSwitches, trace
from tests.helpers import FakeClock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> its Clos planner (module, function, keywords) and the run options it takes: pinned
MATRIX = {"greedy": (("clos_greedy", "clos_greedy", ()), ()),
          "ecmp": (("clos_ecmp", "clos_ecmp", ()), ("salt",)),
          "ecmp-polarised": (("clos_ecmp", "clos_ecmp", (("polarised", True),)), ("salt",)),
          "edge-coloring": (("clos_tiers", "edge_colouring", ()), ()),
          "annealing": (("clos_annealing", "clos_annealing", ()), ("seed",)),
          "ilp": (("clos_ilp", "clos_ilp", ()), ("time_limit",)),
          "split": (("clos_split", "clos_split", ()), ("max_parts", "objective")),
          "auto": (("clos_objective", "auto_by_objective", ()), ("ilp_time_limit", "objective")),
          "jobs": (("clos_objective", "auto_by_objective", (("objective", "jobs"),)),
                   ("ilp_time_limit",))}
SHAPES = {TWO_TIER: lambda: Clos.generate(4, 4, 2, 0.01, wiring=True),
          CLOS: lambda: Clos.fat_tree(4, 2, link_gbps=0.02).wire()}


# ---- the registry -------------------------------------------------------------------------
def test_one_planner_per_name():
    assert list(PLANNERS) == list(MATRIX) == names()
    for name, p in PLANNERS.items():
        assert p.name == name and p.what and p.how
        assert (tuple(p.run), p.takes) == MATRIX[name]
        fn = planner_for(name)
        params = inspect.signature(fn).parameters
        assert set(p.takes) <= set(params), name  # every run option it takes, it accepts


def test_jobs_is_auto_with_the_jobs_objective():
    """jobs fixes the jobs objective and runs auto's planner with it, on every fabric: one
    run of the same function and options (``run_options``); the controller plans it in auto's
    group of objective jobs on every fabric (``replanning.group_of``)."""
    assert runs_as("jobs") == ("auto", "jobs") and runs_as("ecmp-polarised") == (
        "ecmp-polarised", None)
    assert planner_for("jobs").func is planner_for("auto")
    assert planner_for("jobs").keywords == {"objective": "jobs"}
    assert run_options(None, "jobs").options == run_options(None, "auto", objective="jobs").options
    assert planner_options("jobs", ilp_time_limit=3) == {"ilp_time_limit": 3}
    assert planner_options("ecmp-polarised", salt=5) == planner_options("ecmp", salt=5)
    with pytest.raises(InputError, match="'jobs' plans with objective 'jobs', not 'flows'"):
        planner_options("jobs", objective="flows")


def test_the_two_tier_kernels_take_the_same_options():
    """The kernels (``leaf_spine.kernel_for``: the two-tier ``Problem`` of ``run_planner``'s
    callers) are the same algorithms, with the same run options."""
    from controller.planners.auto import auto
    from controller.planners.ecmp import ecmp
    assert kernel_for("ecmp-polarised").func is ecmp
    assert kernel_for("ecmp-polarised").keywords == {"polarised": True}
    assert kernel_for("jobs").func is auto and kernel_for("jobs").keywords == {
        "objective": "jobs"}
    assert isinstance(PLANNERS["auto"].run, Ref)
    with pytest.raises(InputError, match="unknown algorithm 'magic'"):
        kernel_for("magic")


def small_jobs(fabric) -> list:
    hosts = sorted(fabric.host_leaves)
    ring = {"id": "r", "collective": "ring_allreduce", "ranks": hosts[::2], "bytes": 1e6}
    pairs = {"id": "a", "flows": [{"src": a, "dst": b, "bytes": 2e6, "dport": 5000 + k}
                                  for k, (a, b) in enumerate(zip(hosts[1::2], hosts[3::2]))]}
    return [parse_job(d, fabric) for d in (ring, pairs)]


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
@pytest.mark.parametrize("name", list(MATRIX))
def test_every_name_plans_on_every_shape(name, shape):
    fabric = SHAPES[shape]()
    jobs = small_jobs(fabric)
    run = run_options(fabric, name, ilp_time_limit=5.0)  # one dialect: the one entry
    doc = make_plan(fabric, jobs, run.algorithm, **run.options).to_dict()
    assert doc["algorithm"] == name and len(doc["routes"]) == sum(len(j.flows()) for j in jobs)
    assert doc["max_link_load"] >= doc["lower_bound"] > 0


def test_an_unknown_name_is_refused_naming_the_choices():
    """The one refusal left (every name runs everywhere): by the registry, its kernels' table,
    the run options and the controller's settings alike."""
    for refuse in (planner_for, kernel_for,
                   lambda n: run_options(None, n), lambda n: Settings(algorithm=n)):
        with pytest.raises(InputError, match="unknown algorithm 'magic' .choose from greedy, "
                                             "ecmp, ecmp-polarised, edge-coloring"):
            refuse("magic")


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


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
def test_an_unknown_name_is_a_400_that_changes_nothing(shape):
    """Asked by a job or its advice: a 400 naming the algorithm and the choices; no table, job,
    route, number or event changes."""
    fabric, sw, svc = serve(shape)
    assert post(svc, job_doc(fabric, "a", algorithm="greedy"))[0] == 201
    before = (json.dumps({d: sorted(map(str, t.values())) for d, t in sw.rules.items()}),
              api.handle(svc, "GET", "/v1/jobs")[1], api.handle(svc, "GET", "/v1/routes")[1],
              svc.state.next_number, svc.state.version, len(svc.state.events))
    code, doc = post(svc, job_doc(fabric, "b", algorithm="magic"))
    assert code == 400, doc
    assert doc["error"].startswith("job b: unknown algorithm 'magic' (choose from greedy, ")
    code, advice = api.handle(svc, "POST", "/v1/advise", json.dumps(
        job_doc(fabric, "b", algorithm="magic")).encode())
    assert code == 400 and "unknown algorithm 'magic'" in advice["error"]
    after = (json.dumps({d: sorted(map(str, t.values())) for d, t in sw.rules.items()}),
             api.handle(svc, "GET", "/v1/jobs")[1], api.handle(svc, "GET", "/v1/routes")[1],
             svc.state.next_number, svc.state.version, len(svc.state.events))
    assert after == before


@pytest.mark.parametrize("shape", [TWO_TIER, CLOS])
def test_advice_plans_with_every_name(shape):
    fabric, sw, svc = serve(shape)
    for name in names():
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
    assert listing() == ", ".join(every)
    errors = {}
    with pytest.raises(InputError) as e:
        Settings(algorithm="magic")
    errors["Settings"] = str(e.value)
    fabric, sw, svc = serve(TWO_TIER)
    errors["REST"] = post(svc, job_doc(fabric, "x", algorithm="magic"))[1]["error"]
    with pytest.raises(InputError) as e:
        planner_for("magic")
    errors["registry"] = str(e.value)
    for where, text in errors.items():
        assert f"(choose from {', '.join(every)})" in text, where
    for name in every:
        Settings(algorithm=name)  # every name is a valid default
    schema = api.openapi()["components"]["schemas"]["Job"]["properties"]["algorithm"]
    assert schema["enum"] == every
    with open(os.path.join(ROOT, "docs", "reference", "options.md")) as fh:
        page = fh.read()
    table = page[page.index("## Planners"):]
    rows = [line.split("|")[1].strip(" `") for line in table.splitlines()
            if line.startswith("| `")]
    assert rows == every
