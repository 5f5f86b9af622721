"""``mlroute-controller`` (``controller/shell/launch.py``): one command for the controller on
either framework. It resolves to the installed framework, and there it takes mlroute's options
(``--mlroute-*``) with neither a flags file nor an app path. Subprocesses with timeouts, and
nothing listens: ``--version``, ``--help``, and a fabric file that does not exist (refused
before any port is opened)."""
import configparser
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from controller.errors import InputError
from controller.shell import launch
from emulation.harness.ports import free_ports

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALLED = [name for name, package in launch.FRAMEWORKS.items()
             if importlib.util.find_spec(package) is not None]


def controller(*args, framework=None) -> subprocess.CompletedProcess:
    """``mlroute-controller ARGS`` as its console script runs it (the entry point's function)."""
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("MLROUTE_FRAMEWORK", None)
    if framework:
        env["MLROUTE_FRAMEWORK"] = framework
    code = "import sys; from controller.shell.launch import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=90)


def test_the_entry_point_is_the_launcher():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    scripts = dict(line.split(" = ") for line in
                   cfg["options.entry_points"]["console_scripts"].strip().splitlines())
    assert scripts["mlroute-controller"] == "controller.shell.launch:main"


def test_the_framework_resolves_to_the_installed_one(monkeypatch):
    monkeypatch.delenv("MLROUTE_FRAMEWORK", raising=False)
    installed = {"ryu"} if sys.version_info < (3, 12) else {"osken"}  # what make install puts
    if set(INSTALLED) == installed:
        assert launch.framework() == installed.pop()
    monkeypatch.setattr(launch, "find_spec",
                        lambda name: object() if name == "os_ken" else None)
    assert launch.framework() == "osken"
    monkeypatch.setattr(launch, "find_spec", lambda name: object())
    assert launch.framework() == "ryu"  # both: Ryu, as the emulation's controller_proc
    monkeypatch.setenv("MLROUTE_FRAMEWORK", "osken")
    assert launch.framework() == "osken"
    monkeypatch.setenv("MLROUTE_FRAMEWORK", "pox")
    with pytest.raises(InputError, match="choose ryu or osken"):
        launch.framework()
    monkeypatch.delenv("MLROUTE_FRAMEWORK")
    monkeypatch.setattr(launch, "find_spec", lambda name: None)
    with pytest.raises(InputError, match="no OpenFlow framework is installed"):
        launch.framework()


def test_a_mistyped_option_is_named_with_its_value_and_the_nearest_one():
    """Checked before the framework parses (``shell/usage.py``): argparse would have taken the
    value for an app module and named ``controller.shell.app`` in its error."""
    from oslo_config import cfg

    from controller.shell import flags, usage
    conf = cfg.ConfigOpts()
    conf.register_cli_opts(flags.OPTS + flags.REST_OPTS + [cfg.BoolOpt("verbose")])
    assert usage.check_args(["--mlroute-algoritm", "greedy"], conf) == (
        "unknown option --mlroute-algoritm greedy: did you mean --mlroute-algorithm greedy?")
    assert usage.check_args(["--mlroute-mode", "host", "--wsapi-prot=8081"], conf) == (
        "unknown option --wsapi-prot=8081: did you mean --wsapi-port=8081?")
    assert usage.check_args(["--zzz"], conf) == (
        "unknown option --zzz (mlroute-controller --help lists the options)")
    # options, their negations, unambiguous prefixes (as argparse) and values pass
    for args in (["--mlroute-algorithm", "greedy", "--verb"], ["--nomlroute-failover-probe"],
                 ["--mlroute-seed", "-1", "--config-file", "c.conf"], ["--help-all"], []):
        assert usage.check_args(args, conf) is None, args


def listening(port: int) -> bool:
    """Whether a TCP socket of this machine listens on ``port`` (/proc/net/tcp and tcp6: no
    connection made, which the controller would take for a switch)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = [line.split() for line in fh.readlines()[1:]]
        except OSError:
            continue
        if any(r[3] == "0A" and int(r[1].rsplit(":", 1)[1], 16) == port for r in rows):
            return True
    return False


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_it_says_where_it_listens_and_exits_0_on_sigterm(tmp_path):
    """No switch, no root: the controller alone on free ports, stopped as a service manager
    stops it (SIGTERM), as Ctrl-C does: exit code 0, not 143."""
    import signal
    import time
    import urllib.error
    import urllib.request
    rest, of = free_ports(2)
    env = dict(os.environ, PYTHONPATH=REPO)
    code = "import sys; from controller.shell.launch import main; sys.exit(main(sys.argv[1:]))"
    log = open(tmp_path / "ctl.log", "w")
    proc = subprocess.Popen([sys.executable, "-c", code, "--wsapi-port", str(rest),
                             "--ofp-tcp-listen-port", str(of), "--mlroute-sflow-port", "0"],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{rest}/v1/ready", timeout=2)
                break
            except urllib.error.HTTPError:  # 503: no fabric yet, but it answers
                break
            except OSError:
                assert proc.poll() is None, open(tmp_path / "ctl.log").read()
                time.sleep(0.2)
        # started: the OpenFlow listener too (its green thread starts after REST answers; a
        # SIGTERM before it interrupts its start: CI saw that traceback once)
        while time.monotonic() < deadline and not listening(of):
            assert proc.poll() is None, open(tmp_path / "ctl.log").read()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, open(tmp_path / "ctl.log").read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    text = open(tmp_path / "ctl.log").read()
    assert (f"mlroute: REST API and web view on http://127.0.0.1:{rest}/, OpenFlow on port "
            f"{of} of every address") in text, text
    assert "Traceback" not in text, text


@pytest.mark.slow
def test_a_framework_that_is_not_installed_is_named():
    missing = [n for n in launch.FRAMEWORKS if n not in INSTALLED]
    if not missing:
        pytest.skip("both frameworks are installed")
    r = controller("--version", framework=missing[0])
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"mlroute-controller: MLROUTE_FRAMEWORK={missing[0]}: "
                                f"{launch.FRAMEWORKS[missing[0]]} is not installed")


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(launch.FRAMEWORKS))
def test_it_takes_mlroutes_options_and_starts_nothing_on_bad_input(framework):
    if framework not in INSTALLED:
        pytest.skip(f"{launch.FRAMEWORKS[framework]} is not installed here")
    r = controller("--version", framework=framework)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("mlroute-controller ") and framework.replace("osken", "os-ken") \
        in r.stdout
    r = controller("--help", framework=framework)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: mlroute-controller")
    first = "\n".join(r.stdout.splitlines()[:72])  # mlroute's options first, with defaults
    for option in ("--mlroute-fabric FILE ", "--mlroute-objective NAME ", "--mlroute-mode MODE ",
                   "--wsapi-port PORT ", "--ofp-tcp-listen-port PORT "):
        assert option in first, option
    assert re.search(r"--wsapi-host ADDRESS +127\.0\.0\.1 ", first)
    assert "--zapi" not in r.stdout and "--help-all" in r.stdout
    r = controller("--help-all", framework=framework)  # the framework's, its options too
    assert r.returncode == 0 and "--ofp-tcp-listen-port" in r.stdout
    assert "0.0.0.0" not in r.stdout.split("--wsapi-host WSAPI_HOST", 1)[1].split("--", 1)[0]
    r = controller("--mlroute-algoritm", "greedy", framework=framework)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("mlroute-controller: error: unknown option --mlroute-algoritm greedy: "
                        "did you mean --mlroute-algorithm greedy?\n")
    r = controller("--mlroute-no-such-option", "1", framework=framework)
    assert r.returncode == 2 and "--mlroute-no-such-option" in r.stderr
    # parsed and handed to the app, which refuses them before anything listens
    def ports():  # fresh for each start: a port free a moment ago may be taken since
        rest, of = free_ports(2)
        return ["--wsapi-port", str(rest), "--ofp-tcp-listen-port", str(of),
                "--mlroute-sflow-port", "0"]
    r = controller("--mlroute-fabric", "/nonexistent/fabric.json", *ports(), framework=framework)
    assert r.returncode == 2, r.stderr[-2000:]
    assert ("mlroute-controller: fabric: cannot read /nonexistent/fabric.json: No such file or "
            "directory\n") in r.stderr and "Traceback" not in r.stderr
    r = controller("--mlroute-mode", "teleport", *ports(), framework=framework)
    assert r.returncode == 2 and "mlroute-controller: unknown mode 'teleport'" in r.stderr


# a green thread that has the CPU when SIGTERM comes, as the OpenFlow listener's while it starts
# in the controller's first second: the handler then runs in that green thread
GREEN = """
import signal, sys, time
from ryu.lib import hub
from controller.shell.ryu_main import interrupt
signal.signal(signal.SIGTERM, interrupt)
def busy():
    print("busy", flush=True)
    end = time.monotonic() + 2
    while time.monotonic() < end:  # no yield to the hub
        pass
threads = [hub.spawn(busy), hub.spawn(hub.sleep, 20)]
try:
    hub.joinall(threads)
except KeyboardInterrupt:
    print("interrupted in the main greenlet", flush=True)
    sys.exit(0)
print("not interrupted", flush=True)
sys.exit(3)
"""


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_sigterm_in_a_starting_green_thread_reaches_the_manager_without_a_traceback():
    pytest.importorskip("ryu")
    proc = subprocess.Popen([sys.executable, "-c", GREEN], cwd=REPO, text=True,
                            env=dict(os.environ, PYTHONPATH=REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = sigterm_when(proc, lambda: proc.stdout.readline() == "busy\n")
    assert proc.returncode == 0 and out == "interrupted in the main greenlet\n", out


def sigterm_when(proc: subprocess.Popen, ready) -> str:
    """SIGTERM to ``proc`` once ``ready()`` is true (asserted), then its output; killed in
    any case if it outlives that."""
    import signal
    try:
        assert ready(), "the process never got ready"
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a handler of its own for SIGTERM (/proc: SigCgt)."""
    with open(f"/proc/{pid}/status") as fh:
        caught = next(line for line in fh if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (15 - 1) & 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_sigterm_in_the_first_moments_exits_0_quietly(tmp_path):
    """As soon as the launcher handles SIGTERM (before the framework is imported), a SIGTERM
    ends it with exit code 0 and nothing said: not 143, not a traceback."""
    import time
    rest, of = free_ports(2)
    code = "import sys; from controller.shell.launch import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "--wsapi-port", str(rest),
                             "--ofp-tcp-listen-port", str(of), "--mlroute-sflow-port", "0"],
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def handles_sigterm() -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None \
                and not catches_sigterm(proc.pid):
            time.sleep(0.005)
        return True  # (sent anyway, as before: the exit code and output are the test)

    out = sigterm_when(proc, handles_sigterm)
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "listening" not in out, out


@pytest.mark.slow
def test_the_ryu_controller_starts_without_eventlets_resolver():
    """dnspython, eventlet's resolver for green sockets, took 0.12 s of every start: off."""
    pytest.importorskip("ryu")
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("EVENTLET_NO_GREENDNS", None)
    code = ("import sys; from controller.shell.ryu_main import main; main(['--version']); "
            "print(*(m in sys.modules for m in ('eventlet', 'eventlet.support.greendns')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=90)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "True False", r.stderr
