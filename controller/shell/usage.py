"""``mlroute-controller --help`` and its answer to an unknown option, on either framework.

The framework's own ``--help`` (oslo.config's argparse) lists some 120 options of Ryu's in
alphabetical order, mlroute's among them, without their defaults. This help lists mlroute's
options first, grouped, one line each with its default (taken from the option, which takes it
from ``Settings``: one set of defaults), then the framework's few that an operator sets, then
every mlroute option in full; ``--help-all`` is the framework's own help.

An option that is not one (``--mlroute-algoritm greedy``) is named with its value and the
nearest option, before the framework parses anything (argparse would take the value for an
app to load and name the app module in its error).

>>> suggest("--mlroute-algoritm", ["--mlroute-algorithm", "--mlroute-objective"])
'--mlroute-algorithm'
>>> unknown_options(["--mlroute-mode", "host", "--verb", "-d", "--wsapi-port=1"],
...                 ["--mlroute-mode", "--verbose", "--wsapi-port"])
[]
>>> unknown_options(["--mlroute-algoritm", "greedy", "--", "--x"], ["--mlroute-algorithm"])
[('--mlroute-algoritm', 'greedy')]
"""
from __future__ import annotations

import difflib
import re
import textwrap

from controller.shell import flags

# (title, [(option, metavar, one line)]); an option of flags.OPTS missing here is listed under
# "Other mlroute options" with the first clause of its help
GROUPS = [
    ("Fabric and discovery", [
        ("mlroute-fabric", "FILE", "declared fabric JSON; none: discovered"),
        ("mlroute-link-gbps", "GBPS", "a discovered fabric's; none: the ports' or 100"),
        ("mlroute-lldp-interval", "SECONDS", "between LLDP probe rounds (0: no probes)"),
        ("mlroute-lldp-budget", "N", "LLDP probes a second at most (0: no limit)"),
        ("mlroute-dead-after", "SECONDS", "a lost switch's links count as failed after"),
        ("mlroute-restart-grace", "SECONDS", "switches lost together count as failed after"),
        ("mlroute-restart-quorum", "N", "switches lost within 1 s that form a round"),
        ("mlroute-hold-down", "SECONDS", "a link back up waits before jobs move onto it"),
        ("mlroute-ecmp", "HOW", "3 tiers, unplanned traffic: per-tier, polarised"),
    ]),
    ("Planning", [
        ("mlroute-algorithm", "NAME", "planner if a job names none (auto recommended)"),
        ("mlroute-objective", "NAME", "auto's if a job names none: jobs or flows"),
        ("mlroute-ilp-time-limit", "SECONDS", "of ilp and auto's ILP stage (0: no ILP stage)"),
        ("mlroute-seed", "N", "simulated annealing seed"),
        ("mlroute-ecmp-salt", "N", "salt of the ECMP hash"),
    ]),
    ("Enforcement on the switches", [
        ("mlroute-mode", "MODE", "of jobs that name none: flow, sr, host or srv6"),
        ("mlroute-southbound", "HOW", "openflow, or none: IP routers, hosts push SRv6"),
        ("mlroute-probe-quorum", "N", "none: hosts whose failed probes take a link down"),
        ("mlroute-max-flow-rules", "N", "flow entries a switch may hold (0: no budget)"),
        ("mlroute-over-budget", "WHAT", "a job over the budget: refuse (409) or host"),
        ("mlroute-barrier-timeout", "SECONDS", "a switch has to confirm its rules"),
        ("mlroute-stats-interval", "SECONDS", "between port and flow statistics (0: off)"),
    ]),
    ("Learning job matrices from sFlow", [
        ("mlroute-sflow-port", "PORT", "UDP port of the sFlow collector (0: no learning)"),
        ("mlroute-sflow-host", "ADDRESS", "address the sFlow collector listens on"),
        ("mlroute-sflow-agents", "NETS", "who may send sFlow; none: the switches"),
        ("mlroute-sflow-sampling-points", "WHERE", "where switches sample: all, leaves, edge"),
        ("mlroute-learn-window", "SECONDS", "per window of measured traffic"),
        ("mlroute-learn-min-gain", "SHARE", "predicted gain a re-plan on measured data needs"),
        ("mlroute-learn-replans-per-minute", "N", "re-plans of one job on measured traffic"),
    ]),
    ("REST API, web view, state and log", [
        ("wsapi-host", "ADDRESS", "REST and web view listen address (0.0.0.0: all)"),
        ("wsapi-port", "PORT", "REST and web view listen port"),
        ("mlroute-rest-native-reads", "", "serve REST reads in native threads"),
        ("mlroute-state", "FILE", "sqlite file: fabric and jobs across restarts"),
        ("mlroute-quiet", "", "log warnings and errors only"),
    ]),
    ("Who may do what (docs/howto/security.md)", [
        ("mlroute-token", "TOKEN", "the admin's Bearer token (ps shows it)"),
        ("mlroute-token-file", "FILE", "the admin token's file (or MLROUTE_TOKEN)"),
        ("mlroute-host-secret-file", "FILE", "host agents' credentials: HMACs under it"),
        ("mlroute-tls-cert", "FILE", "REST over HTTPS with this certificate"),
        ("mlroute-tls-key", "FILE", "the certificate's key"),
        ("mlroute-tls-client-ca", "FILE", "client certificates naming hosts, signed by it"),
        ("mlroute-rest-open-health", "", "/v1/ready and /metrics need no credential"),
    ]),
    ("Redundant controllers", [
        ("mlroute-etcd", "URL", "etcd the controllers share (or --mlroute-state)"),
        ("mlroute-id", "NAME", "name among them; none: HOST:REST_PORT"),
        ("mlroute-etcd-prefix", "PREFIX", "etcd key prefix, one per fabric"),
        ("mlroute-etcd-ca", "FILE", "CA of etcd's certificate (https://)"),
        ("mlroute-etcd-cert", "FILE", "client certificate etcd asks for"),
        ("mlroute-etcd-key", "FILE", "its key"),
        ("mlroute-lease-ttl", "SECONDS", "etcd keeps a silent controller's lease"),
        ("mlroute-failover-probe", "", "standbys end a dead master's lease at once"),
        ("mlroute-share-switches", "", "each controller masters a share of switches"),
    ]),
]
# the framework's options an operator sets, where it has them (name, metavar, one line)
FRAMEWORK = [
    ("ofp-tcp-listen-port", "PORT", "OpenFlow listen port"),
    ("ofp-listen-host", "ADDRESS", "OpenFlow listen address"),
    ("log-file", "PATH", "log here; none: standard error"),
    ("verbose", "", "debug messages too"),
    ("pid-file", "PATH", "write the process id here"),
]
WIDTH = 100


def _options(conf=None) -> dict:
    """Every option by name: mlroute's, and the framework's CLI options of ``conf``."""
    opts = {o.name: o for o in flags.OPTS + flags.REST_OPTS}
    if conf is not None:
        for opt, group in conf._all_cli_opts():  # oslo.config has no public listing
            if group is None:
                opts.setdefault(opt.name, opt)
    return opts


def _default(opt) -> str:
    if isinstance(opt.default, bool):
        return "on" if opt.default else "off"
    return "none" if opt.default in (None, "") else str(opt.default)


def _first_clause(text: str) -> str:
    return re.split(r"[:;(]", text, maxsplit=1)[0].strip().rstrip(",")


def grouped(conf=None) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The groups of the help with the options registered: (title, [(flag, default, line)])."""
    opts = _options(conf)
    listed = {name for _, rows in GROUPS for name, _, _ in rows}
    groups = [(title, rows) for title, rows in GROUPS]
    other = [(o.name, "VALUE", _first_clause(o.help)) for o in flags.OPTS
             if o.name not in listed]
    if other:
        groups.append(("Other mlroute options", other))
    if conf is not None:
        groups.append(("The framework's, most used (all of them: --help-all)",
                       [row for row in FRAMEWORK if row[0] in opts]))
    out = []
    for title, rows in groups:
        lines = []
        for name, metavar, line in rows:
            if name in opts:
                flag = f"--{name}" + (f" {metavar}" if metavar else "")
                lines.append((flag, _default(opts[name]), line))
        out.append((title, lines))
    return out


def render(conf=None, framework: str = "", defaults: dict | None = None) -> str:
    """The help: one line per option with its default; ``defaults`` overrides what is shown
    for an option whose registered default means something else (the OpenFlow ports)."""
    defaults = defaults or {}
    out = ["usage: mlroute-controller [--OPTION VALUE ...]", "",
           *textwrap.wrap("The mlroute controller" + (f" on {framework}" if framework else "")
                          + ". Each option with its default; booleans are turned off with "
                          "--noOPTION. Options also go in a --config-file, dashes as "
                          "underscores. Reference: docs/reference/options.md.", WIDTH), ""]
    groups = grouped(conf)
    flag_w = max(len(f) for _, rows in groups for f, _, _ in rows) + 2
    for title, rows in groups:
        out.append(f"{title}:")
        for flag, default, line in rows:
            default = defaults.get(flag.split()[0][2:], default)
            out.append(f"  {flag:<{flag_w}}{default:<11}{line}".rstrip())
    out += ["", "mlroute's options in full:"]
    for opt in flags.OPTS + flags.REST_OPTS:
        out.append(f"  --{opt.name}")
        out += textwrap.wrap(opt.help.replace("%%", "%"), WIDTH, initial_indent=" " * 6,
                             subsequent_indent=" " * 6, break_on_hyphens=False)
    out += ["", "The framework's other options (logging, TLS, ...): mlroute-controller --help-all"]
    return "\n".join(out) + "\n"


def known_flags(conf) -> list[str]:
    """Every long option the framework's parser takes, mlroute's among them."""
    out = ["--help", "--help-all", "--version", "--config-file", "--config-dir"]
    for opt, group in conf._all_cli_opts():
        if opt.positional:
            continue
        prefix = f"{group.name}-" if group is not None else ""
        out.append(f"--{prefix}{opt.name}")
        if opt.__class__.__name__ == "BoolOpt":
            out.append(f"--no{prefix}{opt.name}")
    return out


def unknown_options(args: list[str], known: list[str]) -> list[tuple[str, str | None]]:
    """(option, its value or None) of every ``--X`` that is neither an option nor the start of
    only one (argparse takes an unambiguous prefix)."""
    out = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        if name in known or len([k for k in known if k.startswith(name)]) == 1:
            continue
        value = args[i + 1] if "=" not in arg and i + 1 < len(args) \
            and not args[i + 1].startswith("-") else None
        out.append((arg, value))
    return out


def suggest(name: str, known: list[str]) -> str | None:
    """The nearest option to a mistyped one, if any is near."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None


def check_args(args: list[str], conf) -> str | None:
    """An error message naming the first unknown option and the nearest one, or None."""
    known = known_flags(conf)
    bad = unknown_options(args, known)
    if not bad:
        return None
    arg, value = bad[0]
    name, _, inline = arg.partition("=")
    given = arg + (f" {value}" if value is not None else "")
    nearest = suggest(name, known)
    if nearest is None:
        return f"unknown option {given} (mlroute-controller --help lists the options)"
    meant = nearest + (f"={inline}" if inline else "") + (f" {value}" if value is not None else "")
    return f"unknown option {given}: did you mean {meant}?"
