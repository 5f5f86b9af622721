"""The manual (docs/, built by `make docs`) and the README: the generated reference lists
everything the code has (every controller option, every REST route, every metric family) and is
committed as the code generates it; every command block a reader is told runs without root runs
as written, and what the page says it prints or writes is what it prints or writes.

Convention for the fenced blocks of README.md and the hand-written pages: every block names its
language. A ```bash block has a title, either ``title="Runs without root"`` (run here, page by
page, in one temporary directory per page, in the order they appear, with the venv's ``python``
first on PATH, as with the venv active) or a title starting with ``Needs`` (root, Open vSwitch
and Mininet, etcd, a running controller, the network: listed by ``live_blocks()``), which the
live test ``RUN_BY`` names runs as written (tests/test_tutorials_live.py,
tests/test_howto_live.py) unless ``NOT_RUN`` says why no test can. A block in another language
whose lines look like commands (``text``, ``json``...; not ``python``) is a
``title="Synopsis"`` (placeholders, not meant to be pasted).

Every page with blocks that run has its checks in ``CHECKS`` below, one per block, in order:
each checks what the block wrote or printed against what the page's text states (the phrase is
looked up in the page, so text and check change together). What ``--out`` prints is not checked
(the files written are)."""
import glob
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys

import pytest

from controller.service import api
from controller.shell.flags import OPTS
from tests.test_cli import compare_table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
README = os.path.join(REPO, "README.md")
RUNS = "Runs without root"
SYNOPSIS = "Synopsis"
BLOCK = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)"
                   r"^(?P=indent)```[ \t]*$", re.S | re.M)
TITLE = re.compile(r'title="([^"]*)"')
COMMAND = re.compile(r"^\s*(sudo |python3? |make |curl |mn |\.venv|mlroute-|ryu-manager |etcd |"
                     r"torchrun |ovs-|pip |apt-get )")


def _gen():
    spec = importlib.util.spec_from_file_location("gen_reference",
                                                  os.path.join(DOCS, "gen_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen()


def _pages() -> list[str]:
    """The hand-written pages (not the ones docs/gen_reference.py writes)."""
    generated = {os.path.join(DOCS, p) for p in GEN.GENERATED}
    return sorted(p for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
                  if p not in generated)


def _sources() -> list[str]:
    """Everything a reader pastes from: the README and the hand-written pages."""
    return [README] + _pages()


def _fences(path: str) -> list[dict]:
    """Every fenced block of a page, in order: lang, title, body (indent removed), line."""
    with open(path) as fh:
        text = fh.read()
    out = []
    for m in BLOCK.finditer(text):
        title = TITLE.search(m["attrs"])
        body = "\n".join(line[len(m["indent"]):] for line in m["body"].splitlines())
        out.append({"lang": m["lang"], "title": title[1] if title else "", "body": body,
                    "line": text.count("\n", 0, m.start()) + 1})
    return out


def _blocks(path: str) -> list[tuple[str, str]]:
    """(title, body) of every ```bash block of a page, in order."""
    return [(f["title"], f["body"]) for f in _fences(path) if f["lang"] == "bash"]


def _rel(path: str) -> str:
    return os.path.relpath(path, REPO)


def live_blocks() -> list[tuple[str, str, str]]:
    """(page, title, commands) of every block that needs a live fabric, a controller, root or
    the network."""
    return [(_rel(p), t, b) for p in _sources() for t, b in _blocks(p) if t.startswith("Needs")]


def _prose(path: str) -> str:
    """A page's text without its fenced blocks, on one line (what the page *says*)."""
    with open(path) as fh:
        return " ".join(BLOCK.sub(" ", fh.read()).split())


# ---------------------------------------------------------------- generated reference


def test_every_controller_option_is_in_the_reference():
    page = GEN.options_page()
    missing = [o.name for o in OPTS if f"`--{o.name}`" not in page]
    assert missing == []
    assert "`--nomlroute-failover-probe`" in page  # a boolean's negative form is shown too


def test_every_rest_route_is_in_the_reference():
    page = GEN.rest_page()
    routes = api.routes()
    assert len(routes) >= 10
    missing = [f"{m} {p}" for m, p in routes if f"`{m} {p}`" not in page]
    assert missing == []
    assert "`GET /metrics`" in page


def test_every_metric_family_is_in_the_reference():
    from emulation.harness.busy_service import busy_service
    from tests.test_grafana import SUFFIXES, _exposed
    page = GEN.metrics_page()
    families = set()
    for name in _exposed(busy_service()):
        families.add(next((name[:-len(s)] for s in SUFFIXES if name.endswith(s)), name))
    assert len(families) >= 20
    missing = sorted(f for f in families if f"`{f}`" not in page and f"`{f}_total`" not in page)
    assert missing == []


def _committed(rel: str) -> str:
    with open(os.path.join(DOCS, rel)) as fh:
        return fh.read()


@pytest.mark.parametrize("rel", ["reference/options.md", "reference/rest-api.md",
                                 "reference/metrics.md", "reference/sysctls.md",
                                 "results/trace-replay.md"])
def test_the_committed_generated_page_is_up_to_date(rel):
    """The generated pages are committed (links to them work on a forge); regenerating them
    changes nothing. After a change of the options, routes, metrics or bench files: run
    ``python docs/gen_reference.py`` and commit what it wrote."""
    assert GEN.PAGES[rel]() == _committed(rel), f"docs/{rel} is stale: python docs/gen_reference.py"


@pytest.mark.slow
def test_the_committed_results_page_is_up_to_date(tmp_path, monkeypatch):
    monkeypatch.setattr(GEN, "DOCS", str(tmp_path))  # its figure goes there, not into docs/
    (tmp_path / "results").mkdir()
    assert GEN.results_page() == _committed("results/index.md"), \
        "docs/results/index.md is stale: python docs/gen_reference.py"
    assert os.path.exists(os.path.join(DOCS, "results", "collectives.png"))


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info[:2] != GEN.CLI_PYTHON,
                    reason="argparse's help layout differs between Python versions: the "
                           "command-line page is written on Python {}.{}".format(*GEN.CLI_PYTHON))
def test_the_committed_command_line_page_is_up_to_date():
    assert GEN.cli_page() == _committed("reference/cli.md"), \
        "docs/reference/cli.md is stale: python docs/gen_reference.py"


def test_every_generated_page_is_committed():
    tracked = subprocess.run(["git", "ls-files", "docs"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    missing = [rel for rel in GEN.GENERATED + ("results/collectives.png",)
               if f"docs/{rel}" not in tracked]
    assert missing == []
    with open(os.path.join(REPO, ".gitignore")) as fh:
        ignored = fh.read()
    assert "/docs/reference/" not in ignored and "/docs/results/" not in ignored


# ---------------------------------------------------------------- blocks


def test_every_block_is_marked():
    bad = []
    for path in _sources():
        for f in _fences(path):
            where = f"{_rel(path)}:{f['line']}"
            if not f["lang"]:
                bad.append(f"{where}: a block without a language")
            elif f["lang"] in ("sh", "shell", "console", "bash") and f["lang"] != "bash":
                bad.append(f"{where}: a command block is ```bash")
            elif f["lang"] == "bash" and f["title"] != RUNS and not f["title"].startswith("Needs"):
                bad.append(f"{where}: ```bash without a title {RUNS!r} or 'Needs ...'")
            elif (f["lang"] not in ("bash", "python") and f["title"] != SYNOPSIS
                  and any(COMMAND.match(line) for line in f["body"].splitlines())):
                bad.append(f"{where}: commands in a ```{f['lang']} block (bash, or a Synopsis)")
    assert bad == []
    runnable = [p for p in _sources() if any(t == RUNS for t, _ in _blocks(p))]
    assert any("tutorials" in p for p in runnable) and README in runnable


def test_runnable_blocks_have_no_placeholders():
    """A block that runs is pasted as written: no ``[--optional]`` parts, no one-letter file
    names standing for the reader's."""
    bad = [(_rel(p), line) for p in _sources() for t, b in _blocks(p) if t == RUNS
           for line in b.splitlines()
           if re.search(r"\s\[--|\s--\S+ [A-Z]\b(?!')", line)]
    assert bad == []


def _runnable() -> list[str]:
    return [_rel(p) for p in _sources() if any(t == RUNS for t, _ in _blocks(p))]


def test_every_page_that_runs_has_its_checks():
    counts = {page: sum(t == RUNS for t, _ in _blocks(os.path.join(REPO, page)))
              for page in _runnable()}
    assert {p: len(c) for p, c in CHECKS.items()} == counts


@pytest.mark.slow
@pytest.mark.parametrize("page", _runnable())
def test_the_commands_that_need_no_root_run_and_print_what_the_page_says(page, tmp_path):
    path = os.path.join(REPO, page)
    env = dict(os.environ, PYTHONPATH=REPO,
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    prose = _prose(path)
    bodies = [b for t, b in _blocks(path) if t == RUNS]
    for body, check in zip(bodies, CHECKS[page], strict=True):
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{page}:\n{body}\n--- stderr:\n{r.stderr[-3000:]}"
        check(Run(tmp_path, r.stdout, r.stderr, prose))


# ---------------------------------------------------------------- what the pages say


class Run:
    """One block's run: the folder it ran in, what it printed, the page's text."""

    def __init__(self, cwd, out: str, err: str, prose: str):
        self.cwd, self.out, self.err, self.prose = cwd, out, err, prose

    def says(self, *phrases: str) -> None:
        """The page states each phrase (so a check and the text it checks change together)."""
        missing = [p for p in phrases if " ".join(p.split()) not in self.prose]
        assert missing == [], f"the page no longer says {missing}"

    def json(self, name: str):
        with open(os.path.join(self.cwd, name)) as fh:
            return json.load(fh)


def _ratios(rows: dict, alg: str) -> list[float]:
    return [rows[alg]["ar"][j] / rows["ideal"]["ar"][j] for j in rows["ideal"]["ar"]]


def _leaf_spine(doc: dict, spines: int, leaves: int, hosts: int) -> None:
    assert (len(doc["spines"]), len(doc["leaves"]), len(doc["hosts"])) == (spines, leaves, hosts)


def readme_paper_scale(run: Run):
    run.says("`fabric.json` has 2048 hosts", "3 jobs (`bloom-0`, `llama2-70b-1`, `gpt3-2`)",
             "ECMP puts 6 flows on its busiest link and every job takes 4-6x its ideal time",
             "the greedy and `auto` put 1 flow on every link and every job takes its ideal time")
    _leaf_spine(run.json("fabric.json"), 32, 64, 2048)
    assert [j["id"] for j in run.json("jobs.json")["jobs"]] == ["bloom-0", "llama2-70b-1",
                                                                  "gpt3-2"]
    rows = compare_table(run.out)
    assert rows["ecmp"]["max"] == 6
    assert all(4 * 0.999 <= r <= 6 * 1.001 for r in _ratios(rows, "ecmp")), rows  # printed
    assert max(_ratios(rows, "ecmp")) > 5.9  # to 3 or 4 digits
    for alg in ("greedy", "auto"):
        assert rows[alg]["max"] == 1 and _ratios(rows, alg) == pytest.approx([1] * 3, rel=1e-3)


def first_route_files(run: Run):
    run.says("the demo fabric (4 spines, 8 leaves, 2 hosts per leaf)",
             "every leaf sources two flows (one per ring)")
    _leaf_spine(run.json("fabric.json"), 4, 8, 16)
    jobs = run.json("jobs.json")["jobs"]
    assert [len(j["ranks"]) for j in jobs] == [8, 8]
    assert sorted(h[:h.index("_")] for j in jobs for h in j["ranks"]) == sorted(
        [f"h{i}" for i in range(8)] * 2)


def first_route_plan(run: Run):
    run.says("writes one route per flow with the spine it takes to `routes.json`",
             "ECMP's hash puts two rings' flows on one link (max load 2), so both rings take "
             "twice their ideal time",
             "the greedy and `auto` give every leaf's two flows different spines (max load 1)")
    routes = run.json("routes.json")["routes"]
    assert len(routes) == 16 and all(r["spine"] for r in routes)
    rows = compare_table(run.out)
    assert rows["ecmp"]["max"] == 2 and _ratios(rows, "ecmp") == pytest.approx([2, 2])
    for alg in ("greedy", "auto"):
        assert rows[alg]["max"] == 1 and _ratios(rows, alg) == pytest.approx([1, 1])


def first_route_demo(run: Run):
    run.says("The same comparison with the demo's own defaults")
    rows = compare_table(run.out)
    assert rows["ecmp"]["max"] == 2 and _ratios(rows, "ecmp") == pytest.approx([2, 2])
    assert rows["greedy"]["max"] == 1 and _ratios(rows, "greedy") == pytest.approx([1, 1])


def plan_offline_paper_scale(run: Run):
    run.says("the max link load (on three tiers also the max of each tier, `leaf-agg` and "
             "`agg-core`), links at max, the slowest flow's max-min rate",
             "the predicted All-Reduce time per job",
             "with the greedy every job of `sim.json` takes its ideal All-Reduce time in each of "
             "its 3 iterations")
    _leaf_spine(run.json("fabric.json"), 32, 64, 2048)
    jobs = run.json("jobs.json")["jobs"]
    plan = run.json("routes.json")
    assert plan["algorithm"] == "auto" and len(plan["routes"]) == plan["flows"] > 0
    rows = compare_table(run.out)
    assert list(rows) == ["ideal", "ecmp", "greedy", "auto"]
    assert set(rows["ideal"]["ar"]) == {j["id"] for j in jobs}
    sim = run.json("sim.json")["jobs"]
    assert set(sim) == {j["id"] for j in jobs}
    for job in sim.values():
        assert job["iterations"] == 3 and len(job["allreduce_s"]) == 3
        assert job["allreduce_s"] == pytest.approx([job["ideal_s"]] * 3, rel=1e-6)


def plan_offline_placement(run: Run):
    run.says("a server is 8 consecutive NICs of one leaf (4 servers per leaf by default)",
             "At 90% on 64 x 32, 63 of 64 leaves carry several jobs")
    fabric, jobs = run.json("cluster/fabric.json"), run.json("cluster/jobs.json")["jobs"]
    _leaf_spine(fabric, 32, 64, 2048)
    assert len(fabric["down"]) == 3
    on_leaf: dict[str, set] = {}
    busy = set()
    for job in jobs:
        for ring in job.get("rings") or [job["ranks"]]:
            for h in ring:
                on_leaf.setdefault(fabric["hosts"][h], set()).add(job["id"])
                busy.add((fabric["hosts"][h], int(h.rsplit("_", 1)[1]) // 8))  # a server
    assert sum(len(v) > 1 for v in on_leaf.values()) == 63
    assert 0.85 <= len(busy) / 256 <= 0.9
    rows = compare_table(run.out)
    assert list(rows) == ["ideal", "greedy", "auto"] and len(rows["ideal"]["ar"]) == len(jobs)
    run.says("names the 3 leaves that lost an\nuplink: their 32 busy NICs send 3,200 Gb/s to "
             "other leaves over 3,100 Gb/s of alive uplinks")
    cut = [line for line in run.out.splitlines() if line.startswith("leaf l")]
    assert sorted(line.split(":")[0] for line in cut) == sorted(
        f"leaf {lo}" for lo, _ in fabric["down"])
    assert all("send and receive up to 3200 Gb/s" in line and "over 3100 Gb/s" in line
               and "off it leaves the others within its capacity" in line
               for line in cut)


def three_tier_fat_tree(run: Run):
    run.says("k pods of k/2 leaves and k/2 aggregation switches and (k/2)^2 cores in k/2 groups",
             "`auto`, the greedy and the colouring put one flow on every link (max load 1) and "
             "each ring takes its ideal 11.2 s",
             "both ECMPs put 4 flows on a core link and take 4x as long")
    doc = run.json("fattree.json")
    assert len(doc["pods"]) == 4 and all(len(p["leaves"]) == len(p["aggs"]) == 2
                                         for p in doc["pods"].values())
    assert [len(g) for g in doc["cores"]] == [2, 2] and len(doc["hosts"]) == 16
    rows = compare_table(run.out)
    assert rows["ideal"]["ar"] == {"ring0": 11.2, "ring1": 11.2}
    for alg in ("auto", "greedy", "edge-coloring"):
        assert rows[alg]["max"] == 1 and rows[alg]["ar"] == {"ring0": 11.2, "ring1": 11.2}
    for alg in ("ecmp", "ecmp-polarised"):
        assert rows[alg]["max"] == 4 and rows[alg]["tiers"]["agg-core"] == 4
        assert rows[alg]["ar"] == {"ring0": 44.8, "ring1": 44.8}
    run.says("with its 1% penalty each ring takes 11.31 s")
    assert rows["spray"]["max"] == 1 and rows["spray"]["ar"] == {"ring0": 11.31, "ring1": 11.31}


def three_tier_plan(run: Run):
    run.says("`auto` reaches the lower bound (one flow per link), `gap` is 0")
    plan = run.json("routes.json")
    assert plan["gap"] == 0 and plan["max_link_load"] == plan["lower_bound"] == 1
    assert all(len(r["path"]) == 5 for r in plan["routes"])  # both rings cross every pod
    assert run.out.splitlines()[-1].split()[:2] == ["1.0", "1"]  # the python -c line


def three_tier_planes(run: Run):
    run.says("the ring takes both planes with one flow per link: "
             "`['plane0', 'plane1'] 1.0 1`")
    assert run.out.splitlines()[-1] == "['plane0', 'plane1'] 1.0 1"
    assert len(run.json("planes.json")["planes"]) == 2


def three_tier_wired(run: Run):
    run.says("the fat-tree in Mininet (20 switches, 16 hosts)")
    doc = run.json("fattree-wired.json")
    assert len(doc["dpids"]) == 20 and len(doc["hosts"]) == len(doc["host_ip"]) == 16
    assert doc["link_gbps"] == 0.02


def pytorch_document(run: Run):
    run.says("gloo's ring comes out reversed (rank 0, then 3, 2, 1",
             "NCCL's job is members only")
    gloo, nccl = (json.loads(line) for line in run.out.splitlines())
    assert gloo["collective"] == "ring_allreduce" and gloo["ranks"] == [
        "10.0.0.1", "10.0.3.1", "10.0.2.1", "10.0.1.1"]
    assert "ranks" not in nccl and sorted(nccl["members"]) == sorted(gloo["ranks"])


def redundant_fabric(run: Run):
    run.says("the one the Mininet topology builds")
    doc = run.json("fabric.json")
    _leaf_spine(doc, 4, 8, 16)
    assert len(doc["dpids"]) == 12 and len(doc["host_ip"]) == 16


def declare_jobs_document(run: Run):
    run.says("`job.json` here holds flows: two RoCEv2 queue pairs from `h0_1` to `h1_1` (UDP to "
             "port 4791, one source port each)")
    from controller.model.jobs import parse_job
    from topologies.clos import clos_fabric
    flows = parse_job(run.json("job.json"), clos_fabric(4, 8, 2)).flows()
    assert [(f.src, f.dst, f.proto, f.dport) for f in flows] == [("h0_1", "h1_1", 17, 4791)] * 2
    assert len({f.sport for f in flows}) == 2


def emulation_rings(run: Run):
    run.says("the two rings of `make demo` (host 0 of every leaf, host 1 of every leaf, 4 MB "
             "each, twice `make demo`'s)")
    from emulation.demo import RING_BYTES, demo_jobs
    assert run.json("rings.json") == demo_jobs(size=2 * RING_BYTES)


def install_version(run: Run):
    import controller
    v = controller.__version__
    run.says(f"Each prints its name and the version installed, `{v}`",
             "`python -m controller` is the same command")
    cli, ctl, agent = run.out.splitlines()
    assert (cli, agent) == (f"mlroute {v}", f"mlroute-agent {v}")
    assert re.fullmatch(rf"mlroute-controller {re.escape(v)} \((ryu [\d.]+|os-ken)\)", ctl), ctl


def api_job_document(run: Run):
    run.says("rank 0 first, then the ranks in gloo's data direction",
             "`None` when every rank is on one host")
    gloo, one_host = run.out.splitlines()
    assert json.loads(gloo)["ranks"] == ["10.0.0.1", "10.0.2.1", "10.0.1.1"]
    assert one_host == "None"


def api_slurm_unreachable(run: Run):
    run.says("exits 0 and says why on stderr")
    assert run.out == "" and re.match(r"mlroute-slurm prolog: error: .*\(\d+\.\d+ s\)$",
                                      run.err.strip()), run.err


def srv6_config(run: Run):
    run.says("writes 14 files for 4 switches", "It writes 8 for 4 hosts too, in `srv6/hosts/`",
             "its locator `fcbb:bbbb:3::/48`")
    assert "wrote 14 files for 4 switches, 8 for 4 hosts (hosts/)" in run.out
    assert sorted(p.name for p in (run.cwd / "srv6" / "hosts").iterdir())[:2] == [
        "h0_0.batch", "h0_0.network"]
    assert len(list((run.cwd / "srv6" / "hosts").iterdir())) == 8
    assert "fcbb:bbbb:3::/48 encap seg6local action End flavors next-csid" in run.out
    run.says("once per fabric port at metrics 1, 2")
    assert [line.split()[-3:] for line in run.out.splitlines() if "action End " in line] == [
        ["s0-eth1", "metric", "1"], ["s0-eth2", "metric", "2"]]
    assert json.loads((run.cwd / "srv6" / "s0.json").read_text())["SRV6_MY_SIDS"]


def router_fabric_document(run: Run):
    """The tables give the emulation's own wired document, and the files; the failures the
    page quotes are what a broken table gives."""
    from topologies.clos import clos_fabric
    run.says("2 spines, 2 leaves, 4 hosts; wired (ports, addresses and interface names)",
             "wrote 14 files for 4 switches, 8 for 4 hosts (hosts/)",
             "error: cabling: l1 has no cable to s1",
             "error: fabric: host h0_0 and host h0_1 share the IPv4 address 10.0.0.1")
    assert "2 spines, 2 leaves, 4 hosts; wired (ports, addresses and interface names)" in run.out
    assert "wrote 14 files for 4 switches, 8 for 4 hosts (hosts/)" in run.out
    doc, emulation = run.json("fabric.json"), clos_fabric(2, 2, 2).to_dict()
    assert {k: doc[k] for k in emulation} == emulation  # the emulation's, from its cables
    assert run.json("srv6/fabric.json") == doc
    assert (run.cwd / "srv6" / "hosts" / "h1_1.network").exists()
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    cabling, hosts = (run.cwd / "cabling.csv").read_text(), (run.cwd / "hosts.csv").read_text()
    for bad_cabling, bad_hosts, said in (
            (cabling.replace("l1,l1-eth2,s1,s1-eth2\n", ""), hosts,
             "error: cabling: l1 has no cable to s1"),
            (cabling, hosts.replace("h0_1,10.0.0.2", "h0_1,10.0.0.1"),
             "error: fabric: host h0_0 and host h0_1 share the IPv4 address 10.0.0.1")):
        (run.cwd / "bad-cabling.csv").write_text(bad_cabling)
        (run.cwd / "bad-hosts.csv").write_text(bad_hosts)
        r = subprocess.run(["mlroute", "fabric", "--cabling", "bad-cabling.csv", "--hosts",
                            "bad-hosts.csv", "--out", "bad.json"], cwd=run.cwd, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.startswith(said), r.stderr
        assert not (run.cwd / "bad.json").exists()


def security_credentials(run: Run):
    from controller.service.credentials import host_credential, read_secrets
    run.says("one file per host of the fabric, `h0_0.credential` to `h1_1.credential`, "
             "readable by its owner only", "A credential is `mlh1.<MAC>.<host>`")
    names = ["h0_0.credential", "h0_1.credential", "h1_0.credential", "h1_1.credential"]
    assert run.out.split()[-4:] == names  # what ls prints, after the two summary lines
    secret = read_secrets(str(run.cwd / "host.secrets"))[0]
    for name in names:
        path = run.cwd / "credentials" / name
        assert path.stat().st_mode & 0o077 == 0
        assert path.read_text().strip() == host_credential(secret, name.split(".")[0])
    assert (run.cwd / "admin.token").stat().st_mode & 0o077 == 0


def security_certificate(run: Run):
    run.says("The last command prints `controller.pem: OK`")
    assert run.out.strip().endswith("controller.pem: OK")


CHECKS = {
    "README.md": [readme_paper_scale],
    "docs/tutorials/first-route.md": [first_route_files, first_route_plan, first_route_demo],
    "docs/howto/plan-offline.md": [plan_offline_paper_scale, plan_offline_placement],
    "docs/tutorials/three-tier.md": [three_tier_fat_tree, three_tier_plan, three_tier_planes,
                                     three_tier_wired],
    "docs/tutorials/pytorch-job.md": [pytorch_document],
    "docs/tutorials/redundant-controllers.md": [redundant_fabric],
    "docs/howto/install.md": [install_version],
    "docs/howto/declare-jobs.md": [declare_jobs_document],
    "docs/howto/emulation.md": [emulation_rings],
    "docs/reference/integrations.md": [api_job_document, api_slurm_unreachable],
    "docs/tutorials/srv6.md": [srv6_config],
    "docs/howto/security.md": [security_credentials, security_certificate],
    "docs/howto/router-fabric.md": [router_fabric_document],
}


# ---------------------------------------------------------------- blocks that need root

TUTORIALS_LIVE = "tests/test_tutorials_live.py::"
HOWTO_LIVE = "tests/test_howto_live.py::"
FIRST_ROUTE = TUTORIALS_LIVE + "test_first_route_tutorial_runs_as_written"
THREE_TIER = TUTORIALS_LIVE + "test_three_tier_tutorial_runs_as_written"
PYTORCH = TUTORIALS_LIVE + "test_pytorch_job_tutorial_runs_as_written"
REDUNDANT = TUTORIALS_LIVE + "test_redundant_controllers_tutorial_runs_as_written"
RUN_CONTROLLER = HOWTO_LIVE + "test_run_controller_page_runs_as_written"
DECLARE_JOBS = HOWTO_LIVE + "test_declare_jobs_page_runs_as_written"
EMULATION = HOWTO_LIVE + "test_emulation_page_runs_as_written"
SRV6 = TUTORIALS_LIVE + "test_srv6_tutorial_runs_as_written"
ROUTER_FABRIC = "tests/test_router_fabric_live.py::test_router_fabric_page_runs_as_written"

# (page, first command line of a "Needs" block): the live test that runs it as written and
# checks what the page says it prints
RUN_BY = {
    ("docs/tutorials/first-route.md", "make controller"): FIRST_ROUTE,
    ("docs/tutorials/first-route.md", "mn --custom topologies/clos.py --topo clos,4,8,2"):
        FIRST_ROUTE,
    ("docs/tutorials/first-route.md",
     "mlroute job add jobs.json --url http://127.0.0.1:8080"): FIRST_ROUTE,
    ("docs/tutorials/first-route.md", "make demo"): FIRST_ROUTE,
    ("docs/tutorials/three-tier.md", ".venv/bin/mlroute-controller --mlroute-fabric "
                                     "fattree-wired.json"): THREE_TIER,
    ("docs/tutorials/three-tier.md", "mn --custom topologies/clos.py --topo fattree,4,2,20"):
        THREE_TIER,
    ("docs/tutorials/three-tier.md",
     "mlroute job add jobs.json --url http://127.0.0.1:8080"): THREE_TIER,
    ("docs/tutorials/pytorch-job.md", "torchrun --nnodes 2 --nproc_per_node 1 --node_rank \"$R\" "
                                      "--master_addr 10.0.0.1"): PYTORCH,
    ("docs/tutorials/pytorch-job.md", 'mlroute job list --url "http://$CTL:8080"'):
        PYTORCH,
    ("docs/tutorials/pytorch-job.md", ".venv/bin/python -m emulation.collectives --library "
                                      "gloo --scenario ecmp,correct,rank_order"): PYTORCH,
    ("docs/tutorials/redundant-controllers.md", "etcd --name e0 --data-dir /var/lib/mlroute-etcd"):
        REDUNDANT,
    # two blocks, c0 and c1
    ("docs/tutorials/redundant-controllers.md", ".venv/bin/mlroute-controller --mlroute-fabric "
                                                "fabric.json"): REDUNDANT,
    ("docs/tutorials/redundant-controllers.md", "MLROUTE_SFLOW_TARGET=127.0.0.1:6343,"
                                                "127.0.0.1:6344 mn --custom topologies/clos.py"):
        REDUNDANT,
    ("docs/tutorials/redundant-controllers.md", "curl -s 127.0.0.1:8081/v1/cluster"): REDUNDANT,
    ("docs/howto/run-controller.md", "make controller"): RUN_CONTROLLER,
    ("docs/howto/run-controller.md", "mn --custom topologies/clos.py --topo clos,4,8,2"):
        RUN_CONTROLLER,
    ("docs/howto/run-controller.md", "curl -s -XPOST 127.0.0.1:8080/v1/jobs -d '{\"id\": \"r\", "
                                     "\"collective\": \"ring_allreduce\","): RUN_CONTROLLER,
    ("docs/howto/troubleshooting.md", "ss -ltnup | grep -E ':(6633|6653|8080|6343)\\b'"):
        RUN_CONTROLLER,
    ("docs/howto/declare-jobs.md", "curl -s -XPOST 127.0.0.1:8080/v1/jobs -d '{\"id\": \"r\", "
                                   "\"collective\": \"ring_allreduce\","): DECLARE_JOBS,
    ("docs/howto/declare-jobs.md", "mlroute job add --members 10.0.0.1,10.0.1.1,h2_0 "
                                   "--id j --bytes 4e6"): DECLARE_JOBS,
    ("docs/howto/troubleshooting.md", "mlroute job show j --url "
                                      "http://127.0.0.1:8080 --json"): DECLARE_JOBS,
    ("README.md", "curl -s -XPOST 127.0.0.1:8080/v1/jobs -d '{\"id\": \"r\", \"collective\": "
                  "\"ring_allreduce\","): DECLARE_JOBS,
    ("docs/howto/emulation.md", ".venv/bin/python -m emulation.run --jobs rings.json "
                                "--compare ecmp --mode sr --iterations 1 --out emu"): EMULATION,
    ("docs/tutorials/srv6.md", "python -m emulation.routers --fabric fabric.json"): SRV6,
    ("docs/tutorials/srv6.md", "mlroute-controller --mlroute-fabric fabric.json "
                               "--mlroute-southbound none --wsapi-host 172.30.255.254"): SRV6,
    ("docs/tutorials/srv6.md", "curl -s -XPOST 172.30.255.254:8080/v1/jobs -d '{\"id\": "
                               "\"ring\", \"collective\": \"ring_allreduce\","): SRV6,
    ("docs/howto/router-fabric.md", "sysctl -q -p srv6/sysctl.d/90-mlroute-router.conf"):
        ROUTER_FABRIC,
    ("docs/howto/router-fabric.md", "sysctl -q -p srv6/sysctl.d/90-mlroute-host.conf"):
        ROUTER_FABRIC,
    ("docs/howto/router-fabric.md", "for a in 10.0.0.1 10.0.0.2 10.0.1.1 10.0.1.2; do"):
        ROUTER_FABRIC,
    ("docs/howto/router-fabric.md", "mlroute-controller --mlroute-fabric srv6/fabric.json "
                                    "--mlroute-southbound none --wsapi-host 172.30.255.254"):
        ROUTER_FABRIC,
    ("docs/howto/router-fabric.md", "mlroute-agent --url http://172.30.255.254:8080 --host "
                                    "\"$H\" --dev \"$DEV\""): ROUTER_FABRIC,
    ("docs/howto/router-fabric.md", "curl -s -XPOST 172.30.255.254:8080/v1/jobs -d '{\"id\": "
                                    "\"ring\", \"collective\": \"ring_allreduce\","):
        ROUTER_FABRIC,
}

# (page, first command line of a "Needs" block): why no test runs it
SUITE = "the test suite itself (its lint, the manual and every test): a test cannot run it"
NOT_RUN = {
    ("README.md", "make demo"):
        "the `make demo` of docs/tutorials/first-route.md, which " + FIRST_ROUTE + " runs",
    ("README.md", "make test"): SUITE,
    ("README.md", "make install"):
        "builds the venv from PyPI (the network, minutes): the tests run from the venv it built",
    ("docs/contributing.md", "make test-fast"): SUITE,
    ("docs/howto/install.md", "make install"):
        "builds the venv from PyPI (the network, minutes): the tests run from the venv it built",
    ("docs/howto/install.md", "make system"):
        "installs the machine's packages with apt-get and starts Open vSwitch: as root, make test "
        "and make test-live run it before the live tests",
    ("docs/howto/install.md", "make demo"):
        "`make demo` as in docs/tutorials/first-route.md (" + FIRST_ROUTE + "), then `make "
        "test`, " + SUITE,
    ("docs/howto/install.md", "python -m http.server -d site 8000 --bind 127.0.0.1"):
        "serves site/, which `make docs` builds with MkDocs from its own venv, until Ctrl-C",
    ("docs/howto/troubleshooting.md",
     "/usr/share/openvswitch/scripts/ovs-ctl --system-id=random start"):
        "a fix: (re)starts the machine's Open vSwitch, under the bridges of whatever runs; "
        "fabricnet.ensure_ovs starts it that way when it is down",
    ("docs/howto/troubleshooting.md", "mn -c"):
        "a fix: kills every process named like a controller and deletes every bridge, "
        "/tmp/*.log and /tmp/*.out of the whole machine; the live tests never run it: "
        "fabricnet.cleanup removes only what the harness made (issue 59)",
    ("docs/environment.md", "export DEBIAN_FRONTEND=noninteractive"):
        "the machine's setup (apt-get, Open vSwitch started), what `make system` does before "
        "the live tests",
    ("docs/environment.md", "python3 -m venv .venv"):
        "builds the venv from PyPI by hand, what `make install` does: the tests run from it",
    ("docs/explanation/architecture.md", ".venv/bin/mlroute-controller"):
        "three ways to start one controller, not a sequence: `make controller` runs the first ("
        + RUN_CONTROLLER + "); tests/test_adapters.py starts each framework's adapter as a "
        "process (ryu-manager with controller/shell/app.py, os-ken's where it is installed)",
}


def _first_line(body: str) -> str:
    """A block's first command line: comment lines skipped, a trailing comment and a line
    continuation removed, spaces collapsed."""
    for line in body.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip().removesuffix("\\")
        if line.strip():
            return " ".join(line.split())
    return ""


def test_every_block_that_needs_root_is_run_by_a_live_test_or_says_why_not():
    """Every "Needs ..." block is run as written by the live test ``RUN_BY`` names, or
    ``NOT_RUN`` says why no test can run it: a new block fails here until it is one or the
    other."""
    keys = [(page, _first_line(body)) for page, _title, body in live_blocks()]
    assert len(keys) >= 30
    unaccounted = [k for k in keys if k not in RUN_BY and k not in NOT_RUN]
    assert unaccounted == []
    assert set(RUN_BY) & set(NOT_RUN) == set()
    assert [k for k in list(RUN_BY) + list(NOT_RUN) if k not in keys] == []  # none stale
    assert all(why.strip() for why in NOT_RUN.values())
    for test in sorted(set(RUN_BY.values())):
        path, name = test.split("::")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert callable(getattr(module, name, None)), f"{test} is no test"
        assert any(m.name == "integration" for m in getattr(module, "pytestmark", [])), test
        source = inspect.getsource(module)
        pages = {os.path.basename(page).removesuffix(".md") for (page, _), t in RUN_BY.items()
                 if t == test}
        assert [p for p in pages if p not in source] == [], f"{test} does not read {pages}"


def test_no_block_uses_sudo():
    """Blocks run as root as written (machines without sudo, CI's among them): a block that
    needs root says so in its title ("as root"), not with ``sudo``."""
    bad = [f"{_rel(p)}:{f['line']}" for p in _sources() for f in _fences(p)
           for line in f["body"].splitlines() if re.match(r"\s*sudo\s", line)]
    bad += [f"{_rel(p)}: `sudo ...`" for p in _sources() if re.search(r"`sudo [^`-]", _prose(p))]
    assert bad == []


def test_first_command_lines():
    assert _first_line("# in a second terminal\nsudo mn --topo clos,4,8,2 \\\n  --x") == \
        "sudo mn --topo clos,4,8,2"
    assert _first_line("make demo        # ECMP vs the greedy\nmake test  # x") == "make demo"
    assert _first_line("grep -E ':(6653)\\b' # x") == "grep -E ':(6653)\\b'"


# ---------------------------------------------------------------- figures in the text


def test_make_paper_takes_what_the_pages_say():
    """``make paper`` runs the three grids; their wall times are in the committed summaries."""
    wall = 0.0
    for name in ("paper", "realistic", "clos"):
        with open(os.path.join(DOCS, f"{name}_summary.json")) as fh:
            wall += json.load(fh)["wall_s"]
    minutes = round(wall / 60)
    for path in (os.path.join(DOCS, "howto", "plan-offline.md"),
                 os.path.join(DOCS, "howto", "install.md")):
        stated = re.search(r"`make paper`[^.]*?about (\d+) minutes", _prose(path))
        assert stated, f"{_rel(path)} no longer says how long make paper takes"
        assert abs(int(stated[1]) - minutes) <= 0.15 * minutes, (path, stated[1], minutes)


# ---------------------------------------------------------------- navigation and search


def _nav() -> list[str]:
    """The pages of mkdocs.yml's nav, in order (read without PyYAML's tags)."""
    with open(os.path.join(REPO, "mkdocs.yml")) as fh:
        text = fh.read()
    nav = text[text.index("\nnav:"):]
    return re.findall(r"^\s+- [^:]+: (\S+\.md)\s*$", nav, re.M) + re.findall(
        r"^\s+- (\S+\.md)\s*$", nav, re.M)


def test_the_home_page_links_every_page_of_the_nav():
    nav = _nav()
    assert "tutorials/three-tier.md" in nav and "explanation/clos.md" in nav
    with open(os.path.join(DOCS, "index.md")) as fh:
        links = set(re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", fh.read()))
    missing = [p for p in nav if p != "index.md" and p not in links]
    assert missing == []


def test_the_system_diagram_is_on_the_home_page_and_in_the_architecture():
    """One picture of the system, the same on both pages, naming every part a newcomer meets."""
    diagrams = []
    for rel in ("index.md", "explanation/architecture.md"):
        found = [f for f in _fences(os.path.join(DOCS, rel)) if f["title"].startswith("The system")]
        assert len(found) == 1, rel
        diagrams.append(found[0]["body"])
    assert diagrams[0] == diagrams[1]
    for part in ("hosts", "leaf", "spine", "mlroute-controller", "REST", "PyTorch hook", "Slurm",
                 "mlroute job add", "sFlow", "OpenFlow 1.3", "etcd", "mlroute-agent", "srv6",
                 "aggregation", "cores", "planes", "--mlroute-southbound none"):
        assert part in diagrams[0], part


def test_the_first_pages_answer_what_newcomers_ask():
    """The FAQ's questions, the glossary's words and the "what you need" page (issue 61)."""
    with open(os.path.join(DOCS, "explanation", "faq.md")) as fh:
        questions = re.findall(r"^## (.+)$", fh.read(), re.M)
    assert questions[:4] == ["Do I change my training code?",
                             "What happens to traffic no job declared?",
                             "Can it run beside my routing?", "Does it need OpenFlow?"]
    with open(os.path.join(DOCS, "reference", "glossary.md")) as fh:
        terms = re.findall(r"^\* \*\*(.+?)\*\*:", fh.read(), re.M)
    for term in ("Max-min fair", "Make before break", "flow mode", "sr mode", "host mode",
                 "srv6 mode", "Plane", "Bundle", "Leaf", "Spine", "Aggregation switch", "Core",
                 "uSID (micro-SID)", "Segment list", "SID (segment identifier)",
                 "Learning window"):
        assert term in terms, term
    with open(README) as fh:
        readme = fh.read()
    for rel in ("what-you-need.md", "explanation/faq.md", "reference/glossary.md"):
        assert f"](docs/{rel})" in readme, rel
    # the venv exists before the README's first block that runs
    assert readme.index("make install") < readme.index(f'title="{RUNS}"')
    assert readme.index("source .venv/bin/activate") < readme.index(f'title="{RUNS}"')


def test_the_readme_links_files_that_exist():
    """The README is read on a forge, outside MkDocs' link checks."""
    with open(README) as fh:
        links = re.findall(r"\]\((?!https?:)([^)#\s]+)", fh.read())
    assert len(links) >= 20
    missing = [x for x in links if not os.path.exists(os.path.join(REPO, x))]
    assert missing == []


def test_every_hand_written_page_is_in_the_nav():
    nav = set(_nav())
    outside = [os.path.relpath(p, DOCS) for p in _pages() if os.path.relpath(p, DOCS) not in nav]
    assert outside == []


def test_search_works_from_disk_without_the_internet():
    """Material's offline plugin inlines the search index; its Web Worker shim for file://
    pages is vendored (the plugin would otherwise load it from unpkg.com)."""
    with open(os.path.join(REPO, "mkdocs.yml")) as fh:
        text = fh.read()
    assert re.search(r"^plugins:\n  - search\n  - offline\n", text, re.M)
    shims = re.findall(r"^\s+- (assets/\S*iframe-worker\S*\.js)\s*$", text, re.M)
    assert len(shims) == 1 and os.path.getsize(os.path.join(DOCS, shims[0])) > 500
    with open(os.path.join(REPO, "requirements-docs.txt")) as fh:
        pinned = re.search(r"^mkdocs-material==(\d+)\.(\d+)", fh.read(), re.M)
    assert (int(pinned[1]), int(pinned[2])) >= (9, 0)  # the offline plugin came with 9.0
    with open(os.path.join(DOCS, "howto", "install.md")) as fh:
        assert "python -m http.server -d site" in fh.read()


# ---------------------------------------------------------------- the hooks' API page


def _params(fn) -> list[tuple]:
    """(kind, name, annotation, default) of a function's parameters from inspect, ``self``
    left out; annotations as written (the modules use postponed annotations)."""
    sig = inspect.signature(fn)
    out = [(p.kind.name, p.name, None if p.annotation is p.empty else str(p.annotation),
            "-" if p.default is p.empty else repr(p.default))
           for p in sig.parameters.values() if p.name != "self"]
    ret = None if sig.return_annotation is sig.empty else str(sig.return_annotation)
    return out + [("return", ret)]


def _ast_params(fn) -> list[tuple]:
    """The same from a ``def`` of the page, parsed."""
    import ast
    a = fn.args
    kinds = ([("POSITIONAL_ONLY", x) for x in a.posonlyargs]
             + [("POSITIONAL_OR_KEYWORD", x) for x in a.args]
             + ([("VAR_POSITIONAL", a.vararg)] if a.vararg else [])
             + [("KEYWORD_ONLY", x) for x in a.kwonlyargs]
             + ([("VAR_KEYWORD", a.kwarg)] if a.kwarg else []))
    positional = a.posonlyargs + a.args
    defaults = dict(zip([x.arg for x in positional[len(positional) - len(a.defaults):]],
                        a.defaults))
    defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    out = [(k, x.arg, ast.unparse(x.annotation) if x.annotation else None,
            repr(ast.literal_eval(defaults[x.arg])) if x.arg in defaults else "-")
           for k, x in kinds if x.arg != "self"]
    return out + [("return", ast.unparse(fn.returns) if fn.returns else None)]


def test_the_hooks_page_has_the_signatures_of_the_code():
    """Every ``def`` and class of the page's *Signatures* blocks is the module's, parameter by
    parameter (kind, name, annotation, default) and return annotation."""
    import ast
    documented = 0
    for f in _fences(os.path.join(DOCS, "reference", "integrations.md")):
        if not f["title"].startswith("Signatures: "):
            continue
        module = importlib.import_module(f["title"].split(": ", 1)[1])
        for node in ast.parse(f["body"]).body:
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                for method in node.body:
                    assert _ast_params(method) == _params(getattr(cls, method.name)), \
                        f"{node.name}.{method.name}"
                    documented += 1
            else:
                assert _ast_params(node) == _params(getattr(module, node.name)), node.name
                documented += 1
    assert documented >= 12
    from controller.integrations import pytorch
    assert pytorch.declare_job.__doc__ and pytorch.job_document.__doc__


def test_the_version_is_the_changelog_s_newest():
    import controller
    with open(os.path.join(DOCS, "changelog.md")) as fh:
        versions = re.findall(r"^## (\d+\.\d+\.\d+)\b", fh.read(), re.M)
    assert versions and versions[0] == controller.__version__


def test_the_project_has_its_license_notice_and_citation():
    import controller
    with open(os.path.join(REPO, "LICENSE")) as fh:
        text = fh.read()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    with open(os.path.join(REPO, "NOTICE")) as fh:
        assert fh.readline().strip() == "mlroute"
    with open(os.path.join(REPO, "CITATION.cff")) as fh:
        cff = fh.read()
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.M)
    assert re.search(r"^title: mlroute$", cff, re.M)
    assert re.search(r"^license: Apache-2\.0$", cff, re.M)
    assert re.findall(r"^version: (\S+)$", cff, re.M) == [controller.__version__]


def test_the_manual_cites_nothing_outside_the_repository():
    for path in _pages() + [README, os.path.join(REPO, "mkdocs.yml")]:
        with open(path) as fh:
            assert "../shared" not in fh.read(), path
