"""Formula as data: canonical term rows, the SQL printer, the DimMap algebra."""

from __future__ import annotations

import duckdb
import pytest
import sympy

from archsql.evaluator import evaluate
from archsql.evaluator.dimmap import Axis, Flatten, InputDim, NewDim, Singleton, Split, apply_dimmap
from archsql.evaluator.terms import evaluate_terms, to_sql, to_terms
from archsql.schema.expr import RUNTIME_SYMBOLS

B, S, C = (RUNTIME_SYMBOLS[n] for n in ("B", "s", "c"))


def test_equal_formulas_give_equal_rows():
    a = 2 * B * S * (C - (S - 1) / sympy.Integer(2))
    b = 2 * B * S * C - B * S**2 + B * S
    # sorted by (e_B, e_s, e_c, factor, arg)
    assert (
        to_terms(a) == to_terms(b) == [(1.0, 1, 1, 0, "none", 0), (2.0, 1, 1, 1, "none", 0), (-1.0, 1, 2, 0, "none", 0)]
    )


def test_named_factors_become_factor_columns():
    from archsql.evaluator.factors import window_pairs

    expr = 3 * B * sympy.Min(C, 4096) + 2 * B * window_pairs(S, C, sympy.Integer(128)) + B * sympy.ceiling(C / 4) + S
    assert to_terms(expr) == [
        (1.0, 0, 1, 0, "none", 0),
        (1.0, 1, 0, 0, "ceil_c_div", 4),
        (3.0, 1, 0, 0, "min_c", 4096),
        (2.0, 1, 0, 0, "window_pairs", 128),
    ]
    # the same rows evaluate to the expression at a workload
    value = expr.xreplace({B: 2, S: 100, C: 5000})
    assert evaluate_terms(to_terms(expr), 2, 100, 5000) == pytest.approx(float(value))


def test_products_of_named_factors_are_rejected():
    from archsql.errors import EvaluationError

    with pytest.raises(EvaluationError, match="one"):
        to_terms(sympy.Min(C, 8) * sympy.ceiling(C / 4))


def test_causal_pairs_are_exact():
    """A fresh prefill of s tokens attends s(s+1)/2 pairs; one decode token attends c."""
    pairs = S * C - S * (S - 1) / sympy.Integer(2)
    assert pairs.subs({C: S}).expand() == (S * (S + 1) / 2).expand()
    assert pairs.subs({S: 1}) == C


def test_unbound_dims_are_rejected():
    from archsql.errors import EvaluationError

    with pytest.raises(EvaluationError, match="unbound dims"):
        to_terms(sympy.Symbol("d_model") * B)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_sql_printer_matches_term_rows(phase):
    """Each node's printed SQL, run by DuckDB, equals the sum of its term rows."""
    analysis = evaluate("Qwen3-30B-A3B")
    formulas = analysis.tables["formulas"].to_pylist()
    terms = analysis.tables["terms"].to_pylist()
    con = duckdb.connect()
    checked = 0
    for f in formulas:
        if f["phase"] != phase or f["sql"] == "0":
            continue
        rows = [
            (t["coef"], t["e_B"], t["e_s"], t["e_c"], t["factor"], t["factor_arg"])
            for t in terms
            if t["uid"] == f["uid"] and t["phase"] == phase and t["quantity"] == f["quantity"]
        ]
        (got,) = con.execute(
            f"select {f['sql']} from (select 3::BIGINT as batch, 17::BIGINT as new_tokens, 4099::BIGINT as context)"
        ).fetchone()
        assert got == pytest.approx(evaluate_terms(rows, 3, 17, 4099), rel=1e-12), f["uid"]
        checked += 1
    assert checked > 10


def test_to_sql_names_workload_columns():
    assert (
        to_sql(2 * B * S * C + S**2)
        == "2*batch::DOUBLE*context::DOUBLE*new_tokens::DOUBLE + new_tokens::DOUBLE*new_tokens::DOUBLE"
    )


def _ax(label: str, value) -> Axis:
    v = sympy.sympify(value)
    return Axis(label, v, v)


def test_dimmap_split_flatten_copy_new():
    x = [_ax("B", B), _ax("s", S), _ax("h*d", 32 * 128)]
    heads = (_ax("h", 32), _ax("d", 128))
    split = apply_dimmap((InputDim(0, 0), InputDim(0, 1), Split(0, 2, heads, 0), Split(0, 2, heads, 1)), [x])
    assert [a.value for a in split] == [B, S, 32, 128]
    merged = apply_dimmap((InputDim(0, 0), InputDim(0, 1), Flatten(0, (2, 3))), [split])
    assert [a.value for a in merged] == [B, S, 4096] and merged[2].label == "h*d"
    out = apply_dimmap((InputDim(0, 0), Singleton(), NewDim(_ax("vocab", 1000))), [x])
    assert [a.value for a in out] == [B, 1, 1000]
