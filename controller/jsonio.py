"""Reading input documents, writing command output and help texts, shared by every
command-line tool.

Standard library only: ``topologies/clos.py`` also runs under the system Python of ``mn``.
"""
from __future__ import annotations

import argparse
import json
import textwrap

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


def write_output(text: str, path: str | None, summary: str | None = None) -> None:
    """Print ``text``; or, given ``path``, write it there and print one line instead, what was
    written and where (``wrote PATH: SUMMARY``, the size without a summary): never the
    document again, however large. InputError if the file cannot be written.

    >>> write_output('{"a": 1}', None)
    {"a": 1}
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "doc.json")
    >>> write_output('{"a": 1}', path, "1 key")  # doctest: +ELLIPSIS
    wrote /...doc.json: 1 key
    >>> write_output('{"a": 1}', path)  # doctest: +ELLIPSIS
    wrote /...doc.json: 9 bytes
    """
    if not path:
        print(text)
        return
    try:
        with open(path, "w") as fh:
            fh.write(text + "\n")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror}") from None
    print(f"wrote {path}: {summary or f'{len(text) + 1:,} bytes'}")


def first_paragraph(doc: str) -> str:
    """A module docstring's first paragraph on one line: a command's whole description, not
    its first line cut mid-sentence.

    >>> first_paragraph("Plan routes\\nfor jobs.\\n\\nMore.")
    'Plan routes for jobs.'
    """
    return " ".join(doc.strip().split("\n\n")[0].split())


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default (unless None, a flag's False, or said in its help already);
    names with dashes (``ecmp-polarised``) never cut at a line end."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or \
                action.default is argparse.SUPPRESS or "default" in text.lower():
            return text
        return super()._get_help_string(action)

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        return "\n".join(textwrap.wrap(" ".join(text.split()), width, initial_indent=indent,
                                       subsequent_indent=indent, break_on_hyphens=False))
