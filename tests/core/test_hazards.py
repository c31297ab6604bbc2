"""The hazard catalogue: consistent with the lint rules and the runtime explainer, and the one
source of their words: the same hazard gives the same why and fix in a lint finding and in a
runtime report."""

from __future__ import annotations

import ast
import dataclasses
import string
import textwrap
from pathlib import Path

import pytest

from nanguard.core.hazard import (
    FRAMEWORKS,
    explanation,
    lint_message,
    suggestion,
    template_fields,
)
from nanguard.core.hazards import HAZARDS, for_code, for_op, hazard
from nanguard.lint import lint_source
from nanguard.lint.rules import RULES, SYNTAX_ERROR

REPO = Path(__file__).resolve().parents[2]
DETECTOR = REPO / "nanguard" / "torch" / "detector"
# the shared rules of every backend, and the adapters that word findings of their own
WHY_RULES = tuple(sorted((REPO / "nanguard" / "core" / "why").glob("*.py")))
TF_EXPLAIN = REPO / "nanguard" / "tf" / "detector" / "explain.py"
HEADER = "import torch\nimport torch.nn.functional as F\n"


# ------------------------------------------------------------------------- (a) consistency
def test_every_lint_code_a_hazard_names_is_a_rule_that_names_it_back():
    for h in HAZARDS.values():
        for code in h.lint:
            assert code in RULES, f"{h.key} names {code}, which is no rule"
            assert h.key in RULES[code].hazards, f"{code} does not list {h.key} among its hazards"


def test_every_rule_finds_catalogued_hazards_that_list_its_code():
    for code, rule in RULES.items():
        if rule is SYNTAX_ERROR:
            assert rule.hazards == () and rule.fix_hint, "NG001 is the one rule with no hazard"
            continue
        assert rule.hazards, f"{code} maps to no hazard"
        for key in rule.hazards:
            assert code in hazard(key).lint, f"{code} lists {key}, whose lint codes are {hazard(key).lint}"
        assert {h.key for h in for_code(code)} == set(rule.hazards)


def test_every_hazard_has_its_texts_and_a_torch_replacement():
    for key, h in HAZARDS.items():
        assert h.key == key
        for name in ("title", "value", "gradient", "why", "fix"):
            text = getattr(h, name)
            assert isinstance(text, str) and text.strip(), f"{key}.{name} is empty"
        # Clauses: the wording adds the final period (and lint messages have none).
        assert not h.why.rstrip().endswith(".") and not h.fix.rstrip().endswith("."), key
        assert h.safe.get("torch"), f"{key} has no torch replacement"
        assert set(h.safe) == set(FRAMEWORKS), f"{key}: replacements for {sorted(h.safe)}"
        assert all(v.strip() for v in h.safe.values())


# The recover pillar has one guard per framework, each in its framework's idiom (a Keras
# optimizer wrapper, an optax transformation); safe ops keep one name everywhere.
GUARDS = {"nanguard.GradGuard": {"tf": "nanguard.tf.GuardedOptimizer", "jax": "nanguard.jax.guarded"}}


def test_nanguard_replacements_follow_the_backend_naming():
    for h in HAZARDS.values():
        torch_name = h.safe["torch"]
        if torch_name in GUARDS:
            assert {k: h.safe[k] for k in ("tf", "jax")} == GUARDS[torch_name], h.key
        elif torch_name.startswith("nanguard.") and not torch_name.startswith("nanguard.tf."):
            op = torch_name[len("nanguard."):]
            assert h.safe["tf"] == f"nanguard.tf.{op}" and h.safe["jax"] == f"nanguard.jax.{op}", h.key


def test_templates_fill_from_defaults_and_evidence_names_known_fields():
    known = {"zeros", "numel", "negative", "min", "max", "posinf", "neginf", "nan", "name", "rows", "total",
             "over", "limit", "dtype", "p", "n", "s", "peak", "diagonal", "num_zeros", "inf", "fn", "op",
             "what", "node", "optimizer", "hp"}
    for h in HAZARDS.values():
        assert h.fields() <= set(h.defaults), f"{h.key}: fields without a default {h.fields() - set(h.defaults)}"
        assert "{" not in h.why_text() + h.fix_text(), h.key
        for name, template in h.evidence.items():
            fields = template_fields(template)
            assert fields <= known, f"{h.key}.evidence[{name}] uses {fields - known}"
            filled = h.evidence_text(name, **{f: "X" for f in fields})
            assert "{" not in filled and "X" in filled or not fields


def test_entries_are_frozen_data():
    h = HAZARDS["sqrt_zero"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.fix = "something else"  # type: ignore[misc]
    with pytest.raises(TypeError):
        h.safe["torch"] = "torch.sqrt"  # type: ignore[index]
    with pytest.raises(KeyError, match="known"):
        hazard("no_such_hazard")


def test_lookup_by_op_and_code():
    assert {"sqrt_negative", "sqrt_zero", "distance_matrix"} <= {h.key for h in for_op("sqrt")}
    assert [h.key for h in for_code("NG701")] == ["softmax_masked_row"]
    assert {h.key for h in for_code("NG303")} == {"acos_domain", "asin_domain"}


def test_wording_composes_the_catalogue_texts():
    h = HAZARDS["softmax_masked_row"]
    assert lint_message(h, "`softmax` of x", fn="nanguard.log_softmax", op="log_softmax") == (
        "`softmax` of x: " + h.why_text(op="log_softmax") + "; fix: " + h.fix_text(fn="nanguard.log_softmax"))
    assert "nanguard.log_softmax(x, dim, mask=mask)" in h.fix_text(fn="nanguard.log_softmax")
    assert explanation(h, "3 of 4 rows") == f"3 of 4 rows: {h.why_text()}."
    assert explanation(h) == f"{h.why_text()}."
    assert suggestion(h) == f"{h.fix_text()}."


def test_fix_is_worded_per_framework_and_falls_back_to_the_torch_wording():
    from nanguard.core.hazard import make

    h = make("demo", "demo", ("sqrt",), value="v", gradient="g", why="why", fix="use nanguard.sqrt({x})",
             safe={"torch": "nanguard.sqrt"}, defaults={"x": "x"}, fix_in={"tf": "use nanguard.tf.sqrt({x})"})
    assert h.fix_text() == h.fix_text("torch") == "use nanguard.sqrt(x)"
    assert h.fix_text("tf", x="y") == "use nanguard.tf.sqrt(y)"
    assert h.fix_text("jax") == "use nanguard.sqrt(x)"
    assert suggestion(h, "tf") == "use nanguard.tf.sqrt(x)."
    assert lint_message(h, "`sqrt(x)`", "tf").endswith("fix: use nanguard.tf.sqrt(x)")
    with pytest.raises(ValueError, match="framework must be one of"):
        h.fix_text("mxnet")
    with pytest.raises(ValueError, match="unknown frameworks"):
        make("bad", "bad", ("sqrt",), value="v", gradient="g", why="w", fix="f", safe={}, fix_in={"mx": "f"})


def _said_calls(path: Path):
    """(key, evidence name) of every `Said("key", "evidence", ...)` with literal arguments."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Said":
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args[:2]]
            yield path.name, node.lineno, args[0], args[1] if len(args) > 1 else ""


def test_every_hazard_and_evidence_the_runtime_names_is_catalogued():
    """Read, not run: the runtime rules name catalogue keys and evidence templates that exist."""
    seen = 0
    for path in (*WHY_RULES, DETECTOR / "explain.py", TF_EXPLAIN):
        for file, line, key, evidence in _said_calls(path):
            if key is None:
                continue  # built from the op name (acos_domain / asin_domain): checked below
            seen += 1
            assert key in HAZARDS, f"{file}:{line} names hazard {key!r}"
            if evidence:
                assert evidence in HAZARDS[key].evidence, f"{file}:{line}: {key} has no evidence {evidence!r}"
    assert seen >= 30
    for fn in ("acos", "asin"):
        assert {"forward", "backward"} <= set(HAZARDS[f"{fn}_domain"].evidence)


def test_the_explainer_reads_no_source_line():
    """The runtime knows the op, the values and the autograd graph; it must not guess from
    the user's code (the removed `_looks_like_distance` heuristic)."""
    for path in (*WHY_RULES, *(DETECTOR / name for name in ("explain.py", "evidence.py", "probe.py"))):
        text = path.read_text(encoding="utf-8")
        assert "_looks_like_distance" not in text
        assert "ev.code" not in text and ".code.replace" not in text, path.name


def test_catalogue_texts_are_format_strings_that_parse():
    for h in HAZARDS.values():
        for text in (h.why, h.fix, *h.evidence.values()):
            list(string.Formatter().parse(text))  # raises on a stray brace


# ------------------------------------------------------ (b) same hazard, same text
def _lint(snippet: str):
    findings = lint_source(HEADER + textwrap.dedent(snippet))
    assert len(findings) == 1, [f.format() for f in findings]
    return findings[0]


def _detect(fn, **kw):
    import nanguard

    with nanguard.detect(mode="record", **kw) as d:
        fn()
    assert d.report is not None, "nothing detected"
    return d.report


def _programs():
    pytest.importorskip("torch")
    from tests.torch.detector import programs
    return programs


def _sqrt_of_abs():
    import torch
    x = torch.tensor([0.0, -2.0, 3.0], requires_grad=True)
    torch.sqrt(x.abs()).sum().backward()


def _log_of_underflowed_softmax():
    import torch
    logits = torch.tensor([[0.0, 200.0]], requires_grad=True)
    torch.log(torch.softmax(logits, dim=-1))


def _std_of_one_sample():
    import warnings

    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's own "degrees of freedom is <= 0"
        torch.randn(1, 3).std(0)


# (hazard, code, lint snippet, runtime program: a name in programs or a function here, detect kwargs,
#  template fields the lint rule and the runtime both use)
CASES = [
    ("distance_matrix", "NG301", "d = torch.sqrt(diag_1 + diag_2 - (2 * gram_matrix))", "distance_matrix", {}, {}),
    ("sqrt_zero", "NG304", "y = torch.sqrt(torch.abs(x))", _sqrt_of_abs, {}, {}),
    ("norm_zero", "NG302", "n = torch.sqrt((h * h).sum(-1))", "module_backward", {}, {}),
    ("log_softmax", "NG101", "y = torch.log(torch.softmax(x, dim=-1))", _log_of_underflowed_softmax, {}, {}),
    ("xlogy_zero", "NG201", "loss = -(y * torch.log(y_conv)).sum()", "cross_entropy_zero_prob",
     {"check": "nan"}, {}),
    ("softmax_masked_row", "NG701",
     "m = scores.masked_fill(~mask, float('-inf'))\na = torch.softmax(m, dim=-1)",
     "fully_masked_softmax", {}, {"fn": "nanguard.softmax", "op": "softmax"}),
    ("mean_empty", "NG401", "mean = embedded.sum(1) / lengths", "mean_over_empty_sequence", {}, {}),
    ("fractional_power_zero", "NG304", "y = torch.abs(x) ** 0.5", "pow_half_at_zero", {}, {}),
    ("acos_domain", "NG303", "a = torch.acos(F.cosine_similarity(u, v, dim=-1))", "acos_out_of_range", {}, {}),
    ("std_degenerate", "NG801", "s = x.std(0)", _std_of_one_sample, {}, {}),
]


@pytest.mark.parametrize("key, code, snippet, program, kw, fields", CASES, ids=[c[0] for c in CASES])
def test_same_hazard_same_why_and_fix_in_lint_and_at_runtime(key, code, snippet, program, kw, fields):
    programs = _programs()
    h = HAZARDS[key]
    why, fix = h.why_text(**fields), h.fix_text(**fields)

    finding = _lint(snippet)
    assert (finding.code, finding.hazard) == (code, key)
    assert finding.message.endswith(f": {why}; fix: {fix}"), finding.message

    report = _detect(getattr(programs, program) if isinstance(program, str) else program, **kw)
    assert report.suggestion == suggestion(h, **fields), report.suggestion
    assert report.explanation.endswith(f": {why}."), report.explanation
    # The runtime adds the counts that prove it; the lint adds the pattern it matched.
    assert report.explanation != f"{why}." and finding.message != f"{why}; fix: {fix}"


def test_different_hazards_have_different_fixes_where_the_remedy_differs():
    fixes = {key: h.fix_text() for key, h in HAZARDS.items()}
    assert len(set(fixes.values())) == len(fixes), "two hazards share a fix text: merge them or tell them apart"
