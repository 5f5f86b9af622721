"""Reading input documents and writing command output, shared by every command-line tool.

Standard library only: ``topologies/clos.py`` also runs under the system Python of ``mn``.
"""
from __future__ import annotations

import json

from controller.errors import InputError


def read_json(path: str, what: str):
    """The JSON document in ``path``; InputError naming ``what`` if unreadable or invalid."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError as e:
        raise InputError(f"{what}: cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{what}: {path} is not valid JSON ({e.msg} at line {e.lineno})") from None


def write_output(text: str, path: str | None, echo: bool = True) -> None:
    """Write ``text`` to ``path`` if given; print it when ``echo`` or when there is no path."""
    if path:
        with open(path, "w") as fh:
            fh.write(text + "\n")
    if echo or not path:
        print(text)
