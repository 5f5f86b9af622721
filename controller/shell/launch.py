"""``mlroute-controller``: the controller on the OpenFlow framework that is installed, with the
same options on both (``flags.py``): Ryu 4.34 on Python 3.11 (``ryu_main.py``, what ``ryu-manager
--user-flags controller/shell/flags.py controller/shell/app.py`` runs) or os-ken 4 on 3.12 and
later (``osken_main.py``). ``MLROUTE_FRAMEWORK=ryu`` or ``osken`` chooses where both are (the
emulation's ``controller_proc`` reads the same variable).

    mlroute-controller --mlroute-fabric fabric.json --wsapi-port 8081
    python -m controller.shell.launch --version

Only the module of the framework chosen is imported: Ryu's manager patches the standard library
for eventlet as it loads. A SIGTERM before the framework's own handling is in place (its
imports take most of the first second) ends the process at once, quietly and with exit code
0: nothing has started that a stop would close.
"""
from __future__ import annotations

import os
import signal
import sys
from importlib.util import find_spec

from controller.errors import InputError

FRAMEWORKS = {"ryu": "ryu", "osken": "os_ken"}  # name: its package; Ryu first where both are


def framework() -> str:
    """``ryu`` or ``osken``: MLROUTE_FRAMEWORK if set, else the first of them installed."""
    chosen = os.environ.get("MLROUTE_FRAMEWORK")
    if chosen:
        if chosen not in FRAMEWORKS:
            raise InputError(f"MLROUTE_FRAMEWORK={chosen!r}: choose {' or '.join(FRAMEWORKS)}")
        if find_spec(FRAMEWORKS[chosen]) is None:
            raise InputError(f"MLROUTE_FRAMEWORK={chosen}: {FRAMEWORKS[chosen]} is not installed")
        return chosen
    for name, package in FRAMEWORKS.items():
        if find_spec(package) is not None:
            return name
    raise InputError("no OpenFlow framework is installed: `make install` installs Ryu on "
                     "Python 3.11, os-ken on 3.12 and later (pip install -e '.[sdn]')")


def _exit_0(_signum, _frame) -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_0)  # until the framework's main sets its own
    try:
        name = framework()
    except InputError as e:
        print(f"mlroute-controller: {e}", file=sys.stderr)
        return 2
    if name == "ryu":
        from controller.shell.ryu_main import main as run
    else:
        from controller.shell.osken_main import main as run
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
