"""Per-host document versions (issue 73): a change wakes only the hosts whose segments
document changed: a job's members, the hosts whose parts or backups a failed link touched;
never the others."""
from __future__ import annotations

import json
import time

from controller.service import api, duties, watches
from tests.test_pathstate import fat_tree
from tests.test_srv6 import service_on


def versions(svc) -> dict:
    return {h: api.handle(svc, "GET", f"/v1/hosts/{h}/segments")[1]["version"]
            for h in svc.state.fabric.host_leaves}


def post(svc, doc) -> dict:
    status, view = api.handle(svc, "POST", "/v1/jobs", json.dumps(doc).encode())
    assert status == 201, view
    return view


def changed(before: dict, after: dict) -> set:
    return {h for h in after if after[h] != before[h]}


def test_a_job_changes_its_members_documents_only():
    svc = service_on(fat_tree())
    first = versions(svc)
    ring = ["h0_0", "h2_0", "h4_0", "h6_0"]
    post(svc, {"id": "ring", "collective": "ring_allreduce", "ranks": ring, "bytes": 1e6})
    second = versions(svc)
    assert changed(first, second) == set(ring)
    post(svc, {"id": "pair", "flows": [{"src": "h1_1", "dst": "h3_1", "bytes": 1e6}]})
    third = versions(svc)
    assert changed(second, third) == {"h1_1", "h3_1"}
    api.handle(svc, "DELETE", "/v1/jobs/pair")
    assert changed(third, versions(svc)) == {"h1_1", "h3_1"}


def test_a_failed_link_changes_the_documents_of_the_hosts_it_touches():
    svc = service_on(fat_tree())
    post(svc, {"id": "a", "flows": [{"src": "h0_0", "dst": "h2_0", "bytes": 1e6},
                                    {"src": "h4_0", "dst": "h6_0", "bytes": 1e6}]})
    before = versions(svc)
    path = next(r["path"] for r in api.handle(svc, "GET", "/v1/routes")[1]["routes"]
                if r["src"] == "h0_0")
    f = svc.state.fabric
    lower, upper = path[1], path[2]  # an aggregation-core hop of h0_0's part
    svc.ports_changed([(f.dpids[lower], p, False, None) for p in f.ports_to(lower, upper)])
    after = versions(svc)
    assert {"h0_0", "h2_0"} <= changed(before, after)  # its part moved, both ends
    probing = set(duties.extras(svc.state.fabric))  # hosts given a probe duty for the link
    assert not (changed(before, after) - probing) & {"h1_0", "h3_1", "h5_0", "h7_1"}


def test_a_watch_returns_when_its_hosts_document_changes_not_another_one():
    svc = service_on(fat_tree())
    doc = api.handle(svc, "GET", "/v1/hosts/h0_0/segments")[1]
    headers = {"If-None-Match": f'"{doc["version"]}"', "Prefer": "wait=0.3"}
    post(svc, {"id": "other", "flows": [{"src": "h2_0", "dst": "h4_0", "bytes": 1e6}]})
    t = time.monotonic()
    status, same = api.handle(svc, "GET", "/v1/hosts/h0_0/segments", headers=headers)
    assert status == 200 and same["version"] == doc["version"]
    assert time.monotonic() - t >= 0.25  # another host's change did not wake it
    post(svc, {"id": "mine", "flows": [{"src": "h0_0", "dst": "h4_0", "bytes": 1e6}]})
    t = time.monotonic()
    _, new = api.handle(svc, "GET", "/v1/hosts/h0_0/segments", headers=headers)
    assert new["version"] != doc["version"] and new["flows"] and time.monotonic() - t < 0.2


def test_a_new_fabric_changes_every_document():
    svc = service_on(fat_tree())
    v = watches.of(svc)
    v.update(svc.state)
    svc.state.declared = object()  # as a PUT /v1/fabric replaces it
    assert v.update(svc.state) == set(svc.state.fabric.host_leaves)


def _native(svc):
    from controller.shell.rest import RestServer
    rest = RestServer(svc, "127.0.0.1", 0, native=True)
    rest.sock.settimeout(0.05)
    rest.start()
    return rest


def _watch(port, host, held, wait, out, key):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t = time.monotonic()
    c.request("GET", f"/v1/hosts/{host}/segments",
              headers={"If-None-Match": f'"{held}"', "Prefer": f"wait={wait}"})
    r = c.getresponse()
    body = r.read()
    out[key] = (r.status, json.loads(body) if body else None, time.monotonic() - t)
    c.close()


def test_the_native_front_parks_watches_and_wakes_only_their_hosts():
    """Issue 73: watches parked in the front (no thread each, no polling), far more than
    the 256 connections the front serves at once; a change answers its hosts' watches at
    once, the others 304 when their wait ends; requests are served meanwhile."""
    import threading

    from controller.client import Client
    from controller.shell import rest as rest_mod
    svc = service_on(fat_tree())
    rest = _native(svc)
    try:
        client = Client(f"http://127.0.0.1:{rest.port}", timeout=10)
        held = {h: client.segments(h)["version"] for h in ("h0_0", "h2_0", "h4_0")}
        out, threads = {}, []
        n = rest_mod.NATIVE_CONNECTIONS + 44  # more watches than the front's connections
        for i in range(n):
            host = ("h2_0", "h4_0")[i % 2]  # waits 1.5 s; none of them is a member below
            threads.append(threading.Thread(target=_watch, args=(
                rest.port, host, held[host], 1.5, out, i), daemon=True))
        threads.append(threading.Thread(target=_watch, args=(
            rest.port, "h0_0", held["h0_0"], 10, out, "member"), daemon=True))
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while rest.front.watching < n + 1:
            assert time.monotonic() < deadline, rest.front.watching
            time.sleep(0.01)
        t0 = time.monotonic()
        view = client.add_job({"id": "p", "flows": [  # served while every watch is held
            {"src": "h0_0", "dst": "h1_1", "bytes": 1e6}]})
        assert view["id"] == "p" and client.ready()["ready"]
        deadline = time.monotonic() + 5
        while "member" not in out:
            assert time.monotonic() < deadline, "the member's watch was not answered"
            time.sleep(0.005)
        status, doc, _ = out["member"]
        assert status == 200 and doc["flows"] and doc["version"] != held["h0_0"]
        assert time.monotonic() - t0 < 1.0
        for t in threads:
            t.join(10)
        answers = [out[i] for i in range(n)]
        assert all(s == 304 and d is None for s, d, _ in answers)  # not woken: no change
        assert min(w for _, _, w in answers) >= 1.4
        assert rest.front.watching == 0 and not rest.front.parked
    finally:
        rest.stop()


def test_parked_watches_cost_the_front_nothing_until_a_deadline_comes(monkeypatch):
    """Issue 73: nothing runs per watch while nothing changes: the front's sweep looks only
    at connections whose deadline came (a heap), not at every parked watch each second."""
    import threading

    from controller.client import Client
    from controller.shell.front import Front
    looked = []
    deadline_of = Front._deadline
    monkeypatch.setattr(Front, "_deadline", lambda self, c: looked.append(c) or
                        deadline_of(self, c))
    svc = service_on(fat_tree())
    rest = _native(svc)
    try:
        held = Client(f"http://127.0.0.1:{rest.port}", timeout=10).segments("h2_0")["version"]
        out, n = {}, 40
        def watch(wait, key):
            try:
                _watch(rest.port, "h2_0", held, wait, out, key)
            except OSError:  # the server stopped first (the long ones)
                pass
        threads = [threading.Thread(target=watch, args=(20, i), daemon=True)
                   for i in range(n - 1)]
        threads.append(threading.Thread(target=watch, args=(1.2, "short"), daemon=True))
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while rest.front.watching < n:
            assert time.monotonic() < deadline, rest.front.watching
            time.sleep(0.01)
        looked.clear()
        while "short" not in out:  # its wait ends: looked at, answered 304
            assert time.monotonic() < deadline, "the short watch was not answered"
            time.sleep(0.01)
        time.sleep(1.2)  # another sweep or two with nothing due
        assert out["short"][0] == 304 and rest.front.watching == n - 1
        assert len({id(c) for c in looked}) == 1  # the short watch's connection alone
    finally:
        rest.stop()


def test_a_watch_is_held_for_minutes_and_the_agent_asks_within_that_with_a_longer_timeout():
    """Issue 73: a renewal costs the controller a connection, so a watch may ask to be held
    up to ``api.WATCH_MAX_S`` (5 min; 30 s before, which made 8,192 agents renew 320 times a
    second); the agent asks for ``WAIT_S`` within that and reads for 10 s longer than it."""
    from controller.agent import main as agent_main
    assert api.watch_of({"If-None-Match": '"e:1"', "Prefer": "wait=120"}) == ("e:1", 120.0)
    assert api.watch_of({"If-None-Match": '"e:1"', "Prefer": "wait=900"}) == (
        "e:1", api.WATCH_MAX_S)
    assert 60 <= agent_main.WAIT_S <= api.WATCH_MAX_S
    asked = []

    class Client:
        url = "http://fake"

        def segments(self, host, held="", wait=0.0, timeout=None):
            asked.append((wait, timeout))
            return {"version": held, "unchanged": True}

    agent = agent_main.Agent(Client(), "h0_0", "eth0", apply=lambda lines: None,
                             read=lambda dev: ({}, {}))
    agent.version = "e:1"
    assert agent.step() is False
    assert asked == [(agent_main.WAIT_S, agent_main.WAIT_S + 10)]
