"""The agent's loops supervised, and its lock: what keeps one agent per host running.

Why supervise: a loop (the watch, the probes, the traffic or port reports) that died alone
left an agent that looked healthy and no longer failed over nor reported. A loop that
raises is logged with its traceback and started again after a back-off; one that keeps
failing ends the agent (``AgentFailed``: exit 1, its rules kept) for its service manager to
start a fresh one.
"""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import time

from controller.errors import InputError

LOG = logging.getLogger("mlroute-agent")
RESTART_S = (0.5, 5.0)  # a failed loop starts again after this back-off (doubling)
MAX_FAILURES = 5  # failures of one loop within FAILURE_WINDOW_S end the agent (exit 1)
FAILURE_WINDOW_S = 60.0


class AgentFailed(Exception):
    """A loop kept failing: the agent ends with its rules kept (exit 1)."""


class Supervisor:
    """Loops in threads of their own until ``stopping``; ``fatal`` says why it ended early."""

    def __init__(self):
        self.stopping = threading.Event()
        self.restart_s = RESTART_S
        self.restarts: dict[str, int] = {}  # loop name -> times started again
        self.fatal = ""  # why the agent ends (a loop kept failing)
        self.threads: list[threading.Thread] = []

    def supervised(self, name: str, loop, *args) -> None:
        """Run ``loop`` until ``stopping``; one that raises is logged with its traceback and
        started again after a back-off; ``MAX_FAILURES`` within ``FAILURE_WINDOW_S`` end the
        agent (``fatal``, ``stopping``: exit 1, rules kept)."""
        failures: list[float] = []
        delay = self.restart_s[0]
        while not self.stopping.is_set():
            try:
                loop(*args)
                return
            except Exception as e:  # any failure of a loop is supervised (logged)
                now = time.monotonic()
                failures = [t for t in failures if now - t < FAILURE_WINDOW_S] + [now]
                if len(failures) == 1:
                    delay = self.restart_s[0]
                if len(failures) >= MAX_FAILURES:
                    LOG.critical("mlroute-agent: the %s loop failed %d times within %g s; "
                                 "ending with the rules kept", name, len(failures),
                                 FAILURE_WINDOW_S, exc_info=True)
                    self.fatal = (f"the {name} loop failed {len(failures)} times within "
                                  f"{FAILURE_WINDOW_S:g} s (last: {type(e).__name__}: {e})")
                    self.stopping.set()
                    return
                LOG.error("mlroute-agent: the %s loop failed; starting it again in %.1f s",
                          name, delay, exc_info=True)
                self.restarts[name] = self.restarts.get(name, 0) + 1
                self.stopping.wait(delay)
                delay = min(delay * 2, self.restart_s[1])

    def start(self, name: str, loop, *args) -> threading.Thread:
        t = threading.Thread(target=self.supervised, args=(name, loop, *args), daemon=True,
                             name=f"mlroute-agent {name}")
        t.start()
        self.threads.append(t)
        return t

    def join(self, timeout: float = 2.0) -> None:
        until = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, until - time.monotonic()))


def lock(path: str):
    """The host's lock, its pid written once held: opened without truncating, so a second
    agent that is refused leaves the running one's pid in place."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    fh = os.fdopen(fd, "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise InputError(f"another mlroute-agent runs for this host (lock {path})") from None
    fh.truncate(0)
    fh.write(str(os.getpid()))
    fh.flush()
    return fh
