"""What kind of module a file is, read from its path and its classes: where gradient findings
are lowered to "possible" (README, "Lint").

Some modules hold code that autodiff rarely differentiates: evaluation numbers (metrics, MCMC
diagnostics), reinforcement-learning environments (sampled by an agent, not differentiated)
and optimizers (run on gradients outside the tape). A gradient hazard there (NG302, NG501...)
is reported only with `--confidence all`; a value hazard, a NaN in a number such a module
reports or returns, stays certain. Each kind can be differentiated somewhere (kornia's metrics
as losses, brax's physics, meta-learning through an optimizer), hence lowered, not dropped.
"""

from __future__ import annotations

import ast
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis


def path_parts(path: str) -> list[str]:
    """The folders and the file name of `path`, normalised, on any platform."""
    return re.split(r"[\\/]", os.path.normpath(path))


# Modules whose code is rarely differentiated, by what they hold: a folder name and the module
# names that mean the same. Their gradient hazards are lowered to "possible" (README, "Lint");
# their value hazards, a NaN in a number they report or return, stay certain.
_RARELY_DIFFERENTIATED = {
    # evaluation numbers computed from what a model or a sampler already output (torchrec's
    # `metrics/ctr.py`, blackjax's MCMC `diagnostics.py`, pytracking's `analysis/` of tracking
    # results, an `eval.py` script); kornia's metrics can be losses
    "evaluation": ({"metric", "metrics", "diagnostics", "eval", "evaluation", "analysis"},
                   {"metric.py", "metrics.py", "diagnostics.py", "eval.py", "evaluate.py", "evaluation.py"}),
    # a data pipeline, which prepares inputs before any model runs (pytracking's `ltr/data/`
    # augmentation, monai's `data/box_utils.py`); differentiable augmentation lives elsewhere
    "data": ({"data", "datasets"}, set()),
    # a reinforcement-learning environment's step, reward and physics, which an agent samples
    # (JaxMARL's collision force, jumanji's rewards); brax's physics can be differentiated
    "environment": ({"envs", "environments"}, {"env.py", "envs.py", "environment.py"}),
    # optimizers, which run on gradients outside the tape (blackjax's L-BFGS state, the update
    # functions of optimizer libraries); meta-learning can differentiate through them
    "optimizer": ({"optim", "optimizer", "optimizers"}, {"optim.py", "optimizer.py", "optimizers.py"}),
    # a detector's label assignment, which matches anchors or priors to ground truth to build the
    # training targets, without gradient (mmdet's `assigners/atss_assigner.py`, `..._assigner.py`)
    "assignment": ({"assigners"}, {"assigner.py", "assigners.py"}),
    # samplers, which draw from a trained model step by step (physicsnemo's `diffusion/samplers/`,
    # k-diffusion's `sampling.py`) or pick a dataset's indices; guidance can differentiate through one
    "sampling": ({"samplers", "sampling"}, {"sampler.py", "samplers.py", "sampling.py"}),
}

# File names that end like one of the kind's files (`atss_assigner.py`) are of that kind too.
_SUFFIXED = {"evaluation": ("_metrics.py",), "assignment": ("_assigner.py",), "sampling": ("_sampler.py",)}


def rarely_differentiated_module(path: str) -> str | None:
    """Which kind of rarely differentiated module `path` is ('evaluation', 'data', 'environment',
    'optimizer', 'assignment', 'sampling'), from its folders and its name; None for any other. A conda environment's
    folder (`envs/<name>/lib/.../site-packages/`) is not an RL environment."""
    parts = path_parts(path)
    for kind, (folders, files) in _RARELY_DIFFERENTIATED.items():
        if parts[-1] in files or parts[-1].endswith(_SUFFIXED.get(kind, ("\0",))) or any(p in folders and "site-packages" not in parts[i:]
                                     for i, p in enumerate(parts[:-1])):
            return kind
    return None


_STEPS = frozenset({"step", "step_env", "_step"})
_ACTIONS = frozenset({"action", "actions"})


# IsaacGym's vectorised task API (VecTask: IsaacGymEnvs' tasks, legged_gym's robots): the physics
# step is split around the simulator, `pre_physics_step(actions)` and `post_physics_step()`.
_PHYSICS_STEPS = frozenset({"pre_physics_step", "post_physics_step"})


def defines_an_environment(tree: ast.Module) -> bool:
    """Does the module define a reinforcement-learning environment, a class with `reset` and a
    `step(..., action)` (gym's API, EvoJAX's tasks, JaxMARL's `step_env(key, state, actions)`), or
    IsaacGym's `pre_physics_step`/`post_physics_step` pair? Its module is then read like one under
    `envs/`."""
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "reset" in methods and any(
                name in _STEPS and {a.arg for a in m.args.args + m.args.kwonlyargs} & _ACTIONS
                for name, m in methods.items()):
            return True
        if _PHYSICS_STEPS <= methods.keys():
            return True
    return False


def rarely_differentiated(ctx: Analysis) -> bool:
    """Is the linted module one of the kinds above, by its path or by an environment class?"""
    found = ctx.memo.get("rarely_differentiated")
    if found is None:
        found = ctx.memo["rarely_differentiated"] = bool(
            rarely_differentiated_module(ctx.path) or defines_an_environment(ctx.tree))
    return found
