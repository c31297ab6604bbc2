"""Moved: ``nanguard run`` is framework-free now and lives in `nanguard.run.runner`; these names
stay importable from here."""

from nanguard.run.runner import RunOptions, UsageError, run

__all__ = ["RunOptions", "UsageError", "run"]
