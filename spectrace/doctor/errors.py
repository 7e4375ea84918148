"""The doctor's one error type, in a module of its own so that every doctor module can
raise it without importing the package."""
from __future__ import annotations


class UnusableInput(Exception):
    """The input cannot be checked at all (exit status 2): a missing directory, an
    unreadable or truncated file, invalid JSON, a pickle, not an EAGLE-3 draft. The
    message is one line naming the file and what was expected."""
