"""The command line's first contact (issue 39), in process and fast: offline plans take the
controller's defaults (``Settings``: one set of defaults) and say which objective they used;
``--help`` lists every planner and objective of the registries, with every default; ``--out``
writes the file and prints one line, on every command that has it."""
import argparse
import json
import re

import pytest

from controller import cli
from controller.jsonio import HelpFormatter
from controller.model.clos import Clos
from controller.model.intent import JobRecord
from controller.model.iteration import slowdown
from controller.model.jobs import Job
from controller.planners import PLANNERS
from controller.planners.objective import rank_key
from controller.planners.registry import OBJECTIVES, names
from controller.service.replanning import group_of
from controller.service.settings import Settings

JOBS = {"jobs": [
    {"id": "a", "collective": "ring_allreduce", "ranks": [f"h{i}_0" for i in range(8)],
     "bytes": 8e8},
    {"id": "b", "flows": [{"src": "h0_1", "dst": "h5_1", "bytes": 1e8}]}]}
FAT_TREE_JOBS = {"jobs": [{"id": "r", "collective": "ring_allreduce", "bytes": 1e8,
                           "ranks": ["h0_0", "h1_0", "h4_0", "h6_0", "h2_1", "h3_1"]}]}


@pytest.fixture
def files(tmp_path):
    fab, ft, jobs, ft_jobs = (tmp_path / n for n in ("f.json", "ft.json", "j.json", "jft.json"))
    fab.write_text(json.dumps(Clos.generate(4, 8, 2).to_dict()))
    ft.write_text(json.dumps(Clos.fat_tree(4).to_dict()))
    jobs.write_text(json.dumps(JOBS))
    ft_jobs.write_text(json.dumps(FAT_TREE_JOBS))
    return {"fabric": str(fab), "fat_tree": str(ft), "jobs": str(jobs), "ft_jobs": str(ft_jobs),
            "dir": tmp_path}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def plan(capsys, fabric, jobs, *extra) -> dict:
    code, out, err = run(capsys, "plan", "--fabric", fabric, "--jobs", jobs,
                         "--ilp-time-limit", "0", *extra)
    assert code == 0, err
    return json.loads(out)


# ---- one set of defaults: the controller's ---------------------------------------------------
def test_plan_defaults_are_the_controllers(files, capsys):
    doc = plan(capsys, files["fabric"], files["jobs"])
    assert doc["algorithm"] == Settings.algorithm
    assert doc["objective"] == doc["info"]["objective"] == Settings.objective


def test_the_cli_follows_settings_not_a_literal_of_its_own(files, capsys, monkeypatch):
    """Were the CLI's objective a literal, a changed Settings default would leave it behind."""
    for objective in OBJECTIVES:
        monkeypatch.setattr(Settings, "objective", objective)
        doc = plan(capsys, files["fabric"], files["jobs"])
        assert doc["objective"] == doc["info"]["objective"] == objective
    monkeypatch.setattr(Settings, "algorithm", "greedy")
    assert plan(capsys, files["fabric"], files["jobs"])["algorithm"] == "greedy"


def test_each_planners_default_objective_is_the_one_the_controller_gives_it():
    """The controller plans a job that names no objective with ``replanning.group_of``'s."""
    for alg in PLANNERS:
        record = JobRecord(Job("j", explicit=[]), 1, alg, "flow", 0.0)
        assert cli.default_objective(alg) == group_of(record, Settings())[1], alg


def test_an_objective_that_does_not_apply_is_named_not_hidden(files, capsys):
    doc = plan(capsys, files["fabric"], files["jobs"], "--algorithm", "greedy")
    assert doc["objective"] == "flows"  # the controller's greedy counts flows
    doc = plan(capsys, files["fabric"], files["jobs"], "--objective", "flows")
    assert doc["objective"] == doc["info"]["objective"] == "flows"
    code, out, err = run(capsys, "plan", "--fabric", files["fabric"], "--jobs", files["jobs"],
                         "--algorithm", "greedy", "--objective", "jobs")
    assert code == 2 and out == "" and "needs algorithm 'auto' or 'split'" in err


def test_clos_plans_say_their_objective(files, capsys):
    """On a Clos fabric, as on two tiers, the controller's auto ranks by the jobs objective
    unless a job names another (layer 1 on the request path, the jobs search off it): so
    does the default plan, which runs the jobs planner; --objective flows ranks by link
    loads, and compare names each row's objective."""
    flows = plan(capsys, files["fat_tree"], files["ft_jobs"], "--objective", "flows")
    assert (flows["algorithm"], flows["objective"]) == ("auto", "flows") and flows["gap"] == 0
    doc = plan(capsys, files["fat_tree"], files["ft_jobs"])
    assert (doc["algorithm"], doc["objective"]) == ("auto", Settings.objective) == ("auto", "jobs")
    jobs = plan(capsys, files["fat_tree"], files["ft_jobs"], "--algorithm", "jobs")
    assert (jobs["algorithm"], jobs["objective"]) == ("jobs", "jobs")
    assert doc["routes"] == jobs["routes"] and doc["info"]["objective"] == "jobs"
    code, out, err = run(capsys, "compare", "--fabric", files["fat_tree"], "--jobs",
                         files["ft_jobs"], "--algorithms", "auto,jobs", "--json")
    assert code == 0, err
    assert {r["algorithm"]: r["objective"] for r in json.loads(out)} == {"auto": "jobs",
                                                                         "jobs": "jobs"}


# a big ring, a small one and two large flows on the hosts h0_0 .. h7_1 of every fabric below
MIXED_JOBS = {"jobs": [
    {"id": "big", "collective": "ring_allreduce", "bytes": 8e8,
     "ranks": [f"h{i}_0" for i in (0, 2, 4, 6, 1, 3, 5, 7)]},
    {"id": "small", "collective": "ring_allreduce", "bytes": 1e7,
     "ranks": [f"h{i}_1" for i in (0, 4, 1, 5)]},
    {"id": "x", "flows": [{"src": "h0_1", "dst": "h6_1", "bytes": 4e8},
                          {"src": "h2_1", "dst": "h7_1", "bytes": 4e8}]}]}


def test_compare_takes_the_jobs_objective_on_every_clos(tmp_path, capsys):
    """Issue 60: compare --objective jobs on a k = 4 fat-tree and on a two-plane leaf-spine
    as on a single two-tier plane: auto and split plan with it (on a Clos fabric auto runs
    the jobs planner), the row jobs is not behind any unsplit planner on the jobs objective
    (the shared prediction's slowdowns: the mean, then the worst), and the table has the
    columns of a single two-tier plane (a fat-tree adds its column per tier)."""
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps(MIXED_JOBS))
    fabrics = {"two-tier": Clos.generate(4, 8, 2), "fat-tree": Clos.fat_tree(4),
               "two planes": Clos.leaf_spine(2, 8, 2, planes=2)}
    heads, fields = {}, {}
    for name, fabric in fabrics.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(fabric.to_dict()))
        argv = ("compare", "--fabric", path, "--jobs", jobs, "--objective", "jobs",
                "--ilp-time-limit", "1")
        code, out, err = run(capsys, *argv)
        assert code == 0 and err == "", (name, err)
        heads[name] = re.split(r"\s{2,}", out.splitlines()[1])
        assert "objective jobs: " in out
        code, out, err = run(capsys, *argv, "--json")
        assert code == 0, (name, err)
        rows = {r["algorithm"]: r for r in json.loads(out)}
        fields[name] = {frozenset(r) for r in rows.values()}  # one set of fields a row
        assert list(rows) == names() + [cli.SPRAY]  # one table: every name on every fabric
        assert {a: r["objective"] for a, r in rows.items() if a in ("auto", "split")} == {
            "auto": "jobs", "split": "jobs"}
        assert rows["jobs"]["objective"] == "jobs"
        assert rows["auto"]["allreduce_s"] == rows["jobs"]["allreduce_s"]  # the jobs planner
        if name == "two-tier":
            continue
        parsed = cli.load_inputs(str(path), str(jobs))[1]
        bps = fabric.link_bps("host")

        def rank(row):  # the jobs objective on the row's predicted times (objective.rank_key)
            _, mean, worst = rank_key([slowdown(j, row["allreduce_s"][j.id], bps) for j in parsed])
            return round(mean, 9), worst

        unsplit = [a for a in rows if a not in ("split", cli.SPRAY)]
        behind = [a for a in unsplit if rank(rows[a]) < rank(rows["jobs"])]
        assert behind == [], (name, {a: rank(rows[a]) for a in unsplit})
        assert rank(rows["jobs"]) < rank(rows["ecmp"]), name  # and ahead of the hashes
    tiers = [cli.TIER_HEADS[t] for t in ("leaf", "core")]
    assert heads["two planes"] == heads["two-tier"]
    assert heads["fat-tree"] == heads["two-tier"][:3] + tiers + heads["two-tier"][3:]
    assert fields["fat-tree"] == fields["two planes"] == fields["two-tier"]


def test_compare_rows_name_their_objective(files, capsys):
    code, out, err = run(capsys, "compare", "--fabric", files["fabric"], "--jobs",
                         files["jobs"], "--algorithms", "greedy,split,auto",
                         "--ilp-time-limit", "0", "--json")
    assert code == 0, err
    rows = {r["algorithm"]: r["objective"] for r in json.loads(out)}
    assert rows == {a: cli.default_objective(a) for a in ("greedy", "split", "auto")}
    code, out, err = run(capsys, "compare", "--fabric", files["fabric"], "--jobs",
                         files["jobs"], "--algorithms", "greedy,split", "--objective", "jobs",
                         "--ilp-time-limit", "0")
    assert code == 0, err
    lines = out.splitlines()  # a fabric line, the head, the ideal row, one row each
    assert lines[0].startswith("fabric:")
    assert lines[1].split()[:3] == ["algorithm", "objective", "max"]
    assert lines[2].split()[0] == "ideal"
    assert [l.split()[:2] for l in lines[3:5]] == [["greedy", "flows"], ["split", "jobs"]]


# ---- help: every registry name, every command, every default ---------------------------------
def help_text(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def test_plan_and_compare_help_list_every_planner_and_objective(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")  # narrow: a name cut at its dash would not be found
    for cmd in ("plan", "compare"):
        text = help_text(capsys, cmd)
        words = set(text.replace(",", " ").replace(";", " ").replace("(", " ").split())
        missing = [n for n in [*PLANNERS, *OBJECTIVES] if n not in words]
        assert missing == [], (cmd, missing)
        assert "ecmp-polarised" in text and "(default: the controller's" in " ".join(text.split())
    assert f"(default: {Settings.algorithm}, the controller's)" in " ".join(
        help_text(capsys, "plan").split())


def test_top_level_help_describes_every_command(capsys):
    text = help_text(capsys)
    commands = cli.parser()._subparsers._group_actions[0].choices
    assert set(commands) == set(cli.COMMANDS) == {"fabric", "plan", "compare", "advise", "job",
                                                  "srv6-config", "agent-credential"}
    for name, (line, _) in cli.COMMANDS.items():
        assert re.search(rf"\n +{name}\s+{line.split()[0]} ", text), name
    assert "mlroute-controller" in text


def _parsers(ap: argparse.ArgumentParser):
    yield ap
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_option_shows_its_default_and_every_command_a_whole_description():
    for p in _parsers(cli.parser()):
        assert p.description and p.description.rstrip().endswith("."), p.prog
        assert p.formatter_class is HelpFormatter, p.prog
        for action in p._actions:
            if action.option_strings and action.help != argparse.SUPPRESS and \
                    action.default not in (None, False, argparse.SUPPRESS):
                shown = HelpFormatter(p.prog)._get_help_string(action)
                assert "default" in shown.lower(), (p.prog, action.option_strings)


# ---- --out: the file, and one line --------------------------------------------------------------
def test_out_writes_the_file_and_prints_one_line(files, capsys):
    d = files["dir"]
    budget = ["--ilp-time-limit", "0"]
    for argv in (["plan", "--fabric", files["fabric"], "--jobs", files["jobs"], *budget],
                 ["plan", "--fabric", files["fat_tree"], "--jobs", files["ft_jobs"], *budget],
                 ["compare", "--fabric", files["fabric"], "--jobs", files["jobs"],
                  "--algorithms", "greedy,ecmp", *budget],
                 ["compare", "--fabric", files["fat_tree"], "--jobs", files["ft_jobs"],
                  "--algorithms", "greedy", "--json"],
                 ["fabric", "--fat-tree", "4"]):
        target = d / "out.txt"
        code, printed, err = run(capsys, *argv, "--out", target)
        assert code == 0 and err == "", (argv, err)
        assert printed.count("\n") == 1 and printed.startswith(f"wrote {target}: "), printed
        code, alone, _ = run(capsys, *argv)  # the same document, printed
        written = target.read_text()
        # timings differ between two runs: the first line, or the documents without them
        if argv[0] == "compare":
            assert written.splitlines()[0] == alone.splitlines()[0]
        else:
            timeless = lambda text: {k: v for k, v in json.loads(text).items()
                                     if k not in ("runtime_ms", "info")}
            assert timeless(written) == timeless(alone)
    code, printed, err = run(capsys, "plan", "--fabric", files["fabric"], "--jobs",
                             files["jobs"], "--algorithm", "greedy", "--out", d / "r.json")
    assert printed == (f"wrote {d / 'r.json'}: greedy plan, objective flows: 9 routes, max link "
                       "load 1 (lower bound 1)\n")
    code, printed, err = run(capsys, "fabric", "--out", d / "no" / "such" / "dir.json")
    assert code == 2 and printed == "" and err.count("\n") == 1 and "cannot write" in err


def test_the_other_tools_print_one_line_with_out(tmp_path, capsys):
    from simulation import simulate, workloads
    from topologies import clos as topology
    fab = tmp_path / "f.json"
    fab.write_text(json.dumps(Clos.generate(4, 12, 8).to_dict()))  # 96 hosts: one bloom x 2
    jobs = tmp_path / "j.json"
    assert workloads.main(["--fabric", str(fab), "--models", "bloom", "--ring-size", "2",
                           "--out", str(jobs)]) == 0
    assert capsys.readouterr().out == f"wrote {jobs}: 1 jobs (bloom-0), 96 flows\n"
    assert len(json.loads(jobs.read_text())["jobs"]) == 1
    small = tmp_path / "small.json"
    small.write_text(json.dumps(JOBS))
    sim = tmp_path / "sim.json"
    assert simulate.main(["--fabric", str(fab), "--jobs", str(small), "--out", str(sim)]) == 0
    assert capsys.readouterr().out == (f"wrote {sim}: greedy, 2 jobs, 1 iteration(s), "
                                       "2 plan(s)\n")
    assert set(json.loads(sim.read_text())["jobs"]) == {"a", "b"}
    wired = tmp_path / "w.json"
    assert topology.main(["--spines", "2", "--leaves", "3", "--out", str(wired)]) == 0
    assert capsys.readouterr().out == (f"wrote {wired}: 5 switches, 6 hosts, wired (dpids, "
                                       "ports, addresses)\n")
    assert json.loads(wired.read_text())["dpids"]
