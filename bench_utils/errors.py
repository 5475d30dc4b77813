"""The one exception for what the user asked: ``UserError``, caught once by the command line.

A ``UserError`` is raised for what the user asked: a grid file, a flag, a path, a results file, a
setting given in a notebook's parameters, a model name, a device string, a record that fails its
schema where the user gave it. ``python -m bench_utils`` catches it once and prints its message as one
line (exit status 2). Any other exception is a bug in bench_utils, and the command line says so under
its traceback. ``UserError`` is a ``ValueError``: callers and tests that catch ``ValueError`` still do.
"""

from __future__ import annotations


class UserError(ValueError):
    """What the user asked cannot be done; the message is one line saying why and what to do instead."""
