"""The package layout is the design: each layer imports only the layers below it, and no module
is part of an import cycle. Layers, bottom up: base (errors, jsonio, the REST client), model,
planners, enforcement / discovery / measurement, service, shell; the command line and the
framework integrations on top. Emulation and simulation are apart, and simulation never needs
an SDN framework."""
import ast
import functools
import os

import networkx as nx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYER = {"controller.errors": 0, "controller.jsonio": 0, "controller.client": 0,
         "controller.model": 1, "controller.planners": 2, "controller.enforcement": 3,
         "controller.discovery": 3, "controller.measurement": 3, "controller.service": 4,
         "controller.shell": 5, "controller.cli": 6, "controller.integrations": 6,
         "controller.agent": 6, "controller.srv6cli": 6, "controller.advisecli": 6,
         "controller.credentialcli": 6, "controller.fabriccli": 6,
         "controller.__main__": 6, "controller": 0}


def modules(package: str) -> dict[str, str]:
    out = {}
    for d, _dirs, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(d, name)
                mod = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[mod.removesuffix(".__init__")] = path
    return out


@functools.cache
def parsed(path: str) -> ast.Module:
    """A file's syntax tree, parsed once per test process: the checks below walk the same
    files (issue 60: the parses were most of their time)."""
    return ast.parse(open(path).read(), path)


@functools.cache
def imports(path: str) -> frozenset[str]:
    """Every module a file imports, at module level or inside functions."""
    tree = parsed(path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return frozenset(out)


def layer(mod: str) -> int:
    best = max((p for p in LAYER if mod == p or mod.startswith(p + ".")), key=len)
    return LAYER[best]


def test_no_upward_import_in_controller():
    ours = modules("controller")
    bad = []
    for mod, path in ours.items():
        for imp in imports(path):
            if imp in ours and layer(imp) > layer(mod):
                bad.append(f"{mod} (layer {layer(mod)}) imports {imp} (layer {layer(imp)})")
    assert not bad, "\n".join(sorted(bad))


def test_only_the_framework_adapters_import_a_framework():
    allowed = {"controller.shell.app": "ryu", "controller.shell.ryu_main": "ryu",
               "controller.shell.osken_app": "os_ken", "controller.shell.osken_main": "os_ken",
               "controller.shell.flags": ""}
    bad = []
    for mod, path in {**modules("controller"), **modules("simulation")}.items():
        for imp in imports(path):
            top = imp.split(".")[0]
            if top in ("ryu", "os_ken") and allowed.get(mod) != top:
                bad.append(f"{mod} imports {imp}")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles():
    ours = {**modules("controller"), **modules("simulation"), **modules("emulation"),
            **modules("benchmarks")}
    g = nx.DiGraph()
    for mod, path in ours.items():
        g.add_node(mod)
        for imp in imports(path):
            if imp in ours and imp != mod and not mod.startswith(imp + "."):
                g.add_edge(mod, imp)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles[:5]


def test_emulation_and_simulation_are_apart():
    """Simulation never needs Mininet or a controller process; emulation may draw its inputs
    from the simulation's workload generators, nothing else."""
    for mod, path in modules("simulation").items():
        assert not any(i.split(".")[0] == "emulation" for i in imports(path)), mod
    for mod, path in modules("emulation").items():
        used = {i for i in imports(path) if i.split(".")[0] == "simulation"}
        assert all(i.startswith("simulation.workloads") for i in used), (mod, used)


def test_modules_stay_small():
    big = {mod: n for mod, path in modules("controller").items()
           if (n := sum(1 for _ in open(path))) > 560}
    assert not big, big


PRODUCT = ("controller", "emulation", "benchmarks", "simulation", "topologies")


def test_nothing_outside_the_tests_imports_from_tests():
    """The tests use the product and the harness, never the other way round (a fake that a
    benchmark or a tool needs belongs in the harness, as ``emulation/harness/fake_switch.py``)."""
    bad = [f"{mod} imports {imp}" for package in PRODUCT
           for mod, path in modules(package).items() for imp in imports(path)
           if imp.split(".")[0] == "tests"]
    assert not bad, "\n".join(sorted(bad))


def test_the_harness_is_a_library_under_the_tools_and_benchmarks():
    """``emulation/harness/`` imports neither the emulation's command-line tools nor the
    benchmarks; the tools do not import the benchmarks."""
    bad = []
    for mod, path in modules("emulation").items():
        for imp in imports(path):
            if imp.split(".")[0] == "benchmarks":
                bad.append(f"{mod} imports {imp}")
            elif (mod.startswith("emulation.harness") and imp.startswith("emulation.")
                  and not imp.startswith("emulation.harness")):
                bad.append(f"{mod} imports {imp}")
    assert not bad, "\n".join(sorted(bad))
    assert "emulation.harness.fake_switch" in modules("emulation")


def test_the_layering_checks_see_the_product():
    """The checks above walk real packages: an empty walk would pass them all."""
    assert {"emulation.harness.session", "emulation.run", "benchmarks.connect",
            "simulation.workloads", "controller.service.route_service", "topologies.clos"} <= {
        mod for package in PRODUCT for mod in modules(package)}



def test_the_controller_starts_without_the_solvers():
    """scipy.optimize (HiGHS) takes about 0.3 s to import, a fifth of the controller's start and
    so of every restart: the planners that call it import it when they run."""
    import subprocess
    import sys
    code = ("import sys, controller.service.route_service, controller.shell.flags; "
            "print('scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


# a first start and a restart of the service on a k = 4 fat-tree, as the shell makes them
START = """
import sys, tempfile
import controller.shell.core
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from emulation.harness.fake_switch import FakeSwitches
from topologies.clos import fattree_fabric
f = fattree_fabric(4)
sw = FakeSwitches(f.dpids.values())
ports = {d: {p: True for p in f.ports[f.switch_of_dpid[d]].values()} for d in f.dpids.values()}
with tempfile.TemporaryDirectory() as tmp:
    for _ in range(2):
        svc = RouteService(sw, f, algorithm="auto", store=StateStore(tmp + "/state.db"))
        assert svc.note_switches([(d, ports[d], None) for d in f.dpids.values()]) == {}
        svc.sync_queued()
        assert svc.fabric_view()["ready"]
print(*(m in sys.modules for m in ("scipy", "networkx")))
"""


def test_a_start_and_a_restart_load_neither_scipy_nor_networkx():
    """scipy (0.12 s, with numpy.f2py) and networkx (0.09 s) were a third of the controller's
    imports, CPU every start and restart pays while the switches wait (issue 74): the
    planners and discovery import them where they use them, and a start on a declared fabric
    (its switches noted, read and repaired) uses neither."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", START], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stdout + out.stderr


# The shape of a fabric (which model, whether it has planes, one two-tier plane) is the model's
# to answer (issue 37): a caller asks the fabric (``as_leaf_spine``, ``summary``, ``is_clos``)
# instead of probing its type or attributes.
SHAPE_TYPES = {"Clos", "Fabric"}  # one Plan type since issue 37: no plan to tell apart
SHAPE_ATTRS = {"planes", "spines", "pods", "switch_of_dpid", "host_leaves"}


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _fabric_like(node) -> bool:
    name = _dotted(node)
    return name in ("f", "self") or name == "fabric" or name.endswith(".fabric")


def shape_probes(path: str) -> list[str]:
    """``isinstance(x, Clos|Fabric)``, ``hasattr/getattr(fabric, "planes"...)`` and,
    in the model, reads of ``is_clos``: one line each."""
    tree = parsed(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id == "isinstance" and len(args) == 2:
                kinds = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
                if any(_dotted(k).split(".")[-1] in SHAPE_TYPES for k in kinds):
                    out.append(f"{path}:{node.lineno} isinstance")
            elif (node.func.id in ("hasattr", "getattr") and len(args) >= 2
                  and isinstance(args[1], ast.Constant) and args[1].value in SHAPE_ATTRS
                  and _fabric_like(args[0])):
                out.append(f"{path}:{node.lineno} {node.func.id} {args[1].value}")
        elif (isinstance(node, ast.Attribute) and node.attr == "is_clos"
              and isinstance(node.ctx, ast.Load)):
            out.append(f"{path}:{node.lineno} is_clos")
    return out


def test_only_the_model_asks_what_shape_a_fabric_has():
    """No isinstance or attribute probe on a fabric outside ``controller/model/`` (outside, a
    caller reads the model's answer: ``is_clos``, ``as_leaf_spine()``); at most 5 places in
    the model ask."""
    outside, inside = [], []
    for mod, path in modules("controller").items():
        found = shape_probes(path)
        if mod.startswith("controller.model."):
            inside += found
        else:
            outside += [p for p in found if not p.endswith(" is_clos")]
    assert not outside, "\n".join(outside)
    assert len(inside) <= 5, "\n".join(inside)


def test_no_benchmark_tool_or_topology_asks_what_shape_a_fabric_has():
    """Nor outside the controller: the benchmarks, the emulation (harness and tools), the
    simulation and the topologies ask the model (``leaves_by_pod()``, ``tier_of``,
    ``plane_count``, ``switches()``) and probe no fabric's type or attributes."""
    found = [p for package in PRODUCT if package != "controller"
             for path in modules(package).values() for p in shape_probes(path)
             if not p.endswith(" is_clos")]
    assert not found, "\n".join(found)


def test_the_shape_probe_count_sees_the_probes(tmp_path):
    """The count above finds each kind of probe (an empty count would pass it)."""
    src = tmp_path / "probe.py"
    src.write_text("isinstance(fabric, Clos)\nisinstance(p, (int, Fabric))\n"
                   "getattr(state.fabric, 'planes', ())\nhasattr(f, 'spines')\n"
                   "x = fabric.is_clos\nisinstance(x, list)\ngetattr(job, 'planes', 0)\n")
    assert [p.split(" ", 1)[1] for p in shape_probes(str(src))] == [
        "isinstance", "isinstance", "getattr planes", "hasattr spines", "is_clos"]


# The two-tier kernels (issue 60): every planner name runs one algorithm on every fabric
# shape, and the algorithms of a single two-tier plane (``Problem -> Assignment``) with their
# model are the planners' private fast paths. They are reached through the planners' own
# entry points (``registry.planner_for``, ``plan.make_plan``, ``group_routes``, ``offpath``),
# never imported from the rest of the controller. The tests import them freely (they test
# them); outside the controller, the modules below still do today.
TWO_TIER_KERNELS = {f"controller.planners.{m}" for m in (
    "greedy", "edge_coloring", "ilp", "layer2", "churn", "split", "auto", "equitable",
    "repair", "lp")}
TWO_TIER_MODEL = {"controller.model.problem", "controller.model.fabric"}
# outside ``controller/``: module -> the kernels and two-tier model modules it imports. A
# list that shrinks, never grows: a new benchmark or tool plans through ``plan.make_plan``.
KERNEL_USERS_OUTSIDE = {
    "benchmarks.anytime": {"controller.planners.churn", "controller.model.problem"},
    "benchmarks.layer2": {"controller.planners.ilp", "controller.planners.layer2",
                          "controller.planners.split", "controller.model.problem"},
    "benchmarks.planner": {"controller.planners.lp", "controller.model.problem"},
    "simulation.paper": {"controller.planners.equitable", "controller.planners.lp",
                         "controller.model.problem"},
}


def two_tier_imports(path: str) -> set[str]:
    """The two-tier kernels and model modules a file imports (``from X import name`` counts as
    importing X, and ``from controller.planners import greedy`` as importing that module)."""
    private = TWO_TIER_KERNELS | TWO_TIER_MODEL
    return {k for imp in imports(path) for k in private if imp == k or imp.startswith(k + ".")}


def test_the_two_tier_kernels_are_private_to_the_planners():
    """In the controller only ``controller/planners/`` imports a two-tier kernel, and only it
    and ``controller/model/`` import the two-tier model (``Problem``, ``Fabric``)."""
    bad = []
    for mod, path in modules("controller").items():
        for k in two_tier_imports(path) - {mod}:
            inside = ("controller.planners.",) + (("controller.model.",)
                                                  if k in TWO_TIER_MODEL else ())
            if not mod.startswith(inside):
                bad.append(f"{mod} imports {k}")
    assert not bad, "\n".join(sorted(bad))


def test_outside_the_controller_only_the_listed_modules_use_the_two_tier_kernels():
    """The benchmarks, the emulation, the simulation and the topologies: exactly the modules
    of ``KERNEL_USERS_OUTSIDE``, each with what it imports (one that stops: drop it there)."""
    found = {mod: got for package in PRODUCT if package != "controller"
             for mod, path in modules(package).items() if (got := two_tier_imports(path))}
    assert found == KERNEL_USERS_OUTSIDE


def test_the_two_tier_checks_see_the_kernels():
    """Every module the checks above name exists (a renamed one would pass them)."""
    ours = modules("controller")
    assert TWO_TIER_KERNELS | TWO_TIER_MODEL <= set(ours)
    assert two_tier_imports(ours["controller.planners.auto"]) >= {
        "controller.planners.repair", "controller.model.problem"}
