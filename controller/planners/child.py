"""An off-path planning child that dies with the controller.

``python -m controller.planners.child PARENT MODULE [ARG ...]`` runs ``python -m MODULE ARG
...`` in this process once the kernel is asked to kill it when its parent dies
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``), and exits at once (status 3) if ``PARENT`` (the pid of
the process that started it) is already gone.

Why: the controller runs its slow stages (the two-tier ILP within ``ilp_time_limit``, up to a
minute; the Clos stages) in a child (``offpath._child``). A controller killed meanwhile (a
crash, ``kill -9``, an out-of-memory kill) would leave the child solving on, holding a core
beside the controller that restarts and starts its own. A thread polling the parent would not
do: HiGHS may hold the interpreter's lock for the whole solve; the kernel's signal reaches it
there too. The signal follows the thread that started the child, which waits for it
(``subprocess.run``): only the parent's death sends it.

Linux only (elsewhere the child runs unguarded, as before).
"""
from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_GONE = 3  # the exit status when the parent died before the guard was set


def guard(parent: int) -> bool:
    """Ask for SIGKILL when the parent dies; False when ``parent`` is not the parent any
    more (it died before the request, so the signal would never come)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    return os.getppid() == parent


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m controller.planners.child PARENT MODULE [ARG ...]",
              file=sys.stderr)
        return 2
    if not guard(int(args[0])):
        print(f"the parent {args[0]} is gone (this process's parent is {os.getppid()})",
              file=sys.stderr)
        return PARENT_GONE
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
