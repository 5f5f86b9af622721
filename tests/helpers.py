"""Small builders shared by the unit tests."""
from controller.model.clos import Clos
from controller.model.intent import UNROUTABLE, flow_key
from controller.model.jobs import Flow, Job
from controller.model.problem import Assignment, Problem
from controller.planners.leaf_spine import spine_parts


def fabric(spines=4, leaves=8, hosts=2, failed_spines=0, down=()):
    f = Clos.generate(spines, leaves, hosts, 100.0, failed_spines).as_leaf_spine()
    return f.with_down(f.down | set(down)) if down else f


def flows_job(pairs, size=1e6, jid="j"):
    """A job of explicit flows between (src, dst) host pairs."""
    return Job(jid, explicit=[Flow(jid, s, d, size) for s, d in pairs])


def ring_job(ranks, size=8e6, jid="r"):
    return Job(jid, rings=[list(ranks)], ring_bytes=size)


class FakeClock:
    """Time that moves only when told: ``clock()`` reads it, ``clock.sleep(s)`` advances it."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def leaf_spine_routing(fabric, records) -> tuple[Problem, Assignment] | None:
    """The installed routes of ``records`` on a leaf-spine served as a Clos (paths leaf,
    spine, leaf) as the two-tier planners see them: their ``Problem`` and ``Assignment``
    (spine indices of ``Clos.as_leaf_spine``); flows without a route are left out."""
    records = list(records)
    if not records:
        return None
    two = fabric.as_leaf_spine()
    problem = Problem.build(two, [r.job for r in records], skip_unroutable=True)
    routes = {(r.job.id, flow_key(f)): spine_parts(two, p)
              for r in records for f, p in r.flows_with_parts()}
    keep = [k for k, pos in enumerate(problem.inter) if routes.get(
        (problem.flows[pos].job, flow_key(problem.flows[pos]))) not in (None, UNROUTABLE)]
    if len(keep) != len(problem.inter):
        problem = Problem(two, problem.jobs, problem.flows, [problem.inter[k] for k in keep],
                          [problem.src_leaf[k] for k in keep], [problem.dst_leaf[k] for k in keep],
                          [problem.usable[k] for k in keep],
                          sorted(set(problem.unroutable) |
                                 (set(problem.inter) - {problem.inter[k] for k in keep})))
    parts = [routes[(problem.flows[pos].job, flow_key(problem.flows[pos]))]
             for pos in problem.inter]
    return problem, Assignment(parts)


def two_tier_view(plan) -> tuple[Problem, Assignment]:
    """A ``Plan`` on a single two-tier plane as the two-tier planners see it: their
    ``Problem`` of its jobs and its routes as spine indices (``leaf_spine.spine_parts``), the
    planner's ``info`` kept."""
    two = plan.problem.fabric.as_leaf_spine()
    problem = Problem.build(two, plan.problem.jobs, skip_unroutable=True)
    parts = [spine_parts(two, p) for p in plan.path_parts()]
    return problem, Assignment([parts[pos] for pos in problem.inter], plan.routing.info)


def property_twins(strategies: tuple, fast: int, slow: int, **options):
    """One property as two hypothesis tests: ``fast`` examples in every tier and ``slow`` ones
    marked ``slow`` (make test and make test-unit; issue 60: the fast tier keeps a smoke of the
    property, the full count still runs before a merge). ``options``: the rest of ``settings``.

        def body(inst): ...
        test_x, test_x_in_full = property_twins((instances(),), 25, 150, deadline=None)(body)
    """
    import pytest
    from hypothesis import given, settings

    def make(body):
        quick = settings(max_examples=fast, **options)(given(*strategies)(body))
        full = settings(max_examples=slow, **options)(given(*strategies)(body))
        return quick, pytest.mark.slow(full)
    return make


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
