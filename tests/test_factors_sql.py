"""The SQL macros of the named factors (archsql/views/macros) against their Python reference
(archsql.evaluator.factors), and the views' term evaluation against
archsql.evaluator.terms.evaluate_terms on the same rows."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsql import store
from archsql.evaluator.factors import chunk_len_int, chunk_pairs_int, factor_value, window_pairs_int
from archsql.evaluator.terms import evaluate_terms
from archsql.schema.tables import TABLES
from archsql.views import create_macros

FACTORS = ("none", "min_c", "ceil_c_div", "window_pairs", "chunk_len", "chunk_pairs")


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    create_macros(con)
    yield con
    con.close()


def sql_window_pairs(con, cases: list[tuple[int, int, int]]) -> list[int]:
    con.execute("create or replace temp table wp_cases (i bigint, s bigint, c bigint, w bigint)")
    con.executemany("insert into wp_cases values (?, ?, ?, ?)", [(i, *case) for i, case in enumerate(cases)])
    return [r[0] for r in con.execute("select window_pairs(s, c, w) from wp_cases order by i").fetchall()]


def brute_window_pairs(s: int, c: int, w: int) -> int:
    return sum(min(j, w) for j in range(c - s + 1, c + 1))


# (s, c, w): every branch of the closed form and its boundaries
EDGE_CASES = [
    (1, 1, 1),  # w = 1, s = 1
    (1, 5, 1),  # w = 1: every query sees one key
    (5, 5, 1),
    (3, 3, 3),  # c = w: the plain causal triangle
    (3, 2 + 3, 5),  # c = w, with a prefix
    (4, 4, 10),  # c < w
    (1, 10, 4),  # decode past the window: min(c, w)
    (1, 3, 4),  # decode inside the window
    (1, 4, 4),  # decode at the window
    (6, 10, 4),  # first query at 5 >= w: all capped
    (6, 9, 4),  # first query at 4 = w: all capped, at the boundary
    (6, 8, 4),  # first query at 3 < w < c: mixed
    (6, 6, 4),  # no prefix, mixed
    (4096, 4096, 4096),
    (131072, 131072, 4096),  # long prefill under a window
    (1, 131072, 4096),
]


@pytest.mark.parametrize(("s", "c", "w"), EDGE_CASES)
def test_window_pairs_edge_cases(con, s, c, w):
    expected = window_pairs_int(s, c, w)
    assert expected == brute_window_pairs(s, c, w)
    assert sql_window_pairs(con, [(s, c, w)]) == [expected]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 4096),  # s
            st.integers(0, 200_000),  # prefix: c = prefix + s
            st.integers(1, 8192),  # w
        ),
        min_size=1,
        max_size=64,
    )
)
def test_window_pairs_macro_equals_reference(con, raw):
    cases = [(s, prefix + s, w) for s, prefix, w in raw]
    assert sql_window_pairs(con, cases) == [window_pairs_int(*case) for case in cases]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(0, 40), st.integers(1, 45))
def test_window_pairs_reference_is_the_sum(s, prefix, w):
    assert window_pairs_int(s, prefix + s, w) == brute_window_pairs(s, prefix + s, w)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(FACTORS),
            st.integers(1, 10_000),  # argument (window, ratio); 0 for none
            st.integers(1, 4096),  # s
            st.integers(0, 200_000),  # prefix
        ),
        min_size=1,
        max_size=64,
    )
)
def test_term_factor_macro_equals_factor_value(con, raw):
    cases = [(name, 0 if name == "none" else arg, s, prefix + s) for name, arg, s, prefix in raw]
    con.execute("create or replace temp table tf_cases (i bigint, f varchar, a bigint, s bigint, c bigint)")
    con.executemany("insert into tf_cases values (?, ?, ?, ?, ?)", [(i, *case) for i, case in enumerate(cases)])
    got = [r[0] for r in con.execute("select term_factor(f, a, s, c) from tf_cases order by i").fetchall()]
    assert got == [factor_value(*case) for case in cases]


@pytest.mark.parametrize(
    ("factor", "arg", "s", "c", "expected"),
    [
        ("none", 0, 7, 9, 1),
        ("min_c", 4, 1, 2, 2),
        ("min_c", 4, 1, 10, 4),
        ("ceil_c_div", 4, 1, 10, 3),  # 10 tokens compressed by 4 keep 3 positions
        ("ceil_c_div", 4, 1, 8, 2),
        ("ceil_c_div", 4, 1, 1, 1),
        ("ceil_c_div", 1, 1, 5, 5),
        ("window_pairs", 4, 6, 6, 18),  # 1 + 2 + 3 + 4 + 4 + 4
        ("chunk_len", 4, 1, 4, 4),  # the 4th token closes its chunk: 4 keys
        ("chunk_len", 4, 1, 5, 1),  # the 5th opens the next chunk: itself only
        ("chunk_len", 8192, 1, 20_000, 3616),
        ("chunk_pairs", 4, 6, 6, 13),  # 1 + 2 + 3 + 4 | 1 + 2
        ("chunk_pairs", 4, 3, 7, 6),  # positions 5, 6, 7: 1 + 2 + 3
        ("chunk_pairs", 4, 1, 8, 4),  # decode at the end of a chunk
    ],
)
def test_term_factor_hand_values(con, factor, arg, s, c, expected):
    assert factor_value(factor, arg, s, c) == expected
    assert con.execute("select term_factor(?, ?::bigint, ?::bigint, ?::bigint)", [factor, arg, s, c]).fetchone() == (
        expected,
    )


def test_unknown_factor_is_an_error(con):
    with pytest.raises(duckdb.Error, match="unknown term factor 'min_w'"):
        con.execute("select term_factor('min_w', 4::bigint, 1::bigint, 10::bigint)").fetchall()


# -- evaluate_terms against the views' evaluation of the same rows -------------------------

MODEL = "terms-only"
NODES = ("a", "b")


@pytest.fixture(scope="module")
def terms_db(tmp_path_factory):
    """A store with one model of two nodes (one copy each) and no terms yet."""

    def table(name, rows):
        schema = TABLES[name]
        return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)

    tables = {
        "models": table("models", [(MODEL, "x/y", "m.yaml", "m.json", "0" * 64)]),
        "nodes": table(
            "nodes",
            [(MODEL, ph, uid, None, None, uid, "linear", "ffn", "c") for ph in ("prefill", "decode") for uid in NODES],
        ),
        "instances": table("instances", [(MODEL, uid, 1, 1) for uid in NODES]),
    }
    path = tmp_path_factory.mktemp("terms") / "store.duckdb"
    store.write_store(path, tables)
    con = store.connect(path, read_only=False)
    yield con
    con.close()


TERM = st.tuples(
    st.sampled_from(NODES),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),  # coef
    st.integers(0, 2),  # e_B
    st.integers(0, 2),  # e_s
    st.integers(0, 2),  # e_c
    st.sampled_from(FACTORS),
    st.integers(1, 8192),  # factor argument
)
WORKLOAD = st.tuples(
    st.sampled_from(("prefill", "decode")),
    st.integers(1, 256),  # batch
    st.integers(1, 8192),  # new tokens (prefill; decode uses 1)
    st.integers(0, 131_072),  # prefix
)


@settings(max_examples=40, deadline=None)
@given(st.lists(TERM, min_size=1, max_size=12), st.lists(WORKLOAD, min_size=1, max_size=6))
def test_views_evaluate_terms_like_evaluate_terms(terms_db, terms, workloads):
    rows = [
        (MODEL, phase, uid, "flops", coef, eb, es, ec, name, 0 if name == "none" else arg, None)
        for phase in ("prefill", "decode")
        for uid, coef, eb, es, ec, name, arg in terms
    ]
    wl = []
    for i, (phase, batch, s, prefix) in enumerate(workloads):
        s = 1 if phase == "decode" else s
        wl.append((f"w{i}", phase, batch, s, prefix + s))
    con = terms_db
    con.execute("delete from terms")
    con.execute("delete from workloads")
    con.register("new_terms", pa.Table.from_pylist([dict(zip(TABLES["terms"].names, r, strict=True)) for r in rows]))
    con.execute("insert into terms select * from new_terms")
    con.unregister("new_terms")
    con.executemany("insert into workloads (workload, phase, batch, new_tokens, context) values (?, ?, ?, ?, ?)", wl)
    got = dict(con.execute("select workload, flops from flops").fetchall())
    for name, phase, batch, s, c in wl:
        term_rows = [r[4:10] for r in rows if r[1] == phase]  # coef … factor_arg (not port)
        expected = evaluate_terms(term_rows, batch, s, c)
        scale = evaluate_terms([(abs(r[0]), *r[1:]) for r in term_rows], batch, s, c)
        assert abs(got[name] - expected) <= 1e-12 * max(scale, 1.0), (name, got[name], expected)


# -- chunk_len / chunk_pairs: chunked local attention (a query sees its own chunk) -----------


def brute_chunk_pairs(s: int, c: int, chunk: int) -> int:
    """Count (query, key) pairs directly: the query at 0-based position q sees the keys k
    with k // chunk == q // chunk and k <= q (transformers' chunked causal mask)."""
    import numpy as np

    keys = np.arange(c)
    total = 0
    for start in range(c - s, c, 1024):  # the mask, a block of query rows at a time
        q = np.arange(start, min(start + 1024, c))[:, None]
        total += int(np.count_nonzero((keys[None, :] <= q) & (keys[None, :] // chunk == q // chunk)))
    return total


def sql_chunk(con, cases: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    con.execute("create or replace temp table ch_cases (i bigint, s bigint, c bigint, w bigint)")
    con.executemany("insert into ch_cases values (?, ?, ?, ?)", [(i, *case) for i, case in enumerate(cases)])
    return con.execute("select chunk_pairs(s, c, w), chunk_len(c, w) from ch_cases order by i").fetchall()


# (s, c, chunk): inside one chunk, across boundaries, exactly on them, chunk 1, long prefills
CHUNK_EDGE_CASES = [
    (1, 1, 1),
    (5, 5, 1),  # chunk 1: every query sees itself only
    (3, 3, 3),  # one full chunk
    (4, 4, 10),  # inside the first chunk: the plain causal triangle
    (1, 10, 4),  # decode, 2 keys into the third chunk
    (1, 8, 4),  # decode at a chunk's end
    (1, 9, 4),  # decode opening a chunk
    (6, 10, 4),  # prefix 4 = one chunk; the step fills chunk 2 and opens chunk 3
    (3, 7, 4),
    (9, 9, 4),  # two full chunks and one more query
    (8192, 8192, 8192),
    (20_000, 20_000, 8192),
    (1, 131_072, 8192),
    (4096, 131_072, 8192),
]


@pytest.mark.parametrize(("s", "c", "chunk"), CHUNK_EDGE_CASES)
def test_chunk_factors_edge_cases(con, s, c, chunk):
    expected = chunk_pairs_int(s, c, chunk)
    if c <= 20_000:
        assert expected == brute_chunk_pairs(s, c, chunk)
    assert expected == sum(chunk_len_int(j, chunk) for j in range(c - s + 1, c + 1))
    assert sql_chunk(con, [(s, c, chunk)]) == [(expected, chunk_len_int(c, chunk))]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(0, 40), st.integers(1, 45))
def test_chunk_pairs_reference_is_the_masked_count(s, prefix, chunk):
    assert chunk_pairs_int(s, prefix + s, chunk) == brute_chunk_pairs(s, prefix + s, chunk)
    assert chunk_len_int(prefix + s, chunk) == brute_chunk_pairs(1, prefix + s, chunk)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 4096),  # s
            st.integers(0, 200_000),  # prefix: c = prefix + s
            st.integers(1, 16_384),  # chunk
        ),
        min_size=1,
        max_size=64,
    )
)
def test_chunk_macros_equal_reference(con, raw):
    cases = [(s, prefix + s, chunk) for s, prefix, chunk in raw]
    assert sql_chunk(con, cases) == [(chunk_pairs_int(*case), chunk_len_int(case[1], case[2])) for case in cases]
