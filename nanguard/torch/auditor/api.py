"""``nanguard.audit(fn_or_module, *example_args)`` and ``nanguard.audit_script(path, argv)``.

Both trace one forward pass (a script: up to its first ``backward()``), bound every value
(`analysis`), and report each op that *can* make NaN/Inf for some finite weights and inputs
(``structural`` mode) or inside the ranges given (``bounded`` mode), with a witness input
where the search finds one, and the fix the hazard catalogue words.
"""

from __future__ import annotations

import inspect
import os
import re
import resource
import runpy
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils import _pytree as pytree

from nanguard.core.audit_result import AuditFinding, AuditResult
from nanguard.core.hazards import HAZARDS
from nanguard.core.singular import singularities
from nanguard.torch.auditor import fixes
from nanguard.torch.auditor.analysis import Analysis, Ranges
from nanguard.torch.auditor.checks import Hit
from nanguard.torch.auditor.replay import slice_spec
from nanguard.torch.auditor.graph import Trace
from nanguard.torch.auditor.trace import Tracer
from nanguard.torch.auditor.trace_hooks import trace_calls
from nanguard.torch.auditor.witness import Witness, find_witness

MODES = ("structural", "bounded")


def _check_options(mode: str, ranges: Optional[Ranges], witness_budget: float) -> Ranges:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    out: Ranges = {}
    for name, rng in (ranges or {}).items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"range names must be non-empty strings, got {name!r}")
        try:
            lo, hi = (float(rng[0]), float(rng[1]))
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"range {name!r} must be a pair of numbers (lo, hi), got {rng!r}") from None
        if not lo <= hi:
            raise ValueError(f"range {name!r}: lo must be <= hi, got ({lo}, {hi})")
        out[name] = (lo, hi)
    if out and mode == "structural":
        raise ValueError("ranges are used in mode='bounded'; pass mode='bounded' with them")
    if witness_budget < 0:
        raise ValueError(f"witness_budget must be >= 0 seconds, got {witness_budget}")
    return out


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------------ findings
def _observed_hit(rec: Any) -> Optional[Hit]:
    """A Hit standing for an op that made NaN/Inf in the traced run (no condition explains it)."""
    entries = singularities("overflow")
    node = next((n for n in rec.outputs if n is not None), None)
    return Hit(rec, entries[0], node, None, (float("-inf"), float("inf")))


def _finding(hit: Hit, analysis: Analysis, discarded: bool, observed_only: bool = False) -> AuditFinding:
    rec = hit.rec
    hazard = fixes.hazard_of(hit, analysis, discarded)
    h = HAZARDS.get(hazard) or HAZARDS["unexplained"]
    frame = rec.frame
    phase = "gradient" if discarded else hit.phase
    result = "nan" if discarded else hit.singularity.result
    kind = "observed" if observed_only else hit.condition
    inputs = [n.label() for n in rec.input_nodes()][:4]
    return AuditFinding(
        file=frame.file if frame else "<unknown>", line=frame.line if frame else 0,
        function=frame.function if frame else "", code=frame.code if frame else "",
        op=rec.name, kind=kind, phase=phase, result=result, hazard=h.key, range=hit.range,
        why=h.why_text(), fix=h.fix_text("torch"), module=rec.module, observed=rec.made_nonfinite,
        inputs=inputs)


def _input_finding(node: Any, rec: Any) -> AuditFinding:
    """Data that arrived holding NaN/Inf: reported where it is first used."""
    h = HAZARDS["nan_input"]
    frame = rec.frame
    value = node.value
    nan = int(torch.isnan(value).sum()) if value is not None else 0
    inf = int(torch.isinf(value).sum()) if value is not None else 0
    return AuditFinding(
        file=frame.file if frame else "<unknown>", line=frame.line if frame else 0,
        function=frame.function if frame else "", code=frame.code if frame else "",
        op=rec.name, kind="input", phase="input", result="nan" if nan else "inf", hazard=h.key,
        range=(float("nan"), float("nan")) if nan else (float("-inf"), float("inf")),
        why=f"{node.label()} arrived holding {nan} NaN and {inf} inf; " + h.why_text(),
        fix=h.fix_text("torch"), module=rec.module, observed=True, inputs=[node.label()])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60] or "finding"


def _save_witness(w: Witness, finding: AuditFinding, directory: str, index: int) -> str:
    os.makedirs(directory, exist_ok=True)
    name = f"{index:02d}_{_slug(os.path.basename(finding.file))}_{finding.line}_{_slug(finding.op)}.pt"
    path = os.path.join(directory, name)
    spec = slice_spec(w.slice, w.values, w.target)
    payload = {
        "finding": finding.to_dict(),
        "sources": {w.labels.get(k, str(k)) + f"#{k}": v for k, v in w.values.items()},
        "how": w.how,
        "spec": spec,
    }
    torch.save(payload, path)
    return path


_TEST_TEMPLATE = '''"""nanguard audit witness: {where} {op} can produce {result} ({phase}).

Emitted by `nanguard audit --emit-tests`: replays the recorded computation that feeds the op
with the witness input saved in {witness_name}, and fails while it makes a non-finite {what}.
why: {why}
fix: {fix}
"""

import os

from nanguard.torch.auditor.emit import replay_witness

WITNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), {witness_name!r})


def test_{name}():
    outcome = replay_witness(WITNESS)
    assert outcome.finite, outcome.message
'''


def _emit_test(finding: AuditFinding, witness_path: str, directory: str, index: int) -> str:
    import shutil

    os.makedirs(directory, exist_ok=True)
    stem = f"test_nanguard_{index:02d}_{_slug(os.path.basename(finding.file))}_{finding.line}"
    local = stem[5:] + ".pt"
    if os.path.abspath(os.path.dirname(witness_path)) != os.path.abspath(directory):
        shutil.copyfile(witness_path, os.path.join(directory, local))
    else:
        local = os.path.basename(witness_path)
    text = _TEST_TEMPLATE.format(where=f"{os.path.basename(finding.file)}:{finding.line}", op=finding.op,
                                 result=finding.result, phase=finding.phase, witness_name=local,
                                 what="gradient" if finding.phase == "gradient" else "value",
                                 why=finding.why, fix=finding.fix, name=_slug(stem[5:]).lower())
    path = os.path.join(directory, stem + ".py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def analyse(trace: Trace, mode: str = "structural", ranges: Optional[Ranges] = None, witness: bool = True,
            witness_budget: float = 3.0, witness_dir: Optional[str] = None, emit_tests: Optional[str] = None,
            total_budget: float = 20.0) -> Tuple[List[AuditFinding], Dict[str, int], List[Optional[Witness]]]:
    """Findings (deduplicated by line, hazard and phase), unsupported ops, and the witnesses."""
    analysis = Analysis(trace, mode, ranges)
    result = analysis.run()
    # one finding per line and hazard; its hits (value first, then gradient) are tried in turn
    groups: Dict[Tuple[str, int, str], Tuple[AuditFinding, List[Hit]]] = {}
    for hit in sorted(result.hits, key=lambda h: (h.rec.index, h.phase != "value")):
        discarded = id(hit) in result.discarded
        if discarded and not analysis.on_gradient_path(hit.rec):
            continue   # a NaN a where drops, in code no gradient flows through: harmless
        f = _finding(hit, analysis, discarded)
        key = (f.file, f.line, f.hazard)
        if key in groups:
            groups[key][0].observed = groups[key][0].observed or f.observed
            groups[key][1].append(hit)
            continue
        groups[key] = (f, [hit])
    lines = {(k[0], k[1]) for k in groups}
    for rec in result.observed:
        hit = _observed_hit(rec)
        if hit is None:
            continue
        f = _finding(hit, analysis, False, observed_only=True)
        if (f.file, f.line) not in lines:
            groups[(f.file, f.line, f.hazard)] = (f, [hit])
            lines.add((f.file, f.line))
    for node, rec in result.inputs:
        f = _input_finding(node, rec)
        if (f.file, f.line) not in lines:
            groups[(f.file, f.line, f.hazard)] = (f, [])
            lines.add((f.file, f.line))
    findings: List[AuditFinding] = []
    witnesses: List[Optional[Witness]] = []
    spent = 0.0
    for i, (f, hits) in enumerate(groups.values()):
        w: Optional[Witness] = None
        if witness and hits:
            # a short try of every hit first (a gradient witness is often immediate where the
            # value's needs round-off luck), then the rest of the budget, hit by hit
            short = min(0.5, witness_budget / len(hits)) if len(hits) > 1 else witness_budget
            tries = [(hit, short) for hit in hits]
            if len(hits) > 1:
                tries += [(hit, witness_budget - short) for hit in hits]
            for hit, budget in tries:
                if spent >= total_budget or budget <= 0:
                    continue
                t0 = time.perf_counter()
                w = find_witness(trace, analysis, hit, budget_s=min(budget, total_budget - spent))
                spent += time.perf_counter() - t0
                if w is not None:
                    if hit is not hits[0]:   # say what the witness shows
                        shown = _finding(hit, analysis, id(hit) in result.discarded)
                        f.phase, f.result, f.kind, f.range = shown.phase, shown.result, shown.kind, shown.range
                    break
            if w is not None:
                if witness_dir is not None:
                    f.witness = _save_witness(w, f, witness_dir, i)
                    if emit_tests is not None:
                        _emit_test(f, f.witness, emit_tests, i)
                else:
                    f.witness = "<in memory>"
            else:
                f.witness_note = "the search found no input within its budget" if spent < total_budget \
                    else "the witness budget was spent"
        findings.append(f)
        witnesses.append(w)
    return findings, dict(result.unsupported), witnesses


# ------------------------------------------------------------------------ entry points
def _data_names(tracer: Tracer, fn: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {f"arg{i}": a for i, a in enumerate(args)}
        bound.update(kwargs)
    for name, value in bound.items():
        leaves, _ = pytree.tree_flatten(value)
        for j, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor):
                tracer.data_names[id(leaf)] = name if len(leaves) == 1 else f"{name}[{j}]"


def audit(fn_or_module: Callable[..., Any], *example_args: Any, mode: str = "structural",
          ranges: Optional[Ranges] = None, witness: bool = True, witness_dir: Optional[str] = None,
          emit_tests: Optional[str] = None, witness_budget: float = 3.0, limit: int = 200_000,
          **example_kwargs: Any) -> AuditResult:
    """Which ops of ``fn_or_module(*example_args)`` can produce NaN/Inf, before you train.

    The call is traced once (its values are only used for shapes, dtypes and the exact
    values of integers, masks and constants); parameters and float inputs are free: any
    finite value in ``structural`` mode, the stated ``ranges`` in ``bounded`` mode
    (``{"x": (0, 1), "params": (-3, 3)}``: argument names, parameter or module names,
    ``"params"``, ``"data"``). What the call returns is what a training step differentiates.

    Example:
        >>> def loss_fn(logits, target):
        ...     p = torch.softmax(logits, -1)
        ...     return -(target * torch.log(p)).sum()
        >>> result = nanguard.audit(loss_fn, torch.randn(4, 3), torch.eye(3)[[0, 1, 2, 0]])
        >>> [(f.line, f.hazard) for f in result.findings]      # the log line, 'log_softmax'
    """
    if not callable(fn_or_module):
        raise TypeError(f"audit needs a function or an nn.Module to call, got {type(fn_or_module).__name__}")
    ranges = _check_options(mode, ranges, witness_budget)
    start = time.perf_counter()
    tc = trace_calls(limit=limit)
    tracer = tc.tracer
    if isinstance(fn_or_module, torch.nn.Module):
        tracer.name_parameters(fn_or_module)
        target: Callable[..., Any] = fn_or_module.forward
    else:
        target = fn_or_module
    _data_names(tracer, target, example_args, example_kwargs)
    tracer.arguments_are_the_data = True
    out: Any = None
    with tc:   # an error of the function itself propagates: the caller sees it as from a plain call
        out = fn_or_module(*example_args, **example_kwargs)
    trace = tracer.trace
    if trace.stopped_at != "backward":
        trace.roots = tracer.nodes_of(out)
        trace.stopped_at = "output" if trace.stopped_at == "end" else trace.stopped_at
    findings, unsupported, _ = analyse(trace, mode, ranges, witness, witness_budget, witness_dir, emit_tests)
    return AuditResult(findings=findings, unsupported=unsupported, ops_traced=len(trace.ops),
                       seconds=time.perf_counter() - start, mode=mode, stopped_at=trace.stopped_at,
                       peak_memory_mb=_peak_mb())


def trace_script(path: str, argv: Sequence[str] = (), module: bool = False, limit: int = 200_000
                 ) -> Tuple[Trace, Optional[str]]:
    """Run the script as ``python path argv...`` under the tracer, up to its first backward."""
    from nanguard.run.runner import _user_traceback

    tc = trace_calls(limit=limit)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path] + list(argv)
    if module:
        sys.path.insert(0, os.getcwd())
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    error: Optional[str] = None
    try:
        with tc:
            if module:
                runpy.run_module(path, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(os.path.abspath(path), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = f"the script exited with status {exc.code} before its first backward"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:   # the script's own error
        error = "".join(traceback.format_exception(type(exc), exc, _user_traceback(exc.__traceback__))).rstrip()
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    trace = tc.tracer.trace
    return trace, error


def audit_script(path: str, argv: Sequence[str] = (), mode: str = "structural", ranges: Optional[Ranges] = None,
                 witness: bool = True, witness_dir: Optional[str] = None, emit_tests: Optional[str] = None,
                 witness_budget: float = 3.0, module: bool = False, limit: int = 200_000) -> AuditResult:
    """Audit a training script: run it (``python path *argv``) up to its first ``backward()``,
    then report what can produce NaN/Inf on that step (see `audit`)."""
    if not isinstance(path, str) or not path:
        raise TypeError(f"path must be a script path (or a module name with module=True), got {path!r}")
    if not module and not os.path.isfile(path):
        raise FileNotFoundError(f"no such script: {path!r}")
    ranges = _check_options(mode, ranges, witness_budget)
    start = time.perf_counter()
    trace, error = trace_script(path, argv, module=module, limit=limit)
    findings, unsupported, _ = analyse(trace, mode, ranges, witness, witness_budget, witness_dir, emit_tests)
    if error is not None and trace.stopped_at != "backward":
        trace.stopped_at = "error"
    return AuditResult(findings=findings, unsupported=unsupported, ops_traced=len(trace.ops),
                       seconds=time.perf_counter() - start, mode=mode, stopped_at=trace.stopped_at,
                       peak_memory_mb=_peak_mb(), script_error=error)





def output_bounds(fn: Callable[..., Any], *example_args: Any, ranges: Optional[Ranges] = None,
                  **example_kwargs: Any) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """The (lower, upper) bounds the audit computes for each tensor ``fn`` returns, with the
    arguments (and parameters) named in ``ranges`` inside their ranges and the rest free.

    A window into the analysis for checking what it knows:
        >>> lo, hi = output_bounds(lambda x: torch.sigmoid(x) * 2, torch.zeros(3), ranges={"x": (0, 1)})[0]
    """
    checked = _check_options("bounded" if ranges else "structural", ranges, 0.0)
    tc = trace_calls()
    tracer = tc.tracer
    _data_names(tracer, fn, example_args, example_kwargs)
    with tc:
        out = fn(*example_args, **example_kwargs)
    analysis = Analysis(tracer.trace, "bounded" if checked else "structural", checked)
    roots = tracer.nodes_of(out)
    tracer.trace.roots = roots
    analysis.run()
    result = []
    for node in roots:
        box = analysis.box_of(node)
        lo, hi = box.full()
        result.append((lo.clone(), hi.clone()))
    return result
__all__ = ["MODES", "analyse", "audit", "audit_script", "output_bounds", "trace_script"]
