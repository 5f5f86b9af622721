"""The one exception type for bad input, so every entry point can turn it into a clear message."""


class InputError(ValueError):
    """Raised for malformed or inconsistent fabric, job or option input.

    The message names the offending item (a host, a job, a leaf pair) in one line; command-line
    tools print it and exit non-zero, the REST API answers it with a 4xx.
    """
