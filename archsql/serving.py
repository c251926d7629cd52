"""Serving estimates: TTFT and TPOT of a model served by a framework version at a client
concurrency (aggregated in-flight batching, or disaggregated prefill/decode pools; docs/serving.md).

All the arithmetic is SQL: ``int_serving_steps`` turns a ``serving_cases`` row into the two
steps its schedule is made of (a prefill step of the framework's token budget and a decode
step of the clients' batch, as workload shapes), ``serving_admission`` caps the running batch
by the KV cache (``device_memory``) and the framework's request cap and names its decode step,
``serving_step_times`` prices the steps from ``op_sol`` with the fitted constants of
``serving_constants``, and ``serving_estimates`` composes TTFT (with the queue wait of the
requests not admitted) and TPOT; a disaggregated case (a prefill deployment) prices its prefill
step on the prefill deployment, sends the KV cache of its prompt (``kv_per_request``) over the
link between the pools and matches the pools' request rates.  Python does only what SQL cannot: checks the question (a located
error for what cannot be expressed), writes the cases and the workloads the steps name into
the store's parameter tables inside a transaction it rolls back, and evaluates ``op_sol``
one (model, deployment) at a time (:func:`archsql.store.scope`), because the live view
evaluates every model × deployment × workload of its scope and the steps of many cases would
otherwise be priced on every deployment.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa

from archsql.errors import Issue, QueryError, did_you_mean

ESTIMATE_COLUMNS = (
    "serving_case, model, deployment, gpu, framework, version, version_assumed, isl, osl, concurrency, dp, "
    "draft_tokens, acceptance_rate, max_batched_tokens, mixed_steps, dp_contexts_aligned, kv_admission, "
    "max_running_requests, "
    "rank_requests, kv_requests, admitted_requests, chunk, chunks, "
    "step_requests, prefill_groups, mean_group, prefill_workload, decode_workload, prefill_step_s, "
    "prefill_step_sol_s, prefill_token_s, decode_step_s, decode_step_sol_s, tokens_per_decode_step, "
    "first_wave_share, request_overhead_s, stall_steps, wave_ttft_s, wave_tpot_s, arrivals_per_step, steady_step_s, steady_ttft_s, "
    "steady_tpot_s, service_ttft_s, queue_wait_s, ttft_s, tpot_s, ttft_definition, tpot_definition, metric_mean, "
    "request_latency_s, output_tokens_per_s, serving_mode, prefill_deployment, prefill_gpu, prefill_dp, "
    "prefill_instances, decode_instances, kv_transfer_bytes, kv_link_bytes_per_s, kv_link_latency_s, kv_link_source, "
    "kv_transfer_s, prefill_pool_rate, decode_pool_rate, request_rate, limiting_pool, prefill_utilisation, "
    "decode_utilisation"
)
# the op_sol columns the step times read
_OP_COLUMNS = "model, deployment, workload, uid, runs, compute_s, memory_s, comm_s, time_s"
# the device_memory columns serving_estimates reads (the KV capacity of a rank)
_CAPACITY_COLUMNS = (
    "model, deployment, workload, batch, weight_bytes, kv_bytes, activation_bytes, memory_bytes, max_batch_per_dp_rank"
)


def check_cases(con: duckdb.DuckDBPyConnection, cases: list[Mapping[str, object]]) -> dict[str, list[Issue]]:
    """What in each case cannot be expressed, by case name: unknown model, deployment (or one
    archsql rejects), framework or framework version, a count out of range; for a
    disaggregated case (a prefill_deployment) the same of its prefill deployment, pools whose
    KV caches differ in dtype, and a link archsql has no figure for."""
    models = {m for (m,) in con.execute("select model from models").fetchall()}
    deployments = {d for (d,) in con.execute("select deployment from deployments").fetchall()}
    rejected = dict(con.execute("select deployment, problem from deployment_checks").fetchall())
    from archsql.schema.serving import CONSTANT_SCOPES

    gpu_of = dict(con.execute("select deployment, gpu from deployments").fetchall())
    kv_dtype_of = dict(con.execute("select deployment, kv_dtype from base_deployments").fetchall())
    nic = dict(con.execute("select gpu, scaleout_bytes_per_s from int_gpu_specs where dtype = 'bf16'").fetchall())
    generation = dict(con.execute("select gpu, generation from serving_gpu_generations").fetchall())
    constants = set(con.execute("select constant, applies_to from serving_constants").fetchall())
    versions: dict[str, set[str]] = defaultdict(set)
    for fw, ver in con.execute("select framework, version from serving_frameworks").fetchall():
        versions[fw].add(ver)
    found: dict[str, list[Issue]] = {}
    for case in cases:
        issues = found.setdefault(str(case.get("serving_case")), [])
        where = f"case {case.get('serving_case')!r}"
        model, dep, fw = case.get("model"), case.get("deployment"), case.get("framework")
        prefill = case.get("prefill_deployment")
        ver = case.get("version") or "*"
        if model not in models:
            issues.append(
                Issue(
                    f"{where}: model {model!r} is not in the store",
                    hint=did_you_mean(str(model), sorted(models)) or f"run `archsql build {model}` first",
                )
            )
        pools = [("deployment", dep)] + ([("prefill deployment", prefill)] if prefill is not None else [])
        usable = []
        for label, name in pools:
            if name not in deployments:
                issues.append(
                    Issue(f"{where}: no {label} {name!r}", hint=did_you_mean(str(name), sorted(deployments)) or None)
                )
            elif name in rejected:
                issues.append(Issue(f"{where}: {label} {name!r} is rejected: {rejected[name]}"))
            elif gpu_of[name] not in generation:
                issues.append(
                    Issue(
                        f"{where}: GPU {gpu_of[name]!r} has no serving constants (no GPU generation; {label} {name!r})",
                        hint="add it to archsql/specs/serving/gpu_generations.csv and fit its constants "
                        "(benchmarks/bench_silicon.py --fit)",
                    )
                )
            else:
                usable.append(name)
                if fw in versions:
                    scope = {"generation": generation[gpu_of[name]], "framework": fw}
                    missing = [c for c, kind in CONSTANT_SCOPES.items() if (c, scope[kind]) not in constants]
                    if missing:
                        issues.append(
                            Issue(
                                f"{where}: the store's serving_constants lack {', '.join(missing)} for "
                                f"{generation[gpu_of[name]]} / {fw}",
                                hint="rebuild the store (`archsql build`) to load archsql/specs/serving/constants.csv",
                            )
                        )
        issues += _disaggregation_issues(case, where, usable, gpu_of, kv_dtype_of, nic)
        if fw not in versions:
            issues.append(
                Issue(
                    f"{where}: no serving facts for framework {fw!r}",
                    hint=did_you_mean(str(fw), sorted(versions)) or f"known: {', '.join(sorted(versions))}",
                )
            )
        elif ver not in versions[fw]:
            known = sorted(versions[fw] - {"*"})
            issues.append(
                Issue(
                    f"{where}: no serving facts for {fw} version {ver!r}",
                    hint=f"known versions: {', '.join(known)} (or {fw}@* when the version is not known); "
                    "add a row to archsql/specs/serving/frameworks.csv with its source",
                )
            )
        for field in ("isl", "osl", "concurrency"):
            value = case.get(field)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**24:
                issues.append(Issue(f"{where}: {field} must be an integer in 1 .. 2^24", got=repr(value)))
        rate = case.get("acceptance_rate")
        if rate is not None and not (isinstance(rate, int | float) and 0 <= rate <= 1):
            issues.append(Issue(f"{where}: acceptance_rate must be in [0, 1]", got=repr(rate)))
    return {name: issues for name, issues in found.items() if issues}


def prepare(con: duckdb.DuckDBPyConnection, cases: list[Mapping[str, object]]) -> list[dict]:
    """Write ``cases`` and the workloads their steps need (workloads already present are
    reused) on a writable connection; return the step rows (``int_serving_steps``).  A case
    that cannot be expressed is a :class:`QueryError` listing every problem of every case."""
    from archsql.store import insert_rows

    problems = check_cases(con, cases)
    if problems:
        raise QueryError("cannot estimate these serving cases", issues=[i for v in problems.values() for i in v])
    insert_rows(con, "serving_cases", [dict(c) for c in cases])
    steps = con.sql(
        "select * from int_serving_steps where serving_case in (select unnest(?::varchar[]))",
        params=[[c["serving_case"] for c in cases]],
    ).to_arrow_table()
    missing = sorted({c["serving_case"] for c in cases} - set(steps.column("serving_case").to_pylist()))
    if missing:  # a framework row exists but none holds for the GPU's memory
        raise QueryError(
            "no serving facts hold for the GPU of these cases: " + ", ".join(missing),
            issues=[Issue("add a frameworks.csv row with a lower min_gpu_memory_gib")],
        )
    rows = steps.to_pylist()
    present = {w for (w,) in con.execute("select workload from workloads").fetchall()}
    wanted: dict[str, dict] = {}
    for r in rows:
        for name, batch, new, ctx, phase in (
            (r["prefill_workload"], r["prefill_batch"], r["chunk"], r["prefill_context"], "prefill"),
            (r["decode_workload"], r["decode_batch"], r["decode_new_tokens"], r["decode_context"], "decode"),
            # disaggregated: one request's whole prompt, the KV cache the link carries
            (r["kv_workload"], 1, r["isl"], r["isl"], "prefill"),
        ):
            if name is None:
                continue
            if name not in present:
                wanted[name] = dict(workload=name, phase=phase, batch=batch, new_tokens=new, context=ctx)
    if wanted:
        insert_rows(con, "workloads", list(wanted.values()))
    return rows


def price_steps(
    con: duckdb.DuckDBPyConnection,
    steps: Iterable[Mapping[str, object]],
    *,
    priced: pa.Table | None = None,
    capacity: pa.Table | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Evaluate ``op_sol`` for the steps of ``steps`` and ``device_memory``'s batch capacity
    for their decode steps, one (model, deployment) scope at a time, into temporary tables
    ``op_sol`` and ``device_memory`` that then shadow the views on ``con`` (only the columns the
    serving views read; a prefill step on the deployment that runs it), and ``kv_per_request``
    of the disaggregated cases' prompts likewise; returns the first two's rows.  ``priced`` / ``capacity``: such rows evaluated
    before, whose (model, deployment, workload) steps are not evaluated again (capacity rows of
    other columns than ``_CAPACITY_COLUMNS`` are ignored).  Drop the tables
    with :func:`release`."""
    from archsql.store import scope
    from archsql.views import computed_once

    steps = list(steps)
    con.execute(
        "create or replace temp table serving_op_rows (model varchar, deployment varchar, workload varchar, "
        "uid varchar, runs double, compute_s double, memory_s double, comm_s double, time_s double)"
    )
    con.execute(
        "create or replace temp table serving_capacity_rows (model varchar, deployment varchar, workload varchar, "
        "batch bigint, weight_bytes double, kv_bytes double, activation_bytes double, memory_bytes double, "
        "max_batch_per_dp_rank double)"
    )
    done: set = set()
    if priced is not None:
        con.execute("insert into serving_op_rows select * from priced")
        done = set(con.execute("select distinct model, deployment, workload from serving_op_rows").fetchall())
    held_before: set = set()
    # capacity rows of another column set (written before the columns were added) are priced again
    if capacity is not None and capacity.column_names == [c.strip() for c in _CAPACITY_COLUMNS.split(",")]:
        con.execute("insert into serving_capacity_rows select * from capacity")
        held_before = set(con.execute("select model, deployment, workload from serving_capacity_rows").fetchall())
    by_pair: dict[tuple[str, str], set[str]] = defaultdict(set)
    decodes: dict[tuple[str, str], set[str]] = defaultdict(set)
    kv: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in steps:
        pair = (s["model"], s["deployment"])
        if (*pair, s["decode_workload"]) not in held_before:
            decodes[pair].add(s["decode_workload"])
        # the prefill step on the deployment that runs it (disaggregated: the prefill pool's)
        for dep, w in ((s["prefill_deployment"], s["prefill_workload"]), (s["deployment"], s["decode_workload"])):
            if (s["model"], dep, w) not in done:
                by_pair[(s["model"], dep)].add(w)
        if s["kv_workload"] is not None:
            kv[pair].add(s["kv_workload"])
    for (model, deployment), workloads in sorted(by_pair.items()):
        scope(con, models=[model], deployments=[deployment], workloads=sorted(workloads))
        with computed_once(con, views={"op_sol"}):
            con.execute(f"insert into serving_op_rows select {_OP_COLUMNS} from op_sol")
        _unscope(con)
    # the requests one attention-DP rank's memory holds at the decode step's context (a scope
    # of the decode steps only: device_memory's activation peak is per workload)
    for (model, deployment), held in sorted(decodes.items()):
        scope(con, models=[model], deployments=[deployment], workloads=sorted(held))
        con.execute(f"insert into serving_capacity_rows select {_CAPACITY_COLUMNS} from device_memory")
        _unscope(con)
    con.execute("create or replace temp table device_memory as select * from serving_capacity_rows")
    # disaggregated: the KV bytes of one request's whole prompt (kv_per_request, every dtype),
    # which serving_estimates reads at the decode deployment's KV dtype
    con.execute(
        "create or replace temp table serving_kv_rows (model varchar, workload varchar, dtype varchar, "
        "bytes_per_request double)"
    )
    for (model, deployment), workloads in sorted(kv.items()):
        scope(con, models=[model], deployments=[deployment], workloads=sorted(workloads))
        con.execute("insert into serving_kv_rows select model, workload, dtype, bytes_per_request from kv_per_request")
        _unscope(con)
    con.execute("create or replace temp table kv_per_request as select * from serving_kv_rows")
    con.execute("drop table serving_kv_rows")
    # second pass: the decode step of the batch a rank admits (serving_admission), where its KV
    # cache or the request cap holds fewer requests than its clients send
    from archsql.store import insert_rows

    running = con.execute(
        "select distinct a.model, a.deployment, a.running_workload, a.running_batch, a.running_new_tokens, "
        "a.decode_context from serving_admission as a where a.serving_case in (select unnest(?::varchar[])) "
        "and not exists (select 1 from serving_op_rows as o where o.model = a.model "
        "and o.deployment = a.deployment and o.workload = a.running_workload)",
        [sorted({s["serving_case"] for s in steps})],
    ).fetchall()
    present = {w for (w,) in con.execute("select workload from workloads").fetchall()}
    wanted = {
        w: dict(workload=w, phase="decode", batch=b, new_tokens=n, context=c)
        for _, _, w, b, n, c in running
        if w not in present
    }
    if wanted:
        insert_rows(con, "workloads", list(wanted.values()))
    again: dict[tuple[str, str], set[str]] = defaultdict(set)
    for model, deployment, w, *_ in running:
        again[(model, deployment)].add(w)
    for (model, deployment), workloads in sorted(again.items()):
        scope(con, models=[model], deployments=[deployment], workloads=sorted(workloads))
        with computed_once(con, views={"op_sol"}):
            con.execute(f"insert into serving_op_rows select {_OP_COLUMNS} from op_sol")
        _unscope(con)
    con.execute("create or replace temp table op_sol as select * from serving_op_rows")
    con.execute("drop table serving_op_rows")
    con.execute("drop table serving_capacity_rows")
    return (
        con.sql("select * from temp.main.op_sol").to_arrow_table(),
        con.sql("select * from temp.main.device_memory").to_arrow_table(),
    )


def load_facts(con: duckdb.DuckDBPyConnection) -> None:
    """Rewrite the serving reference tables from ``archsql/specs/serving`` on ``con`` (a store
    built before the files changed; a build writes them too)."""
    from archsql.schema import serving as facts
    from archsql.specs import SERVING_DIR

    for name, table in (
        ("serving_frameworks", facts.serving_frameworks_table(SERVING_DIR)),
        ("serving_gpu_generations", facts.serving_gpu_generations_table(SERVING_DIR)),
        ("serving_constants", facts.serving_constants_table(SERVING_DIR)),
    ):
        con.register("serving_facts_rows", table)
        con.execute(f"delete from {name}")
        con.execute(f"insert into {name} by name select * from serving_facts_rows")
        con.unregister("serving_facts_rows")


def release(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("drop table if exists temp.main.op_sol")
    con.execute("drop table if exists temp.main.device_memory")
    con.execute("drop table if exists temp.main.kv_per_request")


def _unscope(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the temporary tables :func:`archsql.store.scope` made."""
    from archsql.ingest.tables import CHECKPOINT_TABLES
    from archsql.schema.tables import PARAMETER_TABLES, TABLES

    temp = {n for (n,) in con.execute("select table_name from duckdb_tables() where database_name = 'temp'").fetchall()}
    for name in {*TABLES, *PARAMETER_TABLES, *CHECKPOINT_TABLES} & temp:
        con.execute(f'drop table temp.main."{name}"')


def estimates(con: duckdb.DuckDBPyConnection, cases: Iterable[str]) -> pa.Table:
    """The ``serving_estimates`` rows of ``cases`` (after :func:`prepare` and :func:`price_steps`)."""
    return con.sql(
        f"select {ESTIMATE_COLUMNS} from serving_estimates where serving_case in (select unnest(?::varchar[])) "
        "order by serving_case",
        params=[sorted(set(cases))],
    ).to_arrow_table()


def estimate(db: str | Path, cases: list[Mapping[str, object]]) -> pa.Table:
    """TTFT and TPOT of each case (``serving_cases`` columns: serving_case, model, deployment,
    framework, version, isl, osl, concurrency, acceptance_rate); the store is left unchanged."""
    from archsql.store import connect

    if not cases:
        raise QueryError("no serving cases given")
    con = connect(Path(db), read_only=False, derived=False)
    try:
        con.begin()
        steps = prepare(con, cases)
        price_steps(con, steps)
        table = estimates(con, [c["serving_case"] for c in cases])
        release(con)
        con.rollback()
        return table
    finally:
        con.close()


def parse_framework(text: str) -> tuple[str, str]:
    """``sglang@0.5.9`` → ('sglang', '0.5.9'); ``sglang`` or ``sglang@*`` → ('sglang', '*')."""
    framework, _, version = text.partition("@")
    if not framework:
        raise QueryError(f"--framework {text!r}: expected FRAMEWORK@VERSION, e.g. sglang@0.5.9")
    return framework.strip().lower(), (version.strip() or "*")


def _disaggregation_issues(
    case: Mapping[str, object],
    where: str,
    usable: list[str],
    gpu_of: Mapping[str, str],
    kv_dtype_of: Mapping[str, str],
    nic: Mapping[str, float | None],
) -> list[Issue]:
    """What in a case's disaggregation fields (serving_cases.prefill_deployment and after)
    cannot be expressed: pool fields without a prefill pool, instance counts out of range, pools
    whose KV caches differ in dtype (no conversion on the way is modelled), a link of no
    bandwidth, or no link figure for a GPU (gpus.csv scaleout_nic_per_gpu_Gbps)."""
    issues: list[Issue] = []
    prefill = case.get("prefill_deployment")
    pool_fields = ("prefill_instances", "decode_instances", "kv_link_bytes_per_s", "kv_link_latency_s")
    if prefill is None:
        given = [f for f in pool_fields if case.get(f) is not None]
        if given:
            issues.append(
                Issue(
                    f"{where}: {', '.join(given)} describe a disaggregated case, which needs a prefill deployment",
                    hint="give the prefill pool's deployment (serve-estimate --prefill-deployment), "
                    "or leave them out for an aggregated case",
                )
            )
        return issues
    for field in ("prefill_instances", "decode_instances"):
        value = case.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**20):
            issues.append(Issue(f"{where}: {field} must be an integer in 1 .. 2^20", got=repr(value)))
    bandwidth, latency = case.get("kv_link_bytes_per_s"), case.get("kv_link_latency_s")
    if bandwidth is not None and not (isinstance(bandwidth, int | float) and bandwidth > 0):
        issues.append(Issue(f"{where}: kv_link_bytes_per_s must be a positive number", got=repr(bandwidth)))
    if latency is not None and not (isinstance(latency, int | float) and latency >= 0):
        issues.append(Issue(f"{where}: kv_link_latency_s must be a number >= 0", got=repr(latency)))
    decode = case.get("deployment")
    if decode in usable and prefill in usable:
        if kv_dtype_of[decode] != kv_dtype_of[prefill]:
            issues.append(
                Issue(
                    f"{where}: the prefill deployment {prefill!r} caches KV in {kv_dtype_of[prefill]}, the decode "
                    f"deployment {decode!r} in {kv_dtype_of[decode]}: converting the cache on the way is not modelled",
                    hint="give both pools the same kv_dtype",
                )
            )
        if bandwidth is None:
            for name in (prefill, decode):
                if nic.get(gpu_of[name]) is None:
                    issues.append(
                        Issue(
                            f"{where}: GPU {gpu_of[name]!r} has no scale-out NIC figure "
                            "(gpus.csv scaleout_nic_per_gpu_Gbps) to carry the KV cache between the pools",
                            hint="give the link (serve-estimate --kv-link-gbps)",
                        )
                    )
    return issues
