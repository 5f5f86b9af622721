"""Start the controller on os-ken 4, in process: os-ken 4 has no manager command, so this
parses the same options as ``ryu-manager --user-flags controller/shell/flags.py`` (mlroute's,
``--wsapi-host``/``--wsapi-port``, ``--ofp-listen-host``/``--ofp-tcp-listen-port``, logging)
and runs the adapter through os-ken's ``AppManager``, as Neutron's agent does.

    mlroute-controller --mlroute-fabric fabric.json      (launch.py picks os-ken where it is)
    python -m controller.shell.osken_main --mlroute-mode host --wsapi-port 8081

Ryu's twin is ``ryu_main.py``.
"""
from __future__ import annotations

import logging
import os
import signal
import sys

from controller import __version__
from controller.errors import InputError
from controller.shell import flags, usage

APP = "controller.shell.osken_app"


def _exit_cleanly(_signum, _frame) -> None:
    logging.shutdown()  # the log's last lines written
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    from os_ken import cfg, log
    from os_ken.base.app_manager import AppManager
    from os_ken.controller import controller  # noqa: F401 - registers the OpenFlow options

    conf = cfg.CONF
    flags.own_rest_opts(conf)
    conf.register_cli_opts([o for o in flags.OPTS if o.dest not in conf])
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:  # mlroute's options first, with their defaults
        print(usage.render(conf, "os-ken", {"ofp-tcp-listen-port": "6653"}), end="")
        return 0
    if "--help-all" in args:  # the framework's help: every option, os-ken's too
        args = ["--help" if a == "--help-all" else a for a in args]
    elif error := usage.check_args(args, conf):
        print(f"mlroute-controller: error: {error}", file=sys.stderr)
        return 2
    conf(args=args, prog="mlroute-controller",
         project="mlroute", version=f"mlroute-controller {__version__} (os-ken)")
    log.init_log()
    # SIGTERM ends the process with exit code 0 at once. Routed through KeyboardInterrupt as
    # under Ryu, os-ken 4's run_apps calls HubThread.kill, which its native threads lack
    # (AttributeError, a traceback and exit 1); nothing of the controller's needs a clean-up
    # that a restart does not do (the state file is written on every change).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        AppManager.run_apps([APP])
    except InputError as e:
        print(f"mlroute-controller: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
