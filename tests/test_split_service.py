"""A job's max_parts (split's bound on parts per flow, the CLI's --max-parts) through REST:
checked with a 400, kept in the job document, and planned per bound."""
import pytest

from controller.model.jobs import parse_job
from controller.service import api
from tests.test_control_plane import post, start, wired


def flows(jid, hosts=(0, 1, 2, 3, 4, 5, 6), **extra):
    """Flows l0 -> l1, one per host: 7 flows over 5 spines (the fractional optimum 7/5 cuts
    some flows into 3 parts)."""
    return {"id": jid, "flows": [{"src": f"h0_{k}", "dst": f"h1_{k}", "bytes": 4e6, "dport": 5001}
                                 for k in hosts], "algorithm": "split", **extra}


def most_parts(svc, jid):
    return max(len(p) for p in svc.state.jobs[jid].routes.values())


@pytest.mark.parametrize("bound, most", [(1, 1), (2, 2), (0, 3)])
def test_max_parts_bounds_the_parts_of_every_flow(bound, most):
    _sw, svc = start(wired(5, 2, 8))
    status, doc = post(svc, flows("s", max_parts=bound))
    assert status == 201, doc
    assert doc["job"]["max_parts"] == bound
    assert most_parts(svc, "s") == most
    assert api.handle(svc, "GET", "/v1/jobs/s")[1]["job"]["max_parts"] == bound


def test_split_jobs_keep_their_own_bound_when_planned_again():
    _sw, svc = start(wired(5, 2, 8))
    assert post(svc, flows("one", range(4), max_parts=1))[0] == 201
    assert post(svc, flows("free", range(4, 8), max_parts=0))[0] == 201
    assert most_parts(svc, "one") == 1
    # a third split job re-plans the split jobs: each group keeps its bound
    assert post(svc, {**flows("more", range(4)), "flows": [
        {"src": f"h1_{k}", "dst": f"h0_{k}", "bytes": 4e6, "dport": 5002} for k in range(7)],
        "max_parts": 1})[0] == 201
    assert most_parts(svc, "one") == 1 and most_parts(svc, "more") == 1


@pytest.mark.parametrize("extra, message", [
    ({"max_parts": -1}, "'max_parts' must be an integer >= 0"),
    ({"max_parts": 2.5}, "'max_parts' must be an integer >= 0"),
    ({"max_parts": "4"}, "'max_parts' must be an integer >= 0"),
    ({"max_parts": True}, "'max_parts' must be an integer >= 0"),
    ({"max_parts": None}, "'max_parts' must be an integer >= 0"),
    ({"max_parts": 2, "algorithm": "auto"}, "max_parts needs algorithm 'split' (got 'auto')"),
    ({"max_parts": 2, "algorithm": None}, "max_parts needs algorithm 'split' (got 'auto')"),
])
def test_bad_max_parts_is_a_400_naming_it(extra, message):
    _sw, svc = start(wired(5, 2, 8))
    doc = flows("bad", **extra)
    if doc["algorithm"] is None:
        del doc["algorithm"]  # the controller's default algorithm, auto
    status, answer = post(svc, doc)
    assert status == 400 and message in answer["error"], answer
    assert "bad" not in svc.state.jobs


def test_max_parts_survives_the_job_document():
    f = wired(5, 2, 8)
    job = parse_job(flows("s", max_parts=3), f)
    assert parse_job(job.to_dict(), f).options["max_parts"] == 3
