"""Start the controller on Ryu 4.34 (Python 3.11), in process: what ``ryu-manager --user-flags
controller/shell/flags.py controller/shell/app.py`` runs, through Ryu's own manager
(``ryu.cmd.manager.main``: eventlet, the OpenFlow listener, ``--pid-file``, ``--config-file``),
with mlroute's options registered first, so that neither the flags file nor the app is named:

    mlroute-controller --mlroute-fabric fabric.json      (launch.py picks Ryu where it is)
    python -m controller.shell.ryu_main --mlroute-mode host --wsapi-port 8081

os-ken's twin is ``osken_main.py``; ``launch.py`` chooses between them.
"""
from __future__ import annotations

import os
import signal
import sys

from controller import __version__
from controller.errors import InputError

APP = "controller.shell.app"


def interrupt(_signum=None, _frame=None) -> None:
    """SIGTERM as Ctrl-C: KeyboardInterrupt in the main greenlet, where Ryu's manager waits
    for its services and then closes the apps (exit code 0). Python runs a signal handler in
    whichever greenlet has the thread: the main one or the hub's (the usual case: the
    exception reaches the manager) or a green thread still starting, such as the OpenFlow
    listener's in the controller's first second: raised there, Ryu's hub logs it as that
    thread's uncaught exception (a traceback) and the manager goes on. So from a green thread
    the interrupt is handed to the main greenlet through the hub, at once."""
    import greenlet
    from eventlet import hubs

    here, hub = greenlet.getcurrent(), hubs.get_hub()
    if here.parent is None or here is hub.greenlet:
        raise KeyboardInterrupt
    main = here
    while main.parent is not None:
        main = main.parent
    hub.schedule_call_global(0, main.throw, KeyboardInterrupt)


def main(argv: list[str] | None = None) -> int:
    # eventlet's resolver of names for green sockets (dnspython) took 0.12 s of every start;
    # the names the controller looks up (etcd's, the other controllers') are looked up from
    # its native threads, where the system's resolver blocks that thread alone (OpenStack's
    # eventlet services turn it off the same way)
    os.environ.setdefault("EVENTLET_NO_GREENDNS", "yes")
    # first, as ryu-manager does: importing the manager patches the standard library for eventlet
    from ryu.cmd import manager

    from controller.shell import flags, usage  # flags registers on Ryu's CONF, found imported

    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args:  # Ryu's own would print "ryu-manager 4.34"
        print(f"mlroute-controller {__version__} (ryu {manager.version})")
        return 0
    conf = manager.CONF
    flags.own_rest_opts(conf)
    conf.register_cli_opts([o for o in flags.OPTS if o.dest not in conf])
    if "-h" in args or "--help" in args:  # mlroute's options first, with their defaults
        print(usage.render(conf, f"Ryu {manager.version}",
                           {"ofp-tcp-listen-port": "6653,6633"}), end="")
        return 0
    if "--help-all" in args:  # the framework's help: every option, Ryu's too
        args = ["--help" if a == "--help-all" else a for a in args]
    elif error := usage.check_args(args, conf):
        print(f"mlroute-controller: error: {error}", file=sys.stderr)
        return 2
    # SIGTERM stops it as Ctrl-C does: Ryu's manager closes the apps, and the exit code is 0
    signal.signal(signal.SIGTERM, interrupt)
    try:
        manager.main(args=[*args, APP], prog="mlroute-controller")
    except InputError as e:  # a bad option value or fabric file, before anything listens
        print(f"mlroute-controller: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the manager's loop runs
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
