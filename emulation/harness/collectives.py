"""Real collective libraries in the emulation: an All-Reduce of PyTorch gloo or of Open MPI
(ring forced) with one rank per Mininet host, against the real controller. The command is
``python -m emulation.collectives`` (``emulation/collectives.py``).

Why: what a user declares and what a library sends can differ (gloo's ring sends each rank's
data to rank - 1), so the controller has to be measured against real libraries, not only
against our own agents. ``run_allreduce`` starts the ranks (``emulation/harness/collective_rank.py``
under Debian's /usr/bin/python3, inside the hosts' network namespaces; Open MPI's ``mpirun``
runs in rank 0's host and starts its daemons in the other hosts through ``mpi_rsh.sh`` instead
of ssh), waits with a timeout and stops every process it started in ``finally``. It returns
per-iteration All-Reduce seconds (slowest rank), whether every rank's reduced tensor holds the
exact sums, the bytes each rank sent to each peer (its own TCP sockets), and the bytes each
leaf sent on each uplink (the leaves' port counters). A scenario (``SCENARIOS``) is one way of
telling the controller about the job: nothing (ECMP), the ring in the library's real data
direction, the ring in rank order, or its members only.

Ranks and logs go to ``/work/logs/collectives/<run>/`` unless told otherwise.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid

from emulation.harness import ovs
from emulation.harness.controller_proc import signals_held
from topologies.clos import host_network

SYSTEM_PYTHON = "/usr/bin/python3"
RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collective_rank.py")
RSH_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_rsh.sh")
LOG_ROOT = "/work/logs/collectives"
LIBRARIES = ("gloo", "mpi")
# Where each library's ring sends a rank's data, as measured by ``ring_direction`` here (the
# tests check it again): gloo to rank - 1, Open MPI's ring allreduce (algorithm 4) to rank + 1.
DATA_DIRECTION = {"gloo": -1, "mpi": +1}
_RUN_TAG = "MLROUTE_COLLECTIVE_RUN"
TIMEOUT_S = float(os.environ.get("MLROUTE_COLLECTIVE_TIMEOUT", 180))  # one run, start to end
LEARN_TIMEOUT_S = 120.0
QUIET_S = 5.0  # > two of the controller's default learning windows (--mlroute-learn-window 2)
MPI_ARGS = ["--allow-run-as-root", "--bind-to", "none", "--oversubscribe",
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "btl", "tcp,self",  # on the job's plane only: _run_once adds its network
            "--mca", "coll_tuned_use_dynamic_rules", "1",
            "--mca", "coll_tuned_allreduce_algorithm", "4",  # ring
            "--mca", "mpi_yield_when_idle", "1",  # 8 ranks share 2 cores with the switches
            # Open MPI 4.1's rtc/hwloc component writes the node's topology to shared memory
            # at a fixed address; eight daemons on one machine sometimes crash there
            # (hwloc_shmem_topology_write, SIGSEGV) and mpirun waited forever. Binding is off
            # anyway (--bind-to none): leave the component out.
            "--mca", "rtc", "^hwloc",
            # a daemon that dies at start-up says why on mpirun's stderr, and mpirun gives up
            # after this many seconds instead of waiting for it forever
            "--mca", "orte_leave_session_attached", "1",
            "--mca", "orte_startup_timeout", "30"]


def missing(library: str) -> str | None:
    """Why ``library`` cannot run here (None: it can)."""
    if library not in LIBRARIES:
        return f"unknown library {library!r} (one of {', '.join(LIBRARIES)})"
    if os.geteuid() != 0:
        return "real collectives run in Mininet, which needs root"
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} is missing"
    module = "torch.distributed" if library == "gloo" else "mpi4py"
    if subprocess.run([SYSTEM_PYTHON, "-c", f"import {module}"], capture_output=True,
                      timeout=120).returncode != 0:
        pkg = "python3-torch" if library == "gloo" else "python3-mpi4py"
        return f"{SYSTEM_PYTHON} cannot import {module} (apt-get install {pkg}; make system)"
    if library == "mpi" and shutil.which("mpirun") is None:
        return "mpirun is missing (apt-get install openmpi-bin; make system)"
    if shutil.which("mnexec") is None:
        return "mnexec is missing (Mininet; make system)"
    return None


def rank_hosts(fabric) -> list[str]:
    """One rank per host, consecutive ranks on different leaves (rank r on leaf r mod L): every
    ring neighbour is across the fabric, and each leaf sends as many flows as it has hosts.
    On three tiers the leaves take turns by pod (first leaf of every pod, then the second...):
    ring neighbours are in different pods, so rings cross the cores."""
    slot = {leaf: i for pod in fabric.leaves_by_pod() for i, leaf in enumerate(pod)}
    leaves = sorted(fabric.leaves, key=lambda leaf: slot[leaf])  # stable: pods stay in order
    by_leaf = [list(fabric.hosts_of_leaf[leaf]) for leaf in leaves]
    return [by_leaf[r % len(by_leaf)][r // len(by_leaf)]
            for r in range(sum(len(h) for h in by_leaf))]


def one_per_leaf(fabric, hosts: list[str]) -> list[str]:
    """The first of ``hosts`` on each leaf, in the fabric's leaf order."""
    return [next(h for h in hosts if fabric.hosts[h] == leaf) for leaf in fabric.leaves]


def ring(hosts: list[str], direction: int) -> list[str]:
    """The ring to declare for ranks ``hosts`` whose data goes to rank + ``direction``."""
    return list(hosts) if direction > 0 else list(reversed(hosts))


# ---- measuring the fabric ------------------------------------------------------------------

def uplink_bytes(fabric) -> dict[str, int]:
    """Bytes every switch has sent on each uplink (``leaf->spine``; on three tiers also
    ``aggregation->core``), from its port counters."""
    out, ports = {}, {}
    for lower, upper in fabric.links():
        if lower not in ports:
            ports[lower] = ovs.port_bytes(lower)
        out[f"{lower}->{upper}"] = ports[lower][fabric.port(lower, upper)]["tx"]
    return out


def imbalance(fabric, sent: dict[str, int]) -> float:
    """Worst switch's (max - mean) / mean over its uplinks' bytes: 0 balanced, S - 1 when one
    uplink of S carried everything."""
    ups: dict[str, list[int]] = {}
    for lower, upper in fabric.links():
        ups.setdefault(lower, []).append(sent[f"{lower}->{upper}"])
    worst = 0.0
    for b in ups.values():
        mean = sum(b) / len(b)
        if mean > 0:
            worst = max(worst, (max(b) - mean) / mean)
    return worst


def ring_direction(pairs: dict[tuple[int, int], int], world: int) -> int | None:
    """+1 or -1 when every rank sent most of its bytes to rank + 1 (resp. rank - 1), else None."""
    dirs = set()
    for r in range(world):
        mine = {d: b for (s, d), b in pairs.items() if s == r}
        if not mine:
            return None
        top = max(mine, key=mine.get)
        dirs.add({1: 1, world - 1: -1}.get((top - r) % world))
    return dirs.pop() if len(dirs) == 1 and None not in dirs else None


# ---- running ranks -------------------------------------------------------------------------

def _tagged(tag: str) -> list[int]:
    """PIDs of live processes whose environment carries this run's tag (ranks, mpirun, orted)."""
    needle = f"{_RUN_TAG}={tag}".encode()
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                with open(f"/proc/{d}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        pids.append(int(d))
            except OSError:
                pass
    return pids


def _stop(procs: list[subprocess.Popen], tag: str, grace: float = 3.0) -> None:
    """Stop what this run started: its process groups, then anything still carrying its tag
    (Open MPI's daemons and ranks); SIGTERM first, SIGKILL after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        for pid in _tagged(tag):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (any(p.poll() is None for p in procs)
                                               or _tagged(tag)):
            time.sleep(0.1)
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


def _spawn(cmd: list[str], log_base: str, env: dict, procs: list) -> subprocess.Popen:
    with open(log_base + ".out", "w") as out, open(log_base + ".err", "w") as err:
        with signals_held() as got:  # no Ctrl-C between the fork and recording the process
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
            procs.append(p)
    if got:
        raise KeyboardInterrupt
    return p


def _results(texts: list[str]) -> list[dict]:
    out = []
    for text in texts:
        out += [json.JSONDecoder().raw_decode(line.split("RESULT ", 1)[1])[0]
                for line in text.splitlines() if "RESULT {" in line]
    return out


class LaunchStalled(TimeoutError):
    """The library's launcher never got every rank running (Open MPI: a remote daemon that
    does not report back, so mpirun gives up at ``orte_startup_timeout``), or a rank said it
    could not connect to a peer and may hang (Open MPI 4.1's TCP transport: "connect() ...
    failed: Operation now in progress (115)" on an overloaded node, open-mpi/ompi#11508; here
    it was the switches starved of CPU, see ``fabricnet.ensure_switch_priority``)."""


# what Open MPI prints before a run that waits forever: stop it at once instead of at the timeout
MPI_STALL_SIGNS = ("Open MPI failed to TCP connect to a peer MPI process",)


def _mpi_stall_sign(logdir: str) -> str | None:
    """The first sign of a hanging Open MPI run in mpirun's stderr, None if there is none."""
    try:
        with open(os.path.join(logdir, "mpirun.err"), errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    return next((sign for sign in MPI_STALL_SIGNS if sign in text), None)


def _mpi_ranks_started(logdir: str) -> int:
    """Ranks Open MPI started: ``--output-filename`` makes one folder per rank at its launch."""
    try:
        return len(os.listdir(os.path.join(logdir, "ranks", "1")))
    except OSError:
        return 0


def run_allreduce(net, fabric, library: str, hosts: list[str], mib: int = 4, iters: int = 3,
                  logdir: str | None = None, timeout: float = TIMEOUT_S, attempts: int = 3,
                  a2a_mib: int = 0, ddp: bool = False, cancel: threading.Event | None = None,
                  plane: int = 0, counters=None, mpi_args=(), a2a_schedule: str = "all") -> dict:
    """One All-Reduce run of ``library`` with rank r on ``hosts[r]``. A run that does not end
    within ``timeout``, or whose launcher gives up before every rank started
    (``LaunchStalled``), is stopped and started afresh, at most ``attempts`` times; the result
    lists those stalls (``stalled``; the benchmark measured about 7% of Open MPI launches on 2
    cores before the switches had their CPU, see ``LaunchStalled``). Raises RuntimeError
    (with the log folder) when a rank fails, TimeoutError when every attempt stalled.
    ``a2a_mib`` (gloo): an all-to-all of that many MiB per rank before each All-Reduce (a
    mixture-of-experts layer). ``ddp`` (gloo): iterations of DistributedDataParallel training
    of a model of ``mib`` MiB instead (``collective_rank.run_ddp``). ``cancel``: an event that
    stops the run (its processes too) when set, for runs in other threads. ``plane`` (a
    fabric of several planes): the ranks bind to that plane's interface (gloo) or network
    (Open MPI) and connect to its addresses, as a framework told which NIC to use does.
    ``counters(fabric)``: the uplinks' sent bytes (default: Open vSwitch's port counters,
    ``uplink_bytes``; routers: their interfaces'). ``mpi_args``: Open MPI's, after
    ``MPI_ARGS``; ``a2a_schedule``: the all-to-all's (``collective_rank --a2a-schedule``)."""
    stalls = []
    for k in range(attempts):
        if cancel is not None and cancel.is_set():  # another job of a joint run failed
            raise RuntimeError(f"{library}: run cancelled before attempt {k + 1}")
        try:
            res = _run_once(net, fabric, library, hosts, mib, iters,
                            logdir if k == 0 or logdir is None else f"{logdir}-retry{k}", timeout,
                            a2a_mib, ddp, cancel, plane, counters or uplink_bytes, mpi_args, a2a_schedule)
        except TimeoutError as e:
            stalls.append(str(e))
            if k + 1 == attempts:
                raise
            continue
        res["stalled"] = stalls
        return res
    raise AssertionError("unreachable")


def _run_once(net, fabric, library: str, hosts: list[str], mib: int, iters: int,
              logdir: str | None, timeout: float, a2a_mib: int = 0, ddp: bool = False,
              cancel: threading.Event | None = None, plane: int = 0,
              counters=uplink_bytes, mpi_args=(), a2a_schedule: str = "all") -> dict:
    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r}")
    if (a2a_mib or ddp) and library != "gloo":
        raise ValueError("an all-to-all phase and DDP training run with gloo only")
    tag = uuid.uuid4().hex[:12]
    logdir = logdir or os.path.join(LOG_ROOT, f"{time.strftime('%H%M%S')}-{library}-{tag}")
    os.makedirs(logdir, exist_ok=True)
    env = {**os.environ, _RUN_TAG: tag, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    world = len(hosts)
    common = [f"--mib={mib}", f"--iters={iters}", f"--timeout={timeout:g}", f"--a2a-schedule={a2a_schedule}"]
    procs: list[subprocess.Popen] = []
    before = counters(fabric)
    t_start = time.monotonic()
    try:
        if library == "gloo":
            master = fabric.ip_of(hosts[0], plane)
            for r, h in enumerate(hosts):
                node = net.get(h)
                iface = f"{h}-eth{plane}" if plane else node.defaultIntf().name  # eth<q>: plane q
                _spawn(["mnexec", "-a", str(node.pid), SYSTEM_PYTHON, RANK_SCRIPT,
                        "ddp" if ddp else "gloo",
                        f"--master={master}", f"--rank={r}", f"--world={world}",
                        f"--ip={fabric.ip_of(h, plane)}", f"--a2a-mib={a2a_mib}", *common],
                       os.path.join(logdir, f"rank{r}"),
                       {**env, "GLOO_SOCKET_IFNAME": iface}, procs)
        else:
            # Open MPI refuses "_" in node names (h0_0): nodes are named by their addresses
            hostmap, network = os.path.join(logdir, "hostmap"), host_network(fabric, plane)
            with open(hostmap, "w") as fh:
                fh.writelines(f"{fabric.ip_of(h, plane)} {net.get(h).pid}\n" for h in hosts)
            with open(os.path.join(logdir, "hostfile"), "w") as fh:
                fh.writelines(f"{fabric.ip_of(h, plane)} slots=1\n" for h in hosts)
            _spawn(["mnexec", "-a", str(net.get(hosts[0]).pid), "mpirun", *MPI_ARGS, *mpi_args,
                    "--mca", "btl_tcp_if_include", network, "--mca", "oob_tcp_if_include", network,
                    "--mca", "plm_rsh_agent", RSH_AGENT,
                    "--hostfile", os.path.join(logdir, "hostfile"), "--map-by", "node",
                    "-np", str(world), "--output-filename", os.path.join(logdir, "ranks"),
                    SYSTEM_PYTHON, RANK_SCRIPT, "mpi", *common],
                   os.path.join(logdir, "mpirun"), {**env, "MLROUTE_MPI_HOSTMAP": hostmap},
                   procs)
        deadline = t_start + timeout
        polls = 0
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{library} All-Reduce did not end within {timeout:g} s; "
                                   f"logs in {logdir}")
            if any(p.returncode not in (None, 0) for p in procs):
                break
            if cancel is not None and cancel.is_set():
                raise RuntimeError(f"{library}: run cancelled; logs in {logdir}")
            polls += 1
            if library == "mpi" and polls % 5 == 0 and (sign := _mpi_stall_sign(logdir)):
                raise LaunchStalled(f"mpi: {sign!r}; logs in {logdir}")
            time.sleep(0.2)
        failed = [p.args for p in procs if p.returncode != 0]
        if failed and library == "mpi" and _mpi_ranks_started(logdir) < world:
            raise LaunchStalled(f"mpi: mpirun gave up after {_mpi_ranks_started(logdir)} of "
                                f"{world} ranks started; logs in {logdir}")
        if failed:
            raise RuntimeError(f"{library}: {len(failed)} process(es) failed; logs in {logdir}")
    finally:
        _stop(procs, tag)
    elapsed = time.monotonic() - t_start
    after = counters(fabric)
    texts = []
    for root, _dirs, files in os.walk(logdir):
        texts += [open(os.path.join(root, f)).read() for f in files  # mpirun.out interleaves
                  if (f.endswith(".out") and f != "mpirun.out") or f == "stdout"]
    ranks = {r["rank"]: r for r in _results(texts)}
    if sorted(ranks) != list(range(world)):
        raise RuntimeError(f"{library}: results of ranks {sorted(ranks)} only; logs in {logdir}")
    ip_rank = {fabric.ip_of(h, plane): r for r, h in enumerate(hosts)}
    pairs = {(r, ip_rank[ip]): b for r, res in ranks.items() for ip, b in res["sent"].items()
             if ip in ip_rank}
    uplinks = {k: after[k] - before[k] for k in after}
    return {"library": library, "ranks": hosts, "mib": mib, "iterations": iters,
            "times": [max(ranks[r]["times"][i] for r in ranks) for i in range(iters)],
            "sums_ok": all(res["max_error"] == 0 for res in ranks.values()),
            "max_error": max(res["max_error"] for res in ranks.values()),
            "pairs": {f"{s}->{d}": b for (s, d), b in sorted(pairs.items())},
            "direction": ring_direction(pairs, world), "uplinks": uplinks,
            "imbalance": round(imbalance(fabric, uplinks), 4), "wall_s": round(elapsed, 2),
            "start": min(res["start"] for res in ranks.values()),
            "logs": logdir, "spans": [ranks[r].get("spans", []) for r in range(world)]}


# ---- scenarios: how the controller is told about the job -------------------------------------

def _job(library, mib, ranks=None, members=None):
    job = {"id": f"{library}-allreduce", "bytes": mib * (1 << 20)}
    if members is not None:
        job["members"] = members
    else:
        job["ranks"] = ranks
    return job


def post_job(ctl, job) -> dict:
    status, doc = ctl.rest("POST", "/v1/jobs", job)
    if status != 201:
        raise RuntimeError(f"POST /v1/jobs {job['id']}: {status} {doc}")
    return doc


def learning_supported(ctl) -> bool:
    """Whether the controller takes jobs declared by their members (issue 14's learned
    matrices): a member list of one is refused either way, but not for the same reason."""
    status, doc = ctl.rest("POST", "/v1/jobs", {"id": "mlroute-probe", "members": ["10.0.0.1"]})
    if status == 201:  # should not happen; leave nothing behind
        ctl.rest("DELETE", "/v1/jobs/mlroute-probe")
    return "unknown field 'members'" not in str(doc.get("error", ""))


def job_view(ctl, jid) -> dict:
    return ctl.rest("GET", f"/v1/jobs/{jid}")[1]


def _with_job(session, library, hosts, mib, iters, logdir, job, learn=False,
              learn_timeout=LEARN_TIMEOUT_S, plane=0) -> dict:
    """Post ``job`` (None: no job), run, delete. With ``learn``, first run the All-Reduce
    until the controller says it has learned the job's matrix (``"matrix": "learned"``),
    recording how long that took from the first iteration's start, then measure."""
    if learn:  # traffic of an earlier run must not count: the learning time starts from quiet
        time.sleep(QUIET_S)
    if job:
        post_job(session.ctl, job)
    try:
        learning = None
        if learn:
            learning = _learn(session, library, hosts, mib, logdir, job["id"], learn_timeout,
                              plane=plane)
        res = run_allreduce(session.net, session.fabric, library, hosts, mib, iters,
                            logdir and os.path.join(logdir, "measured"), plane=plane)
        if job:
            res["job"] = {"declared": job, "view": job_view(session.ctl, job["id"]),
                          "events": session.ctl.rest("GET", "/v1/fabric")[1].get("events")}
            if logdir:
                ovs.save_state(session.fabric.leaves, logdir)
        if learning:
            res["learning"] = learning
        return res
    finally:
        if job:
            session.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


SETTLE_S = 10.0  # a plan holding more than the measured pairs, kept this long, is settled


def _learn(session, library, hosts, mib, logdir, jid, timeout, a2a_mib=0, plane=0) -> dict:
    """Run the All-Reduce (one iteration per run) while polling the job's view, until it is
    learned: its matrix ``learned``, the estimate steady and every measured pair planned (a
    launch's rendezvous, alone at first, may be learned before the ring: that is not the
    job's pattern yet). Returns the seconds from the first run's first iteration to the view
    saying so. Then drops the flows the datapath cached before the plan
    (``ovs.purge_datapath_flows``): the learning runs sent the job's pairs on hashed paths."""
    import threading
    seen: dict = {}
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            try:
                v = job_view(session.ctl, jid)
            except OSError:
                v = {}
            state = _planned_as_measured(v)
            if state == "partly" and "partly" not in seen:
                seen["partly"] = time.time()
            elif state != "partly":
                seen.pop("partly", None)
            done = state == "exactly" or time.time() - seen.get("partly", 1e18) > SETTLE_S
            if done and "at" not in seen:
                seen.update(at=time.time(), view=v)
            stop.wait(0.25)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    first, runs, traffic = None, [], 0.0
    try:
        while "at" not in seen:
            # seconds of runs that carried traffic: a launch that stalled and was started
            # again (run_allreduce) does not count against the job's learning
            if traffic > timeout:
                raise TimeoutError(f"job {jid} not learned within {timeout:g} s of traffic "
                                   f"(view: {job_view(session.ctl, jid)})")
            r = run_allreduce(session.net, session.fabric, library, hosts, mib, 1,
                              logdir and os.path.join(logdir, f"learning{len(runs)}"),
                              a2a_mib=a2a_mib, plane=plane)
            first = first or r["start"]
            runs.append(r["times"][0])
            traffic += r["wall_s"]
    finally:
        stop.set()
        poller.join(timeout=5)
    ovs.purge_datapath_flows()  # what follows runs on the plan, not on flows cached before it
    # from the first timed iteration: negative if learned from start-up and warm-up traffic
    return {"seconds": round(seen["at"] - first, 2), "runs": runs,
            "measured_flows": seen["view"].get("measured_flows")}


def _planned_as_measured(view: dict) -> str:
    """``exactly`` when the job's steady learned matrix is what is planned, ``partly`` when
    the plan holds more (pairs that went quiet: the controller judges them, and keeps them
    unless a re-plan gains), else ``no``."""
    measured = {(m["src"], m["dst"]) for m in view.get("measured_flows") or ()}
    planned = {(r["src"], r["dst"]) for r in view.get("routes", ())}
    if (view.get("matrix") != "learned" or not measured
            or not (view.get("learning") or {}).get("steady", True) or not measured <= planned):
        return "no"
    return "exactly" if measured == planned else "partly"


def ecmp(session, library, hosts, mib=4, iters=3, logdir=None) -> dict:
    """No job posted: the fabric's default (hashed) paths."""
    return _with_job(session, library, hosts, mib, iters, logdir, None)


def declared_correct(session, library, hosts, mib=4, iters=3, logdir=None, plane=0) -> dict:
    """The ring declared in the direction the library really sends its data."""
    return _with_job(session, library, hosts, mib, iters, logdir,
                     _job(library, mib, ring(hosts, DATA_DIRECTION[library])), plane=plane)


def declared_rank_order(session, library, hosts, mib=4, iters=3, logdir=None) -> dict:
    """The ring declared in rank order, as a user would write it (wrong for gloo); measured
    as it runs, learning or not."""
    return _with_job(session, library, hosts, mib, iters, logdir, _job(library, mib, hosts))


def declared_wrong_static(session, library, hosts, mib=4, iters=3, logdir=None) -> dict:
    """The ring declared against the library's data direction with ``"learn": false``: the
    pitfall as it is when nothing checks the declaration (for gloo, the ring in rank order)."""
    job = _job(library, mib, ring(hosts, -DATA_DIRECTION[library]))
    return _with_job(session, library, hosts, mib, iters, logdir, {**job, "learn": False})


def declared_wrong_learned(session, library, hosts, mib=4, iters=3, logdir=None) -> dict:
    """The ring declared against the library's data direction, measured after the controller
    has corrected it from the traffic."""
    return _with_job(session, library, hosts, mib, iters, logdir,
                     _job(library, mib, ring(hosts, -DATA_DIRECTION[library])), learn=True)


def members_only(session, library, hosts, mib=4, iters=3, logdir=None, plane=0) -> dict:
    """The job declared by its members' addresses only (their first plane's), measured after
    learning; its ranks run on ``plane``."""
    members = [session.fabric.host_ip[h] for h in hosts]
    return _with_job(session, library, hosts, mib, iters, logdir,
                     _job(library, mib, members=members), learn=True, plane=plane)


def moe_members(session, library, hosts, mib=4, iters=3, logdir=None) -> dict:
    """A mixture-of-experts-like job declared by its members: one rank per leaf (4 ranks),
    every iteration an all-to-all of ``mib`` / 2 MiB per rank (about a fifth of the bytes),
    then the ring All-Reduce; measured after learning. gloo only."""
    if library != "gloo":
        raise ValueError("the mixture-of-experts scenario runs with gloo only")
    ranks = one_per_leaf(session.fabric, hosts)
    job = _job(library, mib, members=[session.fabric.host_ip[h] for h in ranks])
    time.sleep(QUIET_S)
    post_job(session.ctl, job)
    try:
        learning = _learn(session, library, ranks, mib, logdir, job["id"], LEARN_TIMEOUT_S,
                          a2a_mib=max(1, mib // 2))
        res = run_allreduce(session.net, session.fabric, library, ranks, mib, iters,
                            logdir and os.path.join(logdir, "measured"),
                            a2a_mib=max(1, mib // 2))
        res["job"] = {"declared": job, "view": job_view(session.ctl, job["id"])}
        res["learning"] = learning
        return res
    finally:
        session.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")


SCENARIOS = {"ecmp": ecmp, "correct": declared_correct, "rank_order": declared_rank_order,
             "wrong_static": declared_wrong_static, "wrong_learned": declared_wrong_learned,
             "members": members_only, "moe": moe_members}
# need a controller that learns matrices (issue 14); without one, rank order is the pitfall
LEARNING_SCENARIOS = ("wrong_static", "wrong_learned", "members")


def ideal_s(n: int, mib: int, bw_mbps: float) -> float:
    """A ring All-Reduce's time at the links' line rate: 2(n-1)/n of the tensor per rank."""
    return 2 * (n - 1) / n * mib * (1 << 20) * 8 / (bw_mbps * 1e6)
