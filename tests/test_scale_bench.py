"""The pure helpers of the scale benchmark (benchmarks.scale, benchmarks.reconcile): which
hosts its jobs take, which link and switch it fails, how it counts per tier and compares with
the two-tier baseline. No switch, no controller."""
from benchmarks import scale
from benchmarks.reconcile import patch_commands, switch_links
from controller.model.clos import Clos
from topologies.clos import fattree_fabric


def _pod(fabric, host):
    plane = fabric.planes[0]
    return plane.pod_of_leaf[plane.leaves.index(fabric.hosts[host])]


def test_every_link_of_every_tier_is_a_patch_pair_on_its_declared_ports():
    f = fattree_fabric(4)
    links = switch_links(f)
    assert len(links) == 32  # 8 leaves x 2 aggregation switches + 8 x 2 cores
    assert {(a, b) for a, b, *_ in links} == set(f.links())
    for a, b, pa, pb, na, nb in links:
        assert (pa, pb) == (f.port(a, b), f.port(b, a))
        assert f.tier_of[a] + 1 == f.tier_of[b]
        add_a, add_b = patch_commands((a, b, pa, pb, na, nb))
        assert add_a[2:4] == [a, na] and f"options:peer={nb}" in add_a
        assert f"ofport_request={pb}" in add_b
    names = [n for *_, na, nb in links for n in (na, nb)]
    assert len(set(names)) == len(names)


def test_jobs_cross_pods_and_have_the_stated_sizes():
    f = fattree_fabric(16)
    ring = scale.ring_job(f)["ranks"]
    assert len(ring) == 128 and len(set(ring)) == 128
    pods = [_pod(f, h) for h in ring]
    assert all(p != q for p, q in zip(pods, pods[1:] + pods[:1]))
    assert len({f.hosts[h] for h in ring}) == 128  # every rank on a leaf of its own
    assert len(scale.all_to_all_job(f)["flows"]) == 992
    small = fattree_fabric(4)
    assert len(scale.ring_job(small)["ranks"]) == 16  # no more than the fabric has
    two = Clos.generate(4, 8, 2, 100.0, wiring=True)
    ranks = scale.ring_job(two)["ranks"]
    assert len(ranks) == 16 and all(two.hosts[a] != two.hosts[b]
                                    for a, b in zip(ranks, ranks[1:]))


def test_the_failed_link_and_switch_are_the_busiest_of_the_routes():
    f = fattree_fabric(4)
    routes = [{"src": "h0_0", "dst": "h4_0", "path": ["l0", "a0_1", "c1_0", "a2_1", "l4"]},
              {"src": "h1_0", "dst": "h6_0", "path": ["l1", "a0_1", "c1_0", "a3_1", "l6"]},
              {"src": "h0_0", "dst": "h2_0", "path": ["l0", "a0_0", "l1"]}]
    assert scale.hops(f, routes[0]) == [("l0", "a0_1"), ("a0_1", "c1_0"), ("a2_1", "c1_0"),
                                        ("l4", "a2_1")]
    assert scale.busiest_link(f, routes) == ("a0_1", "c1_0")
    assert scale.busiest_middle(f, routes) == "a0_1"
    assert scale.routes_over(f, routes, link=("a0_1", "c1_0")) == 2
    assert scale.routes_over(f, routes, switch="a0_0") == 1
    split = {"src": "h0_0", "dst": "h4_0", "split": [
        {"path": ["l0", "a0_0", "c0_1", "a2_0", "l4"], "share": 0.5},
        {"path": ["l0", "a0_1", "c1_1", "a2_1", "l4"], "share": 0.5}]}
    assert scale.routes_over(f, [split], switch="c1_1") == 1
    two = Clos.generate(2, 2, 1, 100.0, wiring=True)
    r = [{"src": "h0_0", "dst": "h1_0", "spine": "s1"}]
    assert scale.busiest_link(two, r) == ("l0", "s1")
    assert scale.busiest_middle(two, r) == "s1"
    assert scale.busiest_link(two, []) is None


def test_counts_per_tier_and_ratios_to_the_baseline():
    f = fattree_fabric(4)
    t = scale.by_tier(f, {sw: 10 if sw.startswith("c") else 1 for sw in f.switches()})
    assert t["core"] == {"switches": 4, "per_switch_min": 10, "per_switch_max": 10,
                         "total": 40}
    assert t["leaf"]["total"] == 8 and t["agg"]["total"] == 8
    assert scale.by_tier(f, {})["leaf"]["total"] == 0  # a switch not reported counts 0
    r = scale.ratios({"restart_ready_s": 2.0, "post": {"ring": {"answered_s": 0.3}}},
                     {"restart_ready_s": 4.0, "post": {"ring": {"answered_s": 0.1}}})
    assert r["restart_ready_s"] == 0.5 and r["post.ring.answered_s"] == 3.0
    assert r["restart_messages"] is None and set(r) == set(scale.FIGURES)


def test_the_model_fits_measured_fat_trees_and_counts_the_entries_it_predicts():
    """``scale_model.predict``: a line through the measured figures per switch, evaluated at
    the predicted fabric's switches; its static entries counted by the rule builders."""
    from benchmarks import entries, scale_model
    measured = {"fabrics": [
        {"fabric": "fat-tree k=4", "switches": 20, "restart_ready_s": 1.0,
         "restart_meter": {"controller_cpu_s": 0.5}},
        {"fabric": "fat-tree k=6", "switches": 45, "restart_ready_s": 1.5,
         "restart_meter": {"controller_cpu_s": 0.75}},
        {"fabric": "fat-tree k=8", "error": "RuntimeError: bridges"}]}  # not fitted
    model = scale_model.predict(measured, ks=(8,))
    assert model["measured"] == ["fat-tree k=4", "fat-tree k=6"]
    assert model["fits"]["restart_ready_s"] == {"a": 0.6, "per_switch_ms": 20.0, "points": 2}
    assert model["fits"]["first_start_ready_s"] is None  # not measured: not predicted
    k8 = model["fabrics"]["fat-tree k=8"]
    assert k8["switches"] == 80 and k8["restart_ready_s"] == round(0.6 + 0.02 * 80, 2)
    assert k8["restart_meter.controller_cpu_s"] == round(0.3 + 0.01 * 80, 2)
    assert "first_start_ready_s" not in k8
    assert k8["static_entries"] == entries.count(fattree_fabric(8))["flow"]["total"]
    assert sum(t["total"] for t in k8["static_entries_by_tier"].values()) == k8["static_entries"]


def test_a_start_rerun_replaces_only_the_start_figures(monkeypatch):
    """``--only start --merge`` (``merge_start``): each fabric's start figures come from the
    rerun, its jobs' and failures' figures stay, the ratios and the model follow the merged
    figures, and a fabric whose rerun failed keeps its old figures (the error is said)."""
    from benchmarks import scale_model
    monkeypatch.setattr(scale_model, "predict",
                        lambda r: {"measured": [f["fabric"] for f in r["fabrics"]]})

    def row(name, start, restart, **more):
        return {"fabric": name, "switches": 20, "first_start_ready_s": start,
                "restart_ready_s": restart, "restart_meter": {"controller_cpu_s": 1.0},
                "loadavg_before": [0.1, 0.1, 0.1], **more}
    old = {"command": "python -m benchmarks.scale", "complete": True,
           "baseline": row("base", 2.0, 4.0, post={"ring": {"answered_s": 0.2}}),
           "fabrics": [row("k=4", 1.0, 2.0, link_failure={"replanned_s": 0.3}),
                       row("k=16", 3.0, 4.5, link_failure={"replanned_s": 0.9})]}
    new = {"command": "python -m benchmarks.scale --only start --merge",
           "machine": {"date": "2026-11-29"}, "complete": True,
           "baseline": row("base", 2.5, 3.0, loadavg_before=[2.0, 1.0, 1.0], wall_s=30.0),
           "fabrics": [row("k=4", 1.5, 1.0, error="RuntimeError: bridges"),
                       row("k=16", 2.0, 2.25, restart_meter={"controller_cpu_s": 2.0})]}
    got = scale.merge_start(old, new)
    assert old["fabrics"][1]["restart_ready_s"] == 4.5  # not changed in place
    base, k4, k16 = got["baseline"], *got["fabrics"]
    assert (base["first_start_ready_s"], base["restart_ready_s"]) == (2.5, 3.0)
    assert base["post"] == {"ring": {"answered_s": 0.2}}  # the whole run's, kept
    assert base["loadavg_before"] == [0.1, 0.1, 0.1]  # the rerun's load is in start_rerun
    assert (k4["first_start_ready_s"], k4["restart_ready_s"]) == (1.0, 2.0)  # its rerun failed
    assert (k16["first_start_ready_s"], k16["restart_ready_s"]) == (2.0, 2.25)
    assert k16["restart_meter"] == {"controller_cpu_s": 2.0}
    assert k16["link_failure"] == {"replanned_s": 0.9}
    assert k16["ratios_to_baseline"]["restart_ready_s"] == 0.75  # 2.25 / 3.0, the merged
    rerun = got["start_rerun"]
    assert rerun["command"] == new["command"] and rerun["date"] == "2026-11-29"
    assert rerun["fabrics"]["base"] == {"loadavg_before": [2.0, 1.0, 1.0], "wall_s": 30.0}
    assert rerun["fabrics"]["k=4"]["error"] == "RuntimeError: bridges"
    assert got["model"] == {"measured": ["k=4", "k=16"]}
    assert got["command"] == old["command"] and got["complete"] is True


def test_a_thread_that_ends_while_the_wait_is_read_does_not_lose_the_reading(monkeypatch):
    """The controller's wait for a CPU is the sum over its threads; one that ended between the
    listing and its read (a REST worker) made the whole reading None (a restart's meter)."""
    import os
    import threading
    pid = os.getpid()
    threading.Thread(target=lambda: None).start()  # more than one task to list
    assert isinstance(scale.waited_s(pid), float)
    assert scale.waited_s(999_999_999) is None  # no such process
    real_open = open
    tasks = os.listdir(f"/proc/{pid}/task")
    gone = f"/proc/{pid}/task/{tasks[-1]}/schedstat"

    def opening(path, *args, **kwargs):
        if path == gone:
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(scale, "open", opening, raising=False)
    monkeypatch.setattr(os, "listdir", lambda path: tasks)
    assert isinstance(scale.waited_s(pid), float)
