"""The one exception type for bad input, so every entry point can turn it into a clear message."""


class InputError(ValueError):
    """Raised for malformed or inconsistent fabric, job or option input.

    The message names the offending item (a host, a job, a leaf pair) in one line; command-line
    tools print it and exit non-zero, the REST API answers it with a 4xx.
    """


class ConflictError(InputError):
    """The request is well-formed but clashes with the current state (HTTP 409): a duplicate
    job id, a flow already planned by another job, a switch that is not connected, a leaf pair
    with no alive spine."""


class NotFoundError(InputError):
    """The named object does not exist (HTTP 404)."""


class InstallError(ConflictError):
    """A switch rejected rules or did not confirm them in time; nothing was changed.

    ``failed``: switch (dpid) -> what went wrong there, for an install to many switches at
    once (the message names the first); empty when the raiser does not say (then every
    switch of the install counts as failed). ``full``: those whose only refusals were of a
    full flow table (OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL), which deleting entries
    nobody wants may cure (``reconcile.Reconciler``)."""

    def __init__(self, message: str, failed: dict[int, str] | None = None, full=()):
        super().__init__(message)
        self.failed = dict(failed or {})
        self.full = set(full)

    def per_switch(self, dpids) -> dict[int, str]:
        """``failed``, or every one of ``dpids`` when the raiser did not say which."""
        return dict(self.failed) or dict.fromkeys(dpids, str(self))


class ServiceUnavailable(RuntimeError):
    """The request cannot be served now but may succeed later (HTTP 503): etcd, which stores
    the intent of redundant controllers, is unreachable; no master is elected yet."""
