"""mlroute's options, through the framework's own configuration (oslo.config): the same on both
frameworks, for ``mlroute-controller`` (``shell/launch.py``: Ryu or os-ken) and for ryu-manager.

On the command line: ``mlroute-controller --mlroute-fabric F`` (under Ryu also
``ryu-manager --user-flags controller/shell/flags.py --mlroute-fabric F controller/shell/app.py``);
or in a config file given with ``--config-file`` (section [DEFAULT]: ``mlroute_fabric = F``).
REST port and address are Ryu's ``--wsapi-port``/``--wsapi-host`` (mlroute makes the address
default to 127.0.0.1), the OpenFlow port Ryu's ``--ofp-tcp-listen-port``.
"""
import sys

from oslo_config import cfg

from controller.discovery.lldp import ECHO_INTERVAL, LLDP_BUDGET, LLDP_INTERVAL
from controller.planners.registry import listing
from controller.service.settings import ILP_TIME_LIMIT_S, Settings

# an option that Settings also has takes its default from there: one set of defaults

OPTS = [
    cfg.StrOpt("mlroute-fabric", default=None,
               help="fabric JSON with wiring (dpids, ports, host_ip, host_mac); without it the "
                    "fabric is discovered (LLDP, ARP), or declared by PUT /v1/fabric"),
    cfg.StrOpt("mlroute-algorithm", default=Settings.algorithm,
               help=f"planner for jobs that do not ask for one: {listing()}; auto "
                    "recommended. What each runs: the planner table of "
                    "docs/reference/options.md; every name runs on every fabric, an unknown "
                    "one is refused (400) naming the choices"),
    cfg.StrOpt("mlroute-objective", default=Settings.objective,
               help="auto's objective for jobs that do not ask for one: jobs (default: worst "
                    "then mean job's predicted slowdown, then link flow counts; its full "
                    "search takes 15-87 ms at 64x32, bench/planner.json section layer2, so "
                    "it runs off the request path) or flows (the paper's max-min link flow "
                    "counts, both layers; 2.5-14 ms there)"),
    cfg.StrOpt("mlroute-mode", default=Settings.mode,
               help="enforcement for jobs that do not ask for one: flow, sr, host (no "
                    "per-flow entry: each flow gets a source port that leads to its spine) or "
                    "srv6 (each host's mlroute-agent pushes the path as a segment list)"),
    cfg.StrOpt("mlroute-southbound", default="openflow",
               help="how the switches are reached: openflow, or none (plain IP routers "
                    "configured once by `mlroute srv6-config`: no OpenFlow channel, every "
                    "declared switch counts as synchronised, jobs run in srv6 mode through "
                    "the hosts' agents; needs --mlroute-fabric)"),
    cfg.IntOpt("mlroute-max-flow-rules", default=Settings.max_flow_rules,
               help="flow entries a switch may hold (0: no budget); a flow or sr job that "
                    "would exceed it is refused with 409, or see --mlroute-over-budget"),
    cfg.StrOpt("mlroute-over-budget", default=Settings.over_budget,
               help="a job over the rule budget: refuse (409) or host (planned in host mode)"),
    cfg.StrOpt("mlroute-state", default=None,
               help="sqlite file keeping fabric, jobs and routes across restarts"),
    cfg.FloatOpt("mlroute-stats-interval", default=2.0,
                 help="seconds between port and flow statistics requests (0: off)"),
    cfg.FloatOpt("mlroute-barrier-timeout", default=5.0,
                 help="seconds a switch has to confirm rules (barrier reply)"),
    cfg.FloatOpt("mlroute-ilp-time-limit", default=ILP_TIME_LIMIT_S,
                 help="ILP time limit in seconds (the ilp planner; auto's ILP stage, run off "
                      "the request path; 0 turns auto's ILP stage off)"),
    cfg.IntOpt("mlroute-seed", default=1234, help="simulated annealing seed"),
    cfg.IntOpt("mlroute-ecmp-salt", default=0, help="salt of the ECMP hash"),
    cfg.FloatOpt("mlroute-dead-after", default=Settings.dead_after,
                 help="seconds a switch may stay disconnected before its links count as "
                      "failed (a lost control connection alone does not stop forwarding)"),
    cfg.FloatOpt("mlroute-restart-grace", default=Settings.restart_grace,
                 help="seconds switches that lost their connection together (a restart round: "
                      "an Open vSwitch restart, the management network) may stay away before "
                      "those still away count as failed; a port down is acted on at once "
                      "(0: no rounds, every lost switch has --mlroute-dead-after)"),
    cfg.IntOpt("mlroute-restart-quorum", default=Settings.restart_quorum,
               help="switches of the fabric that must lose their connection within 1 s of "
                    "each other to form a restart round (at least 2)"),
    cfg.FloatOpt("mlroute-lldp-interval", default=LLDP_INTERVAL,
                 help="seconds between LLDP probe rounds of discovery (0: no probes)"),
    cfg.IntOpt("mlroute-lldp-budget", default=LLDP_BUDGET,
               help="LLDP probes a second at most: a fabric with more switch ports probes "
                    "them in turns, and a link expires after 3.5 whole cycles unheard "
                    "(0: every port each round)"),
    cfg.FloatOpt("mlroute-echo-interval", default=ECHO_INTERVAL,
                 help="seconds between rounds of echoes through every switch's data plane: a "
                      "switch whose echoes are lost in two rounds, its ports still up, counts "
                      "as failed at once (0: no echoes; such a switch fails when its "
                      "connection has been lost for --mlroute-dead-after)"),
    cfg.FloatOpt("mlroute-link-gbps", default=Settings.link_gbps,
                 help="link speed of a discovered fabric; wins over the current speed switches "
                      "report for their ports (OpenFlow port description), else 100"),
    cfg.StrOpt("mlroute-ecmp", default=Settings.ecmp,
               help="how the select groups of a three-tier fabric's aggregation switches hash "
                    "unplanned traffic: per-tier (apart from the leaves' choice: every core "
                    "used) or polarised (alike: a leaf's choice fixes the core)"),
    cfg.FloatOpt("mlroute-hold-down", default=Settings.hold_down,
                 help="seconds a link that came back must stay up before auto re-optimises "
                      "the running jobs onto it (0: at once)"),
    # learned matrices (controller/service/learning.py): traffic measured by sFlow samples
    cfg.IntOpt("mlroute-sflow-port", default=6343,
               help="UDP port of the sFlow collector that measures what each job's members "
                    "send each other (0: no measurement, declared matrices only)"),
    cfg.StrOpt("mlroute-sflow-host", default="127.0.0.1",
               help="address the sFlow collector listens on (the switches' sFlow target)"),
    cfg.StrOpt("mlroute-sflow-sampling-points", default=Settings.sampling_points,
               help="where the switches sample: all (Open vSwitch samples whole bridges), "
                    "leaves, or edge (the leaves' host-facing ports only); the byte estimate "
                    "divides by the sampling points a packet crosses"),
    cfg.FloatOpt("mlroute-learn-window", default=Settings.learn_window,
                 help="seconds per window of measured traffic; a job's matrix is learned once "
                      "it kept the same pairs over two windows of steady traffic"),
    cfg.FloatOpt("mlroute-learn-min-gain", default=Settings.learn_min_gain,
                 help="a job is re-planned on its measured matrix only when the shared "
                      "prediction (the planners' and the job view's) says its iteration is "
                      f"this much shorter ({Settings.learn_min_gain}: "
                      f"{Settings.learn_min_gain * 100:g}%%; jobs with \"learn\": false never)"),
    cfg.IntOpt("mlroute-learn-replans-per-minute", default=Settings.learn_replans_per_minute,
               help="re-plans of one job on measured matrices per minute, at most"),
    cfg.StrOpt("mlroute-sflow-agents", default="",
               help="addresses or networks (comma-separated, e.g. 10.0.0.0/24) allowed to send "
                    "sFlow; empty: the addresses the switches connect from over OpenFlow; "
                    "other datagrams are counted and dropped"),
    cfg.StrOpt("mlroute-token", default=None, secret=True,
               help="if set, PUT/POST/DELETE requests need 'Authorization: Bearer <token>' "
                    "(visible in ps: prefer --mlroute-token-file or MLROUTE_TOKEN)"),
    cfg.StrOpt("mlroute-token-file", default=None,
               help="file whose first line is the write token (instead of --mlroute-token; "
                    "the environment variable MLROUTE_TOKEN is the third way)"),
    # who may do what over REST (controller/service/credentials.py, docs/howto/security.md)
    cfg.StrOpt("mlroute-host-secret-file", default=None,
               help="file of host secrets, one per line (the first issues, every one "
                    "verifies: rotation): each host's agent then has its own credential "
                    "(mlroute agent-credential HOST), reads and writes only "
                    "/v1/hosts/HOST/..., and the admin token reports for no host; needs "
                    "--mlroute-token or --mlroute-token-file"),
    cfg.StrOpt("mlroute-tls-cert", default=None,
               help="PEM certificate (chain) of the REST server: every connection is HTTPS "
                    "(with --mlroute-tls-key); without it REST is plain HTTP"),
    cfg.StrOpt("mlroute-tls-key", default=None, help="PEM private key of --mlroute-tls-cert"),
    cfg.StrOpt("mlroute-tls-client-ca", default=None,
               help="PEM CA of client certificates: a client may present one it signed, whose "
                    "common name is the host it speaks for (mutual TLS, as a host "
                    "credential)"),
    cfg.BoolOpt("mlroute-rest-open-health", default=True,
                help="with credentials configured, GET /v1/ready, /v1/openapi.json and "
                     "/metrics still need none (readiness probes, Prometheus); "
                     "--nomlroute-rest-open-health: they need one too"),
    # redundant controllers (controller/service/cluster.py)
    cfg.StrOpt("mlroute-etcd", default=None,
               help="etcd URL (http://HOST:PORT): controllers sharing it keep the intent there, "
                    "elect one OpenFlow master and fail over (instead of --mlroute-state)"),
    cfg.StrOpt("mlroute-etcd-ca", default=None,
               help="PEM CA of etcd's certificate (an https:// --mlroute-etcd; default: the "
                    "system's CAs)"),
    cfg.StrOpt("mlroute-etcd-cert", default=None,
               help="PEM client certificate for etcd (where etcd runs with "
                    "--client-cert-auth), with --mlroute-etcd-key"),
    cfg.StrOpt("mlroute-etcd-key", default=None, help="PEM key of --mlroute-etcd-cert"),
    cfg.StrOpt("mlroute-id", default=None,
               help="this controller's name among those sharing etcd (default HOST:REST_PORT)"),
    cfg.StrOpt("mlroute-etcd-prefix", default="/mlroute/",
               help="etcd key prefix (one per fabric when several share an etcd)"),
    cfg.IntOpt("mlroute-lease-ttl", default=2,
               help="seconds etcd keeps a silent controller's lease (etcd raises it to its "
                    "minimum, 2 s with its default timing)"),
    cfg.BoolOpt("mlroute-failover-probe", default=True,
                help="standbys watch the master's REST connection and end its lease as soon "
                     "as its process is gone (else failover waits for the lease to expire)"),
    cfg.BoolOpt("mlroute-rest-native-reads", default=True,
                help="serve REST in native OS threads: GET /v1/ready and /v1/jobs from views "
                     "published at each change, without waiting for the event loop (eventlet); "
                     "other requests are handed to it (--nomlroute-rest-native-reads: every "
                     "request in a green thread of the event loop)"),
    cfg.BoolOpt("mlroute-quiet", default=False,
                help="log warnings and errors only (a wiring problem, a change that failed); "
                     "without it one INFO line each for switches connected or lost, the "
                     "fabric found or checked, a job added, re-planned, refused or removed, "
                     "and learning decisions"),
    cfg.BoolOpt("mlroute-share-switches", default=False,
                help="controllers sharing etcd share the switches out: each is OpenFlow master "
                     "of its share (rendezvous hashing) and writes it; the elected one plans "
                     "and answers writes once every share is confirmed"),
    # no OpenFlow: link state from the hosts' probes (controller/service/pathstate.py)
    cfg.IntOpt("mlroute-probe-quorum", default=Settings.probe_quorum,
               help="with --mlroute-southbound none: hosts whose failed probes must blame one "
                    "direction of a link, no host's probe crossing it working, before the "
                    "link is taken down (it comes back when a probe across it answers; a "
                    "flapping link is held down up to 60 s)"),
]

# REST listens on the loopback unless told otherwise (--wsapi-host 0.0.0.0); Ryu registers
# these two itself (ryu/app/wsgi.py), os-ken 4 has no WSGI module: registered here then
REST_HOST = "127.0.0.1"
REST_OPTS = [
    cfg.StrOpt("wsapi-host", default=REST_HOST,
               help=f"REST API and web view listen host (default {REST_HOST}, the loopback: "
                    "0.0.0.0 listens on every address)"),
    cfg.IntOpt("wsapi-port", default=8080, help="REST API and web view listen port"),
]


def own_rest_opts(conf) -> None:
    """Register REST_OPTS on the framework's conf before it parses, in place of Ryu's (whose
    help says "default 0.0.0.0" where mlroute listens on 127.0.0.1)."""
    for opt in REST_OPTS:
        if opt.dest in conf:
            conf.unregister_opt(opt)
    conf.register_cli_opts(REST_OPTS)


def register(conf) -> None:
    """Register the options unless --user-flags already did (as command-line options)."""
    for opt in OPTS:
        if opt.dest not in conf:
            conf.register_opt(opt)
    if "wsapi_host" in conf:
        conf.set_default("wsapi_host", REST_HOST)


def _framework_conf():
    """The manager's own ConfigOpts (Ryu and os-ken keep one in their ``cfg`` module, apart
    from oslo's global); looked up, not imported, so that only the adapters import a framework."""
    for name in ("ryu.cfg", "os_ken.cfg"):
        module = sys.modules.get(name)
        if module is not None:
            return module.CONF
    return None


_conf = _framework_conf()
if _conf is not None:  # loaded by ryu-manager --user-flags, before the command line is parsed
    try:
        _conf.register_cli_opts(OPTS)
        own_rest_opts(_conf)
    except cfg.ArgsAlreadyParsedError:
        pass
