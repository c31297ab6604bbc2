"""The seed stories: real programs with a NaN bug, each next to its fix, written once.

Each story is two runnable modules of this package, ``<name>_nan`` (the program as its
author wrote it, which goes NaN) and ``<name>_fixed`` (the same program with the nanguard op
that removes the NaN). ``nanguard demo``, the linter's tests and the detector's tests all
read these files, so the story told in the README is the one that is tested.

    python -m nanguard.stories.distance_matrix_nan          # loss: nan from step 2
    nanguard run -m nanguard.stories.distance_matrix_nan    # where and why
    nanguard run -m nanguard.stories.distance_matrix_fixed  # clean

nanguard's detector skips its own frames to name the user's line; it counts the frames
of these programs as user code (``nanguard.torch.detector.frames.is_internal``).

Stories name the framework their programs import (``Story.framework``): the founding story
is PyTorch; ``tf_cross_entropy`` and ``tf_softmax`` (seeds 003 and 004) are TensorFlow and
``jax_sqrt_where`` is JAX, replayed by the demo's TensorFlow and JAX sections.

This module imports no framework (the linter reads the stories without torch installed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STORIES", "VERSIONS", "Story", "get"]

_HERE = Path(os.path.abspath(__file__)).parent  # as the interpreter names the file (no resolve)

VERSIONS = ("nan", "fixed")


@dataclass(frozen=True)
class Story:
    """One story: its name, what goes wrong, and the nanguard op that fixes it."""

    name: str
    summary: str
    fix: str
    framework: str = "torch"  # the import the programs need: "torch", "tensorflow" or "jax"

    def _stem(self, version: str) -> str:
        if version not in VERSIONS:
            raise ValueError(f"nanguard.stories: version must be one of {VERSIONS}, got {version!r}")
        return f"{self.name}_{version}"

    def module(self, version: str = "nan") -> str:
        """The module name, for ``python -m`` and ``nanguard run -m``."""
        return f"{__name__}.{self._stem(version)}"

    def path(self, version: str = "nan") -> Path:
        """The program's file (inside the installed package, or the source checkout)."""
        return _HERE / f"{self._stem(version)}.py"

    def source(self, version: str = "nan") -> str:
        return self.path(version).read_text(encoding="utf-8")

    def line(self, text: str, version: str = "nan") -> int:
        """The number of the one line of the program that contains `text`."""
        hits = [i for i, code in enumerate(self.source(version).splitlines(), 1) if text in code]
        if len(hits) != 1:
            raise LookupError(f"nanguard.stories: {text!r} is on {len(hits)} lines of "
                              f"{self.path(version).name}, expected exactly one")
        return hits[0]


STORIES = (
    Story(
        name="distance_matrix",
        summary="a distance matrix built with sqrt has zeros on its diagonal; sqrt's gradient "
                "there is inf, and training goes NaN",
        fix="nanguard.distance_matrix",
    ),
    Story(
        name="tf_cross_entropy",
        summary="seed 003: cross-entropy -sum(y_ * log(softmax)) by hand; a probability that rounds "
                "to 0 gives log(0) = -inf and 0 * -inf = NaN",
        fix="tf.nn.log_softmax",
        framework="tensorflow",
    ),
    Story(
        name="tf_softmax",
        summary="seed 004: the softmax output turns NaN one step after a single tf.where around 1/h "
                "gave a NaN gradient at h = 0",
        fix="nanguard.tf.safe_where",
        framework="tensorflow",
    ),
    Story(
        name="jax_sqrt_where",
        summary="the JAX FAQ: jnp.where(sq > 0, jnp.sqrt(sq), 0.) has a NaN gradient at sq = 0",
        fix="the double where",
        framework="jax",
    ),
)


def get(name: str) -> Story:
    """The story called `name` (see STORIES)."""
    for story in STORIES:
        if story.name == name:
            return story
    raise KeyError(f"nanguard.stories: no story {name!r}; there are {[s.name for s in STORIES]}")
