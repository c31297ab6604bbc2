"""Moved: the ``nanguard run`` parser lives in `nanguard.run.cli`; these names stay importable from here."""

from nanguard.run.cli import main, register

__all__ = ["main", "register"]
