"""The options of ``detect()``, parsed once for every backend.

``check`` says which values count as a finding: ``"nan"``, ``"inf"``, ``"both"`` (the
default) or its synonym ``"all"``, or a collection naming ``"nan"`` and/or ``"inf"``. ``mode``
says what happens at the first finding: ``"raise"``, ``"warn"`` or ``"record"``. ``api`` is
the caller's public name (``nanguard.tf.detect``), so every error names what the user called.

    >>> sorted(parse_check("all", "nanguard.detect"))
    ['inf', 'nan']
    >>> parse_mode("record", "nanguard.jax.detect")
    'record'
"""

from __future__ import annotations

from typing import FrozenSet, Iterable, Literal, Tuple, Union, cast, get_args

from nanguard.core.nonfinite import BOTH, INF, NAN

Check = Literal["nan", "inf", "both", "all"]
Mode = Literal["raise", "warn", "record"]
Kind = Literal["nan", "inf"]

CHECKS: Tuple[str, ...] = get_args(Check)
MODES: Tuple[str, ...] = get_args(Mode)
_SETS = {"nan": frozenset({NAN}), "inf": frozenset({INF}), "both": BOTH, "all": BOTH}


def _names(options: Tuple[str, ...]) -> str:
    quoted = [repr(o) for o in options]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def parse_check(check: Union[Check, Iterable[Kind]], api: str) -> FrozenSet[str]:
    """The kinds of value ``check`` asks for, as a frozenset of ``"nan"``/``"inf"``.

    Raises ValueError for an unknown string or an empty or unknown collection, TypeError for
    anything else, naming ``api`` and the accepted options.
    """
    if isinstance(check, str):
        chosen = _SETS.get(check.lower())
        if chosen is None:
            raise ValueError(f"{api}: check must be {_names(CHECKS)}, got {check!r}")
        return chosen
    try:
        items = {str(c).lower() for c in check}
    except TypeError:
        raise TypeError(f"{api}: check must be a string ({_names(CHECKS)}) or a collection of 'nan'/'inf', "
                        f"got {type(check).__name__}") from None
    if not items or not items <= BOTH:
        raise ValueError(f"{api}: check must name 'nan' and/or 'inf', got {check!r}")
    return frozenset(items)


def parse_mode(mode: object, api: str) -> Mode:
    """``mode`` itself when it is one of `MODES`; else a ValueError naming ``api`` and the options."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"{api}: mode must be {_names(MODES)}, got {mode!r}")
    return cast(Mode, mode)


def parse_exhaustive(exhaustive: object, api: str) -> bool:
    """``exhaustive`` when it is a bool; else a TypeError naming ``api``."""
    if not isinstance(exhaustive, bool):
        raise TypeError(f"{api}: exhaustive must be True or False, got {exhaustive!r}")
    return exhaustive


def check_name(check: FrozenSet[str]) -> str:
    """The string that `parse_check` reads back as ``check`` (for a ``repr``)."""
    return "both" if check >= BOTH else next(iter(check), "both")


__all__ = ["CHECKS", "MODES", "Check", "Kind", "Mode", "check_name", "parse_check", "parse_exhaustive",
           "parse_mode"]
