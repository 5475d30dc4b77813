"""The one exception for what the user asked: ``UserError``, caught once by the command line (docs/architecture.md).

``python -m bench_utils`` prints its message as one line (exit status 2); any other exception is a bug. It is a
``ValueError``: callers and tests that catch ``ValueError`` still do.
"""

from __future__ import annotations


class UserError(ValueError):
    """What the user asked cannot be done; the message is one line saying why and what to do instead."""
