"""The rule tables: one per phase, keyed by canonical op name, filled by `forward`,
`backward` and `presumed` as they are imported.

Aliases are registered next to the rule (``true_divide`` and ``floor_divide`` are ``div``,
``arccos`` is ``acos``): one table holds every framework's spelling of the same op.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from nanguard.core.why.facts import Facts, Said

Rule = Callable[[Facts], Optional[Said]]
FORWARD: Dict[str, Rule] = {}
BACKWARD: Dict[str, Rule] = {}
# the hazard an op's name points to when its values were not read (see `presumed`)
PRESUMED: Dict[str, Rule] = {}


def rule(table: Dict[str, Rule], *names: str) -> Callable[[Rule], Rule]:
    """Register the decorated rule in ``table`` under each of ``names``."""
    def register(fn: Rule) -> Rule:
        for name in names:
            table[name] = fn
        return fn
    return register


__all__ = ["BACKWARD", "FORWARD", "PRESUMED", "Rule", "rule"]
