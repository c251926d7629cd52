"""Issue 19, classes 1 and 2, for the parameter tables: keys refuse a row given twice, a row
outside its domain is named in ``parameter_checks`` ("invalid: reason") and left out of every
answer, and no invalid row changes or breaks another row's answer.  Every input is built here,
in a one-model store (Meta-Llama-3.1-8B, one deployment, two workloads)."""

from __future__ import annotations

import shutil

import duckdb
import pytest
from click.testing import CliRunner

from archsql import api
from archsql.cli import cli
from archsql.errors import QueryError, StoreError
from archsql.store import insert_deployments, insert_rows, keep_deployments, refresh

MODEL = "Meta-Llama-3.1-8B"
DEPLOYMENT = "1xH200-single"
WORKLOADS = ("decode_b1_c2k", "prefill_2k")
# a valid deployment row; each bad one below changes one field
GOOD = {
    "gpu": "H200 SXM",
    "gpus": 1,
    "cp_kind": "none",
    "weight_dtype": "bf16",
    "act_dtype": "bf16",
    "kv_dtype": "bf16",
    "usable_memory_fraction": 0.9,
    "weight_profile": "bf16",
}
ANSWER = """
select s.deployment, s.workload, s.time_s, s.tokens_per_s, m.fits, m.max_batch, m.usable_bytes, m.weight_bytes
from step_sol as s
join device_memory as m on m.model = s.model and m.deployment = s.deployment and m.workload = s.workload
where s.model = ? order by 1, 2
"""


@pytest.fixture(scope="module")
def small_template(store_of, tmp_path_factory):
    """The one-model store cut to DEPLOYMENT and WORKLOADS, made once per module."""
    db = tmp_path_factory.mktemp("small") / "store.duckdb"
    shutil.copy(store_of(MODEL), db)
    con = duckdb.connect(str(db))
    keep_deployments(con, [DEPLOYMENT])
    con.execute("delete from workloads where workload not in (select unnest(?::varchar[]))", [list(WORKLOADS)])
    con.close()
    return db


@pytest.fixture
def small_db(small_template, tmp_path):
    """A private copy of the cut store (each test writes to its own)."""
    db = tmp_path / "store.duckdb"
    shutil.copy(small_template, db)
    return db


# ---------------------------------------------------------------------------- keys


def test_a_row_given_twice_is_refused_by_the_key(small_db):
    """The README's inserts run twice: DuckDB's primary key refuses the second (it used to
    double the row: step time x4, max_batch 25 -> 6)."""
    con = duckdb.connect(str(small_db))
    row = "('decode_b32_c32k', 'decode', 32, 1, 32768)"
    con.execute(f"insert into workloads values {row}")
    with pytest.raises(duckdb.ConstraintException, match="decode_b32_c32k"):
        con.execute(f"insert into workloads values {row}")
    deployment = (
        "insert into deployments (deployment, gpu, gpus, cp_kind, weight_dtype, act_dtype, kv_dtype, "
        "usable_memory_fraction, weight_profile) values ('1xH200-single', 'H200 SXM', 1, 'none', 'bf16', "
        "'bf16', 'bf16', 0.9, 'bf16')"
    )
    with pytest.raises(duckdb.ConstraintException, match="1xH200-single"):
        con.execute(deployment)
    assert con.execute("select count(*) from deployments").fetchall() == [(1,)]


def test_archsqls_own_inserts_name_the_repeated_key(small_db):
    con = duckdb.connect(str(small_db))
    with pytest.raises(StoreError, match=r"table 'workloads' already has a row of that key \(workload\)") as err:
        insert_rows(con, "workloads", [{"workload": "prefill_2k", "phase": "prefill", "batch": 1}])
    assert "key (workload) = ('prefill_2k') is already in the table" in str(err.value)
    twice = [{"workload": "w", "phase": "decode", "batch": 1, "new_tokens": 1, "context": 8}] * 2
    with pytest.raises(StoreError, match=r"key \(workload\) = \('w'\) appears 2 times"):
        insert_rows(con, "workloads", twice)
    with pytest.raises(StoreError, match=r"key \(deployment\) = \('1xH200-single'\) is already in the table"):
        insert_deployments(con, [{**GOOD, "deployment": DEPLOYMENT, "tp": 1}])
    # nothing of a refused insert stays
    assert con.execute("select count(*) from workloads").fetchall() == [(len(WORKLOADS),)]
    assert con.execute("select count(*) from deployment_mesh where deployment = 'w'").fetchall() == [(0,)]


def test_a_model_given_twice_is_evaluated_once():
    """`archsql build M M` stored every row of M twice: 8.03 B params read as 60 B."""
    tables, _ = api.evaluate_all([MODEL, MODEL])
    assert tables["models"].column("model").to_pylist() == [MODEL]
    once, _ = api.evaluate_all([MODEL])
    assert tables["weights"].num_rows == once["weights"].num_rows


def test_a_spec_named_like_a_catalog_model_needs_replace_catalog(tmp_path):
    from archsql.specs import default_library

    path = default_library().model_path(MODEL)
    text = path.read_text(encoding="utf-8")
    config = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("config:"))
    mine = tmp_path / "mine.yaml"
    mine.write_text(text.replace(f"config: {config}", f"config: {path.parent.parent / 'configs' / config}"))
    with pytest.raises(QueryError, match=f"names its model '{MODEL}', a catalog model") as err:
        api.evaluate_all([str(mine)])
    assert "--replace-catalog" in str(err.value)
    tables, _ = api.evaluate_all([str(mine)], replace_catalog=True)
    assert tables["models"].column("model").to_pylist() == [MODEL]
    other = tmp_path / "other.yaml"
    other.write_text(mine.read_text().replace(f"model: {MODEL}", "model: my-llama"))
    with pytest.raises(QueryError, match="model 'my-llama' is given twice in one build"):
        api.evaluate_all([str(other), str(shutil.copy(other, tmp_path / "again.yaml"))])


# ---------------------------------------------------------------------------- domains


BAD_WORKLOADS = [
    # (row, rule, problem)
    (("batch0", "decode", 0, 1, 2048), "batch", "batch 0 is outside 1 .. 1048576"),
    (("negbatch", "decode", -5, 1, 2048), "batch", "batch -5 is outside 1 .. 1048576"),
    (("negctx", "decode", 1, 1, -1), "context", "context -1 is outside 1 .. 16777216"),
    (("new_over_ctx", "prefill", 1, 4096, 2048), "new tokens in context", "new_tokens 4096 exceeds context 2048"),
    (("typo", "decod", 1, 1, 2048), "phase", "unknown phase 'decod'"),
    (("nulls", "decode", None, 1, 2048), "batch", "batch null is outside 1 .. 1048576"),
    (("huge", "decode", 2**40, 1, 2048), "batch", "batch 1099511627776 is outside 1 .. 1048576"),
]
BAD_IMAGES = [
    (("negimg", -100), "image patches", "image_patches -100 is outside 0 .. 1048576"),
    (("hugeimg", 10**12), "image patches", "image_patches 1000000000000 is outside 0 .. 1048576"),
]
BAD_DEPLOYMENTS = [
    # (changed fields, rule, problem)
    ({"usable_memory_fraction": 1.5}, "memory fraction", "usable_memory_fraction 1.5 is outside (0, 1]"),
    ({"usable_memory_fraction": -1.0}, "memory fraction", "usable_memory_fraction -1.0 is outside (0, 1]"),
    ({"gpu": "H900"}, "gpu", "unknown GPU 'H900'"),
    ({"weight_profile": "bf17"}, "weight profile", "unknown weight_profile bf17"),
    ({"kv_dtype": None}, "dtype", "unknown dtype in weight/act/kv: bf16, bf16, null"),
    ({"tp": 0}, "degrees", "tp degree 0 is outside 1 .. 1048576"),
    ({"gpus": 0, "dp": 0}, "degrees", "gpus 0 is outside 1 .. 1048576"),
    ({"speculative_tokens": -2}, "speculative tokens", "speculative_tokens -2 is below 0"),
    # no fraction of its own and no framework whose default applies: before, device_memory
    # answered with usable_bytes null and `fits` null, unflagged
    ({"usable_memory_fraction": None}, "memory fraction", "no usable_memory_fraction and no framework to take it from"),
]


def test_invalid_rows_are_flagged_and_every_other_answer_is_unchanged(small_db):
    """Every bad row at once: each is named in parameter_checks with its rule and values and
    has no answer; the valid deployment x workloads answer exactly as before.  Before this,
    batch 0 gave 0 tokens/s, batch -5 negative tokens/s, a 1.5 fraction `fits` with 211 GB on
    a 141 GB GPU, and one tp = 0 deployment made device_memory fail for every model."""
    con = duckdb.connect(str(small_db))
    before = con.execute(ANSWER, [MODEL]).fetchall()
    assert [(r[0], r[1]) for r in before] == [(DEPLOYMENT, w) for w in sorted(WORKLOADS)]
    con.executemany("insert into workloads values (?, ?, ?, ?, ?)", [list(r) for r, _, _ in BAD_WORKLOADS])
    con.executemany("insert into workloads values (?, 'prefill', 1, 8, 8)", [[r[0]] for r, _, _ in BAD_IMAGES])
    con.executemany("insert into workload_images values (?, ?)", [list(r) for r, _, _ in BAD_IMAGES])
    names = [f"bad{i}" for i in range(len(BAD_DEPLOYMENTS))]
    insert_deployments(
        con, [{**GOOD, "deployment": n, **change} for n, (change, _, _) in zip(names, BAD_DEPLOYMENTS, strict=True)]
    )

    # the derived tables computed again with the bad rows in (each view once, by its own SQL,
    # as a build does), so the reads below are table scans, not the live chains run per query
    refresh(con)
    checks = con.execute("select name, rule, problem from parameter_checks").fetchall()
    for row, rule, problem in BAD_WORKLOADS + BAD_IMAGES:
        assert (row[0], rule, problem) in checks, (row, checks)
    for name, (_, rule, problem) in zip(names, BAD_DEPLOYMENTS, strict=True):
        assert (name, rule, problem) in checks, (name, checks)
    bad = {row[0] for row, _, _ in BAD_WORKLOADS + BAD_IMAGES} | set(names)
    assert {n for n, _, _ in checks} == bad  # nothing valid is flagged
    assert {d for (d,) in con.execute("select deployment from deployment_checks").fetchall()} == set(names)

    after = con.execute(ANSWER, [MODEL]).fetchall()
    # the same rows, the same figures (to the last bits of a float sum), no error
    assert [r[:2] for r in after] == [r[:2] for r in before]
    assert [r[2:] for r in after] == [pytest.approx(r[2:], rel=1e-12) for r in before]
    for view, column in (("flops", "workload"), ("step_sol", "deployment"), ("device_memory", "workload")):
        answered = {v for (v,) in con.execute(f"select distinct {column} from {view}").fetchall()}
        assert not answered & bad, view


def test_a_bad_gpu_row_leaves_its_deployments_out(small_db):
    """A GPU row with a zero bandwidth is named; deployments on it are invalid with it."""
    con = duckdb.connect(str(small_db))
    con.execute("insert into gpus (gpu, memory_capacity, mem_bandwidth_TBps) values ('zero-bw', 80, 0)")
    insert_deployments(con, [{**GOOD, "deployment": "on-zero-bw", "gpu": "zero-bw"}])
    checks = con.execute("select parameter_table, name, rule, problem from parameter_checks order by 1").fetchall()
    assert checks == [
        ("deployments", "on-zero-bw", "gpu", "GPU 'zero-bw' is invalid (its gpus row: parameter_checks)"),
        ("gpus", "zero-bw", "gpu figure", "mem_bandwidth_TBps is 0.0"),
    ]
    assert con.execute("select count(*) from base_gpus where gpu = 'zero-bw'").fetchall() == [(0,)]


# ---------------------------------------------------------------------------- surfacing


def test_sql_warns_about_the_rows_left_out(small_db):
    con = duckdb.connect(str(small_db))
    con.execute("insert into workloads values ('batch0', 'decode', 0, 1, 2048)")
    con.close()
    result = CliRunner().invoke(cli, ["--db", str(small_db), "sql", "select 1 as x"])
    assert result.exit_code == 0, result.output
    assert "warning: 1 parameter row left out of every answer" in result.stderr
    assert "workloads 'batch0': invalid: batch 0 is outside 1 .. 1048576" in result.stderr
    assert "warning" not in result.stdout


def test_sweep_refuses_a_row_the_views_would_leave_out(small_db):
    from archsql.sweep import grid, sweep

    deployments, workloads = grid(["H200 SXM"], [1], batch=[2**21], context=[2048])
    with pytest.raises(QueryError, match=r"invalid sweep rows: sweep:decode:b2097152:c2048: batch 2097152"):
        sweep(MODEL, small_db, deployments, workloads)
