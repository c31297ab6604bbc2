"""What one NaN/Inf hazard is, as data, and how its texts are put into words.

A `Hazard` is framework-free: the op names it concerns, when its value and its gradient are
non-finite, the explanation ("why") and the fix, the safe replacement in each framework, and
the lint codes that find it before anything runs. The linter and the runtime explainer both
word their findings with `lint_message`, `explanation` and `suggestion` below, so the same
hazard reads the same wherever it is found. The entries live in `nanguard.core.hazards`.

Texts may be templates with named fields (``{fn}``, ``{count}``...), filled by `Hazard.text`;
`defaults` supplies the fields a finding does not give.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, FrozenSet, Optional, Tuple

FRAMEWORKS = ("torch", "tf", "jax")
# Wordings for code that is not written against one framework's API but falls back to one:
# multi-backend Keras 3 (`keras.ops`) is worded as Keras where `fix_in` has a "keras" entry,
# else as TensorFlow (its usual backend). A dialect has no `safe` entry of its own.
DIALECTS: Dict[str, str] = {"keras": "tf"}


@dataclass(frozen=True)
class Hazard:
    """One way an op makes NaN or Inf, and how to avoid it.

    ``key`` names it (``"distance_matrix"``); ``ops`` are op base names as torch, TF and JAX
    spell them (``"sqrt"``, ``"log_softmax"``); ``value`` and ``gradient`` say when each is
    non-finite; ``why`` and ``fix`` are the explanation and the remedy (clauses: no capital
    required, no final period); ``fix_in`` holds the remedy worded for a framework whose
    spelling differs (``{"tf": "nanguard.tf.sqrt(x) ..."}``; a framework missing from it gets
    ``fix``, which is worded for torch); ``safe`` maps a framework to the replacement's full name;
    ``lint`` lists the NG codes whose rules find it statically; ``evidence`` holds named
    templates that a runtime finding fills with the counts that prove it.
    """

    key: str
    title: str
    ops: Tuple[str, ...]
    value: str
    gradient: str
    why: str
    fix: str
    safe: Mapping[str, str] = field(hash=False)
    lint: Tuple[str, ...] = ()
    evidence: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    fix_in: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def text(self, template: str, /, **fields: Any) -> str:
        """``template`` with its fields filled from ``fields``, then from `defaults`."""
        if not fields and not self.defaults:
            return template
        values: Dict[str, Any] = dict(self.defaults)
        values.update(fields)
        return template.format_map(values)

    def why_text(self, **fields: Any) -> str:
        return self.text(self.why, **fields)

    def fix_text(self, framework: str = "torch", **fields: Any) -> str:
        """The remedy worded for ``framework`` (one of `FRAMEWORKS`, or a dialect of `DIALECTS`,
        which falls back to its framework's wording)."""
        if framework not in FRAMEWORKS and framework not in DIALECTS:
            raise ValueError(f"framework must be one of {FRAMEWORKS + tuple(DIALECTS)}, got {framework!r}")
        text = self.fix_in.get(framework)
        if text is None and framework in DIALECTS:
            text = self.fix_in.get(DIALECTS[framework])
        return self.text(self.fix if text is None else text, **fields)

    def evidence_text(self, which: str, /, **fields: Any) -> str:
        """The evidence template ``which`` filled in; KeyError for one the hazard lacks."""
        return self.text(self.evidence[which], **fields)

    def fields(self) -> FrozenSet[str]:
        """Every field name the why and fix templates use (each has a default)."""
        names = template_fields(self.why) | template_fields(self.fix)
        for text in self.fix_in.values():
            names |= template_fields(text)
        return names


def template_fields(template: str) -> FrozenSet[str]:
    return frozenset(name for _, name, _, _ in string.Formatter().parse(template) if name)


def make(key: str, title: str, ops: Tuple[str, ...], value: str, gradient: str, why: str, fix: str,
         safe: Mapping[str, str], lint: Tuple[str, ...] = (), evidence: Optional[Mapping[str, str]] = None,
         defaults: Optional[Mapping[str, Any]] = None, fix_in: Optional[Mapping[str, str]] = None) -> Hazard:
    """A `Hazard` whose mappings are read-only."""
    unknown = set(fix_in or {}) - set(FRAMEWORKS) - set(DIALECTS)
    if unknown:
        raise ValueError(f"hazard {key!r}: fix_in names unknown frameworks {sorted(unknown)}")
    return Hazard(key=key, title=title, ops=tuple(ops), value=value, gradient=gradient, why=why, fix=fix,
                  safe=MappingProxyType(dict(safe)), lint=tuple(lint),
                  evidence=MappingProxyType(dict(evidence or {})),
                  defaults=MappingProxyType(dict(defaults or {})),
                  fix_in=MappingProxyType(dict(fix_in or {})))


def nanguard_op(name: str) -> Dict[str, str]:
    """The replacement spelled in every framework: ``nanguard.sqrt``, ``nanguard.tf.sqrt``,
    ``nanguard.jax.sqrt``."""
    return {"torch": f"nanguard.{name}", "tf": f"nanguard.tf.{name}", "jax": f"nanguard.jax.{name}"}


# ---------------------------------------------------------------------------------- wording
def lint_message(hazard: Hazard, pattern: str, /, framework: str = "torch", **fields: Any) -> str:
    """A lint finding: the pattern the linter matched, the hazard's why, and its fix for ``framework``."""
    return f"{pattern}: {hazard.why_text(**fields)}; fix: {hazard.fix_text(framework, **fields)}"


def explanation(hazard: Hazard, evidence: str = "", /, **fields: Any) -> str:
    """A runtime report's "why": what the values show (``evidence``), then the hazard's why."""
    why = hazard.why_text(**fields)
    return f"{evidence}: {why}." if evidence else f"{why}."


def suggestion(hazard: Hazard, /, framework: str = "torch", **fields: Any) -> str:
    """A runtime report's "fix": the hazard's fix for ``framework`` as a sentence."""
    return f"{hazard.fix_text(framework, **fields)}."


__all__ = [
    "DIALECTS",
    "FRAMEWORKS",
    "Hazard",
    "explanation",
    "lint_message",
    "make",
    "nanguard_op",
    "suggestion",
    "template_fields",
]
