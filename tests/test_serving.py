"""Serving estimates (docs/serving.md): the in-flight-batching schedule derived by hand for a
tiny case, TPOT with MTP acceptance, the framework facts as data, and the error paths."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql import api, serving, store
from archsql.cli import cli
from archsql.errors import QueryError, SpecError
from archsql.schema.serving import serving_constants_table, serving_frameworks_table
from archsql.specs import SERVING_DIR

SILICON = Path(__file__).resolve().parents[2] / "shared" / "data" / "silicon" / "silicon_dev.csv"


def _copy(src: Path, tmp_path: Path, constants: dict, deployments: list[dict] = ()) -> Path:
    """A copy of a store with the serving constants set (every generation / framework) and
    extra deployments."""
    db = tmp_path / "store.duckdb"
    shutil.copy(src, db)
    con = store.connect(db, read_only=False)
    for name, value in constants.items():
        con.execute("update serving_constants set value = ? where constant = ?", [value, name])
    for row in deployments:
        row = dict(row)
        store.insert_deployments(con, [row], like=row.pop("like"))
    con.close()
    return db


def _case(**kw) -> dict:
    base = dict(
        serving_case="t",
        model="Meta-Llama-3.1-8B",
        deployment="1xH200-single",
        framework="vllm",
        version="0.12.0",
        isl=3000,
        osl=101,
        concurrency=10,
        acceptance_rate=None,
    )
    return {**base, **kw}


SOL = dict(
    compute_efficiency=1.0,
    memory_efficiency=1.0,
    comm_efficiency=1.0,
    comm_latency_s=0.0,
    kernel_floor_s=0.0,
    moe_efficiency=1.0,
    step_overhead_s=0.0,
    request_overhead_s=0.0,
    first_wave_share=1.0,
    eager_launch_s=0.0,
)


@pytest.fixture(scope="module")
def llama(store_of):
    return store_of("Meta-Llama-3.1-8B")


# the constants of the steady-schedule test: efficiencies, a kernel floor and an eager launch
# cost, a step and a request overhead, and a first-wave share of 1/4
STEADY = dict(
    SOL,
    compute_efficiency=0.5,
    memory_efficiency=0.8,
    kernel_floor_s=20e-6,
    eager_launch_s=50e-6,
    step_overhead_s=0.002,
    request_overhead_s=0.01,
    first_wave_share=0.25,
)

# every Llama-3.1-8B case the tests below ask about, estimated in one pass over one store
CASES = [
    _case(serving_case="ifb"),  # vLLM 0.12.0, isl 3000, osl 101, 10 clients
    _case(serving_case="sglang", framework="sglang", version="0.5.9"),
    _case(serving_case="chunked", isl=20000, concurrency=1),
    _case(serving_case="cap", version="0.15.1"),  # 10 clients, vLLM 0.15.1 capped at 4 (below)
    _case(serving_case="kv", version="0.11.2", concurrency=3000),  # 3000 clients, cap 1024
    _case(serving_case="reserve", framework="trtllm", version="1.2.0rc2", concurrency=3000),
    # attention DP over 2 H200s, the MLP split over both (the fixture's "dp2"): TRT-LLM and vLLM
    _case(serving_case="adp", framework="trtllm", version="1.2.0rc2", deployment="dp2"),
    _case(serving_case="adp-vllm", deployment="dp2"),
    # disaggregated: prefill on x H100s (the fixture's deployment "h100"), decode on y H200s
    _case(serving_case="xpyd", prefill_deployment="h100", prefill_instances=2, decode_instances=1),
    _case(serving_case="xpyd-queue", prefill_deployment="h100", prefill_instances=1, concurrency=16),
    _case(serving_case="xpyd-link", prefill_deployment="h100", prefill_instances=2, kv_link_bytes_per_s=12.5e9),
]


# the steps of the "ifb" case, as int_serving_steps names them: 2 prompts of 3000 tokens in one
# prefill step, a decode batch of 10 padded to 16 at the mean context 3000 + 101 // 2 = 3050;
# and the decode batch of the "kv" case's 3000 clients
P, D, D3000 = "serve:prefill:b2:s3000:c3000", "serve:decode:b16:s1:c3050", "serve:decode:b3000:s1:c3050"


@pytest.fixture(scope="module")
def shared(llama, tmp_path_factory):
    """One copy of the Llama-3.1-8B store for the module, with an MI300X deployment (no serving
    constants); in one transaction (rolled back) vLLM 0.15.1's request cap set to 4 (the queue
    test), every case of CASES prepared and priced once (op_sol and device_memory of its steps)
    and estimated under SOL, under STEADY (the constants enter after op_sol) and under STEADY
    with a request overhead of vLLM 0.12.0's own; and the by-hand step times of P and D summed
    from the priced op_sol rows."""
    mi300x = [
        {"deployment": "mi300x", "gpu": "MI300X", "like": "1xH200-single"},
        {"deployment": "h100", "gpu": "H100 SXM", "like": "1xH200-single"},
        {"deployment": "h100-fp8kv", "gpu": "H100 SXM", "kv_dtype": "fp8", "like": "1xH200-single"},
        {"deployment": "dp2", "gpus": 2, "dp": 2, "moe_tp": 2, "like": "1xH200-single"},
    ]
    db = _copy(llama, tmp_path_factory.mktemp("serving"), {}, mi300x)
    con = store.connect(db, read_only=False, derived=False)
    con.begin()
    con.execute(
        "update serving_frameworks set max_running_requests = 4 where framework = 'vllm' and version = '0.15.1'"
    )
    serving.price_steps(con, serving.prepare(con, CASES))
    names = [c["serving_case"] for c in CASES]
    rows = {}
    for label, constants in (("sol", SOL), ("steady", STEADY)):
        for name, value in constants.items():
            con.execute("update serving_constants set value = ? where constant = ?", [value, name])
        rows[label] = {r["serving_case"]: r for r in serving.estimates(con, names).to_pylist()}
    # STEADY with a request overhead and a first-wave share of vLLM 0.12.0's own
    con.execute("delete from serving_constants where contains(applies_to, '@')")
    con.execute(
        "insert into serving_constants (constant, applies_to, value) values "
        "('request_overhead_s', 'vllm@0.12.0', 0.5), ('first_wave_share', 'vllm@0.12.0', 1.0)"
    )
    rows["version"] = {r["serving_case"]: r for r in serving.estimates(con, names).to_pylist()}
    # by hand: at SOL a step is the sum of its ops' times (step_sol); at STEADY each op takes
    # max(compute / 0.5, memory / 0.8, comm / 1, launches · floor) and the step 2 ms more, an op
    # launched once per instance (base_instances.count) unless it does no work, the floor 20 µs
    # in a decode step (a CUDA graph) and max(20, 50) = 50 µs of host time in a prefill step
    ops = "from op_sol as o join base_instances as i using (model, uid) where o.model = ? and o.deployment = ?"
    key = ["Meta-Llama-3.1-8B", "1xH200-single"]
    sol = dict(con.execute(f"select o.workload, sum(o.time_s) {ops} group by o.workload", key).fetchall())
    # the prefill step P on one H100 (the disaggregated cases' prefill pool)
    (sol_h100,) = con.execute(f"select sum(o.time_s) {ops} and o.workload = ?", [key[0], "h100", P]).fetchone()
    steady = dict(
        con.execute(
            "select o.workload, sum(greatest(coalesce(o.compute_s, 0) / 0.5, o.memory_s / 0.8, o.comm_s, "
            "case when o.time_s > 0 then i.count * (case when o.workload = ? then 50e-6 else 20e-6 end) "
            f"else 0 end)) + 0.002 {ops} group by o.workload",
            [P, *key],
        ).fetchall()
    )
    (held, *memory) = con.execute(
        "select max_batch_per_dp_rank, batch, memory_bytes, weight_bytes, activation_bytes, kv_bytes "
        "from device_memory where model = ? and deployment = ? and workload = ?",
        [*key, D3000],
    ).fetchone()
    serving.release(con)
    con.rollback()
    con.close()
    return dict(db=db, **rows, sol_steps=sol, sol_h100=sol_h100, steady_steps=steady, held=held, memory=memory)


def test_ifb_step_mix_by_hand(shared):
    """vLLM 0.12.0 on one H200 (141 GB >= 70 GiB: token budget 8192, mixed steps), isl 3000,
    osl 101, 10 clients, every constant at the speed of light and the first wave only."""
    row = shared["sol"]["ifb"]
    # one prefill step holds min(10, 8192 // 3000) = 2 whole prompts (3000 <= 8192: one chunk)
    assert (row["max_batched_tokens"], row["chunk"], row["chunks"], row["step_requests"]) == (8192, 3000, 1, 2)
    # 10 requests → ceil(10 / 2) = 5 prefill groups; a request's mean group index is
    # (2·(1+2+3+4) + 2·5) / 10 = (20 + 10) / 10 = 3.0
    assert row["prefill_groups"] == 5
    assert row["mean_group"] == pytest.approx(3.0)
    # one H200 holds all 10 requests (vLLM's cap is 1024): no queue
    assert (row["admitted_requests"], row["queue_wait_s"]) == (10, 0)
    # the row says what it estimates: vLLM's benchmark definitions (frameworks.csv)
    assert row["tpot_definition"] == "(latency - ttft) / (output_len - 1) per request"
    assert (row["ttft_definition"].split(" (")[0], row["metric_mean"]) == (
        "first token received - request sent",
        "request",
    )
    # decode batch 10 padded to the CUDA-graph size 16 (multiples of 8 above 8); mean decode
    # context 3000 + 101 // 2 = 3050; the prefill step ends its prompts at 3000
    assert row["prefill_workload"] == "serve:prefill:b2:s3000:c3000"
    assert row["decode_workload"] == "serve:decode:b16:s1:c3050"
    # at SOL the steps are the sums of their ops' times (step_sol's rule, the fixture's)
    tp, td = row["prefill_step_s"], row["decode_step_s"]
    assert tp == pytest.approx(shared["sol_steps"][P], rel=1e-9)
    assert td == pytest.approx(shared["sol_steps"][D], rel=1e-9)
    # TTFT: the prefill steps up to the request's own group, 1 chunk · tp · 3.0
    assert row["ttft_s"] == pytest.approx(3.0 * tp, rel=1e-9)
    # TPOT (mixed steps): the 5 - 3 = 2 later groups' prefill steps are shared with the
    # request's decodes (one token each), the other 100 - 2 = 98 tokens take a decode step
    assert row["stall_steps"] == pytest.approx(2.0)
    assert row["tpot_s"] == pytest.approx((2 * tp + 98 * td) / 100, rel=1e-9)


def test_steady_schedule_and_constants_by_hand(shared):
    """The same case with fitted-looking constants (STEADY): the rest of the requests, 3/4, in
    the steady, spread-out schedule."""
    row = shared["steady"]["ifb"]
    # each step: the fixture's sum over ops at STEADY's efficiencies, floors and step overhead
    tp, td = shared["steady_steps"][P], shared["steady_steps"][D]
    assert row["prefill_step_s"] == pytest.approx(tp, rel=1e-9)
    assert row["decode_step_s"] == pytest.approx(td, rel=1e-9)
    # a prompt token costs (tp - 2 ms) / (2 · 3000) in a full prefill step
    b = (tp - 0.002) / 6000
    # steady: a request lives 1 prefill + 100 decode steps, so 10 / 101 prompts arrive per
    # step, each 3000 tokens: the mean step is td + (10 / 101) · 3000 · b
    step = td + 10 / 101 * 3000 * b
    steady_ttft = step / 2 + 1 * (td + 3000 * b)  # half a step of waiting, then its own mixed step
    steady_tpot = step
    wave_ttft = 3.0 * tp
    wave_tpot = (2 * tp + 98 * td) / 100
    assert row["ttft_s"] == pytest.approx(0.01 + 0.25 * wave_ttft + 0.75 * steady_ttft, rel=1e-9)
    assert row["tpot_s"] == pytest.approx(0.25 * wave_tpot + 0.75 * steady_tpot, rel=1e-9)


def test_a_framework_version_takes_its_own_request_overhead_and_share(shared):
    """serving_constants may give a framework version its own request overhead and first-wave
    share (applies_to 'vllm@0.12.0'): its cases add 0.5 s instead of the framework's 0.01 s and
    run the wave schedule only (share 1 instead of 0.25); another version (0.15.1) keeps the
    framework's."""
    steady, version = shared["steady"], shared["version"]
    row = version["ifb"]
    assert (row["request_overhead_s"], row["first_wave_share"]) == (0.5, 1.0)
    # the wave schedule at STEADY's step times (test_steady_schedule_and_constants_by_hand)
    tp, td = shared["steady_steps"][P], shared["steady_steps"][D]
    assert row["ttft_s"] == pytest.approx(0.5 + 3.0 * tp, rel=1e-9)
    assert row["tpot_s"] == pytest.approx((2 * tp + 98 * td) / 100, rel=1e-9)
    assert (version["cap"]["request_overhead_s"], version["cap"]["first_wave_share"]) == (0.01, 0.25)
    assert version["cap"]["ttft_s"] == pytest.approx(steady["cap"]["ttft_s"], rel=1e-12)
    assert version["cap"]["tpot_s"] == pytest.approx(steady["cap"]["tpot_s"], rel=1e-12)


def test_only_the_request_overhead_applies_to_a_framework_version(tmp_path):
    text = (SERVING_DIR / "constants.csv").read_text().splitlines()
    row = next(r for r in text if r.startswith("step_overhead_s,vllm,"))
    (tmp_path / "constants.csv").write_text(text[0] + "\n" + row.replace(",vllm,", ",vllm@0.12.0,", 1) + "\n")
    with pytest.raises(SpecError, match=r"constants.csv:2: step_overhead_s applies to a framework or a GPU generation"):
        serving_constants_table(tmp_path)


def test_sglang_stalls_decodes_for_prefill(shared):
    """SGLang (no mixed steps): a request's decodes wait for the later groups' prefill steps."""
    row = shared["sol"]["sglang"]
    # H200 (141 GB): chunked_prefill_size 8192 → the same 2 prompts per step, 5 groups
    assert (row["step_requests"], row["prefill_groups"], row["mixed_steps"]) == (2, 5, False)
    tp, td = row["prefill_step_s"], row["decode_step_s"]
    # every one of its 100 later tokens takes a decode step, plus 2 stalled prefill steps
    assert row["tpot_s"] == pytest.approx((2 * tp + 100 * td) / 100, rel=1e-9)


def test_sglang_steady_requests_arrive_with_their_prefill_group(shared):
    """SGLang 0.5.9 on one H200 under STEADY: the same 2 prompts of 3000 tokens per prefill step
    and 5 groups as vLLM's case, but no mixed steps.  A waiting prefill batch runs before the
    decode batch, so the 2 requests one prefill step admits start decoding in the same step and,
    both with osl 101, finish in the same step; their clients send the next 2 requests together.
    In the steady schedule a request therefore waits half a decode step, then its group's whole
    prefill step of 2 prompts: td / 2 + 1 chunk · tp — not a lone prompt's share of the step
    (td / 2 + tp - 3000 · b, b = (tp - 2 ms) / 6000), which a mixed scheduler's spread-out
    arrivals give."""
    row = shared["steady"]["sglang"]
    assert (row["step_requests"], row["chunks"], row["prefill_groups"], row["mixed_steps"]) == (2, 1, 5, False)
    # the same workloads as the vLLM case (decode batch 10 padded to 16), at the same constants
    tp, td = shared["steady_steps"][P], shared["steady_steps"][D]
    assert row["prefill_step_s"] == pytest.approx(tp, rel=1e-9)
    assert row["decode_step_s"] == pytest.approx(td, rel=1e-9)
    assert row["steady_ttft_s"] == pytest.approx(td / 2 + tp, rel=1e-9)
    # TTFT: the request overhead, 1/4 of the wave (mean group 3.0: 3 · tp), 3/4 steady
    assert row["ttft_s"] == pytest.approx(0.01 + 0.25 * 3.0 * tp + 0.75 * (td / 2 + tp), rel=1e-9)


def test_attention_dp_contexts_not_aligned_follow_one_another(shared):
    """TRT-LLM 1.2.0rc2 with attention DP over 2 H200s, isl 3000, osl 101, 10 clients, every
    constant at the speed of light and the first wave only.  A rank holds ceil(10 / 2) = 5
    requests; TRT-LLM does not chunk, and 8192 // 3000 = 2 whole prompts fit its token budget, so
    a rank's prefill step holds 2 prompts (the step of 2 · 2 = 4 prompts over both ranks).
    TRT-LLM does not align the ranks' context phases (frameworks.csv dp_contexts_aligned false:
    AttentionDpConfig.enable_balance off), so each rank's groups take iterations of their own while
    the other rank waits: the 2 ranks' 5 requests form ceil(10 / 2) = 5 groups of 2 in turn, a
    request's mean group index (2 · (1 + 2 + 3 + 4) + 2 · 5) / 10 = 3.0, TTFT 3.0 · tp.  vLLM on
    the same deployment (aligned) runs both ranks' groups together: ceil(5 / 2) = 3 groups, mean
    index (2 · (1 + 2) + 1 · 3) / 5 = 1.8."""
    trt, vllm = shared["sol"]["adp"], shared["sol"]["adp-vllm"]
    assert (trt["dp"], trt["rank_requests"], trt["step_requests"], trt["chunks"]) == (2, 5, 2, 1)
    assert (trt["dp_contexts_aligned"], vllm["dp_contexts_aligned"]) == (False, True)
    assert trt["prefill_workload"] == "serve:prefill:b4:s3000:c3000"
    assert (trt["prefill_groups"], vllm["prefill_groups"]) == (5, 3)
    assert trt["mean_group"] == pytest.approx(3.0)
    assert vllm["mean_group"] == pytest.approx(1.8)
    tp, td = trt["prefill_step_s"], trt["decode_step_s"]
    assert trt["ttft_s"] == pytest.approx(3.0 * tp, rel=1e-9)
    # TPOT (mixed steps): the 5 - 3 = 2 later groups' steps carry one of its tokens each
    assert trt["tpot_s"] == pytest.approx((2 * tp + 98 * td) / 100, rel=1e-9)
    assert vllm["ttft_s"] == pytest.approx(1.8 * vllm["prefill_step_s"], rel=1e-9)


def test_long_prompt_is_chunked(shared):
    """vLLM chunks a 20000-token prompt into ceil(20000 / 8192) = 3 chunks of 8192; the mean
    chunk ends at (20000 + 8192) / 2 = 14096 tokens."""
    row = shared["sol"]["chunked"]
    assert (row["chunk"], row["chunks"], row["step_requests"]) == (8192, 3, 1)
    assert row["prefill_workload"] == "serve:prefill:b1:s8192:c14096"
    assert row["ttft_s"] == pytest.approx(3 * row["prefill_step_s"], rel=1e-9)


def test_mtp_tpot_divides_by_accepted_tokens(store_of, tmp_path):
    """DeepSeek-V3 with 2 MTP draft tokens at acceptance 0.5: a decode step verifies 1 + 2
    tokens (its k = 2 draft forwards priced by op_sol) and yields 1 + 0.5 + 0.25 = 1.75."""
    like = "8xH200-tp8-ep8-wnative"
    db = _copy(
        store_of("DeepSeek-V3"),
        tmp_path,
        SOL,
        [{"deployment": "mtp2", "speculative_tokens": 2, "like": like}],
    )
    cases = [
        _case(serving_case="mtp", model="DeepSeek-V3", deployment="mtp2", concurrency=1, acceptance_rate=0.5),
        _case(serving_case="plain", model="DeepSeek-V3", deployment=like, concurrency=1),
    ]
    mtp, plain = sorted(serving.estimate(db, cases).to_pylist(), key=lambda r: r["serving_case"])
    assert mtp["decode_workload"].endswith(":s3:c3050") and plain["decode_workload"].endswith(":s1:c3050")
    assert mtp["tokens_per_decode_step"] == pytest.approx(1.75)
    # one request: one prefill group, no stall; every later token is a verify step / 1.75
    assert mtp["tpot_s"] == pytest.approx(mtp["decode_step_s"] / 1.75, rel=1e-9)
    # the verify step (3 tokens + 2 draft forwards) costs more than a plain step, less than 3
    assert plain["decode_step_s"] < mtp["decode_step_s"] < 3 * plain["decode_step_s"]
    # (at speed of light and batch 1 the verify step reads up to 3 × 8 routed experts per MoE
    # layer instead of 8, so MTP does not pay off here: TPOT 1.45 ms against 1.22 ms)


def test_framework_facts_are_sourced_and_cover_the_measured_versions():
    facts = serving_frameworks_table(SERVING_DIR).to_pylist()
    assert all(r["source"] and "/" in r["source"] for r in facts)
    known = {(r["framework"], r["version"]) for r in facts}
    with SILICON.open(newline="") as f:
        recorded = {(r["backend"], r["backend_version"]) for r in csv.DictReader(f) if r["backend_version"]}
    # every recorded version has facts but TRT-LLM's 'gpt-oss-dev' build, which names none
    assert recorded - known == {("trtllm", "gpt-oss-dev")}
    names = {(r["constant"], r["applies_to"]) for r in serving_constants_table(SERVING_DIR).to_pylist()}
    assert {("step_overhead_s", f) for f in ("sglang", "vllm", "trtllm")} <= names


def test_a_facts_row_without_source_is_located(tmp_path):
    text = (SERVING_DIR / "frameworks.csv").read_text().splitlines()
    head, first = text[0], text[1]
    (tmp_path / "frameworks.csv").write_text(head + "\n" + first.rsplit(',"', 1)[0] + ",\n")
    with pytest.raises(SpecError, match=r"frameworks.csv:2: a row without a source"):
        serving_frameworks_table(tmp_path)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(version="9.9"), r"(?s)no serving facts for vllm version '9.9'.*known versions: 0.11.2"),
        (dict(framework="vlm"), r"(?s)no serving facts for framework 'vlm'.*did you mean 'vllm'"),
        (dict(model="Llama-9"), r"model 'Llama-9' is not in the store"),
        (dict(deployment="1xH200-singel"), r"(?s)no deployment '1xH200-singel'.*did you mean '1xH200-single'"),
        (dict(osl=0), r"osl must be an integer in 1 .. 2\^24"),
        (dict(acceptance_rate=1.5), r"acceptance_rate must be in \[0, 1\]"),
    ],
)
def test_what_cannot_be_expressed_is_named(llama, change, message):
    with pytest.raises(QueryError, match=message):
        serving.estimate(llama, [_case(**change)])


def test_a_deployment_without_a_kv_dtype_is_named_not_priced(llama, tmp_path):
    """A deployment whose KV dtype is null has no KV bytes, so no batch it can hold: the
    estimate names the deployment as rejected instead of answering a null TTFT."""
    db = tmp_path / "store.duckdb"
    shutil.copy(llama, db)
    con = store.connect(db, read_only=False, derived=False)
    store.insert_deployments(con, [{"deployment": "no-kv-dtype", "kv_dtype": None}], like="1xH200-single")
    con.close()
    with pytest.raises(
        QueryError, match=r"deployment 'no-kv-dtype' is rejected: unknown dtype in weight/act/kv: .*null"
    ):
        serving.estimate(db, [_case(deployment="no-kv-dtype")])


def test_a_gpu_without_serving_constants_is_named(shared):
    """MI300X has no GPU generation in gpu_generations.csv, so no fitted constants: refused."""
    with pytest.raises(QueryError, match=r"GPU 'MI300X' has no serving constants"):
        serving.estimate(shared["db"], [_case(deployment="mi300x")])


def test_cli_serve_estimate(llama):
    runner = CliRunner()
    args = ["--db", str(llama), "serve-estimate", "Meta-Llama-3.1-8B", "--deployment", "1xH200-single"]
    args += ["--isl", "1024", "--osl", "128", "--concurrency", "1,8"]
    result = runner.invoke(cli, [*args, "--framework", "vllm@0.12.0", "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(result.output.splitlines()))
    assert [int(r["concurrency"]) for r in rows] == [1, 8]
    assert float(rows[1]["ttft_s"]) > float(rows[0]["ttft_s"]) > 0
    bad = runner.invoke(cli, [*args, "--framework", "vllm@0.0.1"])
    assert bad.exit_code == 2
    assert "no serving facts for vllm version '0.0.1'" in bad.output and "Traceback" not in bad.output
    # the API gives the same rows
    table = api.serve_estimate(
        "Meta-Llama-3.1-8B", "1xH200-single", "vllm@0.12.0", isl=1024, osl=128, concurrency=[1, 8], db=llama
    )
    assert table.column("ttft_s").to_pylist() == pytest.approx([float(r["ttft_s"]) for r in rows])
    # sweep --rank-by serving: the one layout tp1 on one H200 (bf16 weights and KV cache, vLLM's
    # memory fraction: the deployment 1xH200-single written again) gives the same estimates,
    # ranked by output tokens/s per GPU (one GPU: output tokens/s), tokens/s per user 1 / TPOT
    args = ["--db", str(llama), "sweep", "Meta-Llama-3.1-8B", "--count", "1", "--tp", "1", "--ep", "1"]
    args += ["--rank-by", "serving", "--framework", "vllm@0.12.0", "--isl", "1024", "--osl", "128"]
    ranked = runner.invoke(cli, [*args, "--concurrency", "1,8", "--format", "csv"])
    assert ranked.exit_code == 0, ranked.output
    swept = list(csv.DictReader(ranked.output.splitlines()))
    assert [(r["layout"], int(r["concurrency"])) for r in swept] == [("tp1", 8), ("tp1", 1)]
    by_c = {int(r["concurrency"]): r for r in rows}
    for r in swept:
        mine = by_c[int(r["concurrency"])]
        for column in ("ttft_s", "tpot_s", "output_tokens_per_s"):
            assert float(r[column]) == pytest.approx(float(mine[column]), rel=1e-9)
        assert float(r["tokens_per_s_per_gpu"]) == pytest.approx(float(mine["output_tokens_per_s"]), rel=1e-12)
        assert float(r["tokens_per_s_per_user"]) == pytest.approx(1 / float(mine["tpot_s"]), rel=1e-12)
    needs = runner.invoke(cli, [*args[:-2]])
    assert needs.exit_code == 2 and "--rank-by serving needs --osl, --concurrency" in needs.output


def test_kv_capacity_and_request_cap_queue_requests(shared):
    """More clients than a rank admits queue whole requests.  Closed loop: c clients share B
    slots and a slot serves one request per request latency L = service TTFT + (osl - 1) · TPOT,
    so a client's cycle is c/B · L and a request waits (c - B)/B · L before its prefill."""
    rows = shared["sol"]
    cap, kv, reserve = rows["cap"], rows["kv"], rows["reserve"]
    # 10 clients, vLLM 0.15.1's request cap set to 4 by the fixture
    assert cap["admitted_requests"] == 4
    latency = cap["service_ttft_s"] + 100 * cap["tpot_s"]
    assert cap["queue_wait_s"] == pytest.approx((10 - 4) / 4 * latency, rel=1e-9)
    assert cap["ttft_s"] == pytest.approx(cap["service_ttft_s"] + cap["queue_wait_s"], rel=1e-9)
    # the KV cache of one H200 at the decode context 3000 + 101 // 2 = 3050: device_memory's
    # max batch (its own test derives it) at the clients' decode step D3000; here it is below the 3000
    # clients and vLLM's cap 1024
    held = shared["held"]
    assert 1 <= held < 1024
    assert (kv["kv_admission"], kv["kv_requests"], kv["admitted_requests"]) == ("paged", held, held)
    # the rank decodes its `held` admitted requests (padded to a CUDA graph: multiples of 8 up
    # to 512), not its 3000 clients
    held = int(held)
    padded = held if held <= 8 or held > 512 else -(-held // 8) * 8
    assert kv["decode_workload"] == f"serve:decode:b{padded}:s1:c3050"
    latency = kv["service_ttft_s"] + 100 * kv["tpot_s"]
    assert kv["queue_wait_s"] == pytest.approx((3000 - held) / held * latency, rel=1e-9)
    # TRT-LLM's KV cache takes free_gpu_memory_fraction 0.9 of the memory left free after the
    # weights and the activations (device_memory's bytes of the 3000 requests' decode step):
    # floor(0.9 · (memory − weights − activations) / (KV bytes / 3000)) requests, more than the
    # 0.9 of the whole memory vLLM's rule leaves; and it reserves a request's whole length
    # (isl + osl = 3101 tokens), not the 3050 it holds on average: × 3050 / 3101, floored
    batch, memory, weights, activations, kv = shared["memory"]
    trt = int(0.9 * (memory - weights - activations) // (kv / batch))
    assert trt > held
    assert reserve["kv_admission"] == "reserve"
    assert reserve["kv_requests"] == trt * 3050 // 3101
    assert reserve["admitted_requests"] == reserve["kv_requests"]


def test_estimates_state_the_metric_definitions():
    """Each framework's TTFT and TPOT definitions come from frameworks.csv, and every benchmark
    client recorded there measures TTFT at the client (queueing included) and TPOT excluding
    the first token, as a mean over requests."""
    facts = serving_frameworks_table(SERVING_DIR).to_pylist()
    for r in facts:
        assert r["ttft_definition"].startswith("first token received - request sent")
        assert r["tpot_definition"] == "(latency - ttft) / (output_len - 1) per request"
        assert r["metric_mean"] == "request"
        assert r["kv_admission"] in ("paged", "reserve")


def test_disaggregated_ttft_and_rate_matching_by_hand(shared):
    """xPyD at SOL: 2 prefill instances on one H100 each, 1 decode instance on one H200,
    vLLM 0.12.0, isl 3000, osl 101, 10 clients."""
    row = shared["sol"]["xpyd"]
    assert (row["serving_mode"], row["prefill_deployment"], row["prefill_instances"], row["decode_instances"]) == (
        "disaggregated",
        "h100",
        2,
        1,
    )
    # the prefill pool: H100 (79.6 GiB >= 70: budget 8192); 10 clients over 2 instances · 1 rank
    # = 5 per rank, a step holds min(5, 8192 // 3000) = 2 whole prompts: the step P, on the H100
    assert (row["chunk"], row["chunks"], row["step_requests"], row["prefill_workload"]) == (3000, 1, 2, P)
    tp = shared["sol_h100"]
    assert row["prefill_step_s"] == pytest.approx(tp, rel=1e-9)
    # the decode pool: 10 clients on 1 instance's rank, padded to 16 at context 3050: the step D
    # on the H200 (the aggregated "ifb" case's decode step)
    td = shared["sol_steps"][D]
    assert (row["admitted_requests"], row["decode_workload"]) == (10, D)
    assert row["decode_step_s"] == pytest.approx(td, rel=1e-9)
    # the KV cache of one 3000-token prompt of Llama-3.1-8B (32 layers, 8 KV heads of 128, K and V,
    # bf16): 32 · 2 · 8 · 128 · 2 = 131072 bytes per token, × 3000 = 393,216,000 bytes
    assert row["kv_transfer_bytes"] == 32 * 2 * 8 * 128 * 2 * 3000 == 393_216_000
    # over the scale-out NIC of H100 and H200 (gpus.csv: 400 Gbit/s each = 50e9 bytes/s), no latency
    assert (row["kv_link_bytes_per_s"], row["kv_link_latency_s"]) == (50e9, 0)
    assert row["kv_link_source"].startswith("gpus.csv scale-out NIC")
    kv_s = 393_216_000 / 50e9  # 7.864 ms
    assert row["kv_transfer_s"] == pytest.approx(kv_s, rel=1e-12)
    # a link given (100 Gbit/s = 12.5e9 bytes/s, no latency given: 0): 393,216,000 / 12.5e9 = 31.46 ms
    link = shared["sol"]["xpyd-link"]
    assert (link["kv_link_source"], link["kv_link_latency_s"]) == ("given", 0)
    assert link["kv_transfer_s"] == pytest.approx(393_216_000 / 12.5e9, rel=1e-12)
    assert link["ttft_s"] == pytest.approx(tp + 393_216_000 / 12.5e9, rel=1e-9)
    # TTFT (request overhead 0 at SOL): its own prefill step + the transfer (+ no queue, below);
    # TPOT: a decode-only step per token (no prefill stalls)
    ttft = 1 * tp + kv_s
    assert row["tpot_s"] == pytest.approx(td, rel=1e-9)
    # rate matching: prefill pool 2 instances · 2 prompts · 1 rank per step tp; decode pool 1
    # instance · 10 slots, each held 100 decode steps; the clients' closed loop 10 / L
    prefill_rate = 2 * 2 / tp
    decode_rate = 1 * 10 * 1 / (100 * td)
    latency = ttft + 100 * td
    assert row["prefill_pool_rate"] == pytest.approx(prefill_rate, rel=1e-9)
    assert row["decode_pool_rate"] == pytest.approx(decode_rate, rel=1e-9)
    # (tp ≈ 104 ms, td ≈ 4.5 ms: prefill ≈ 38.5 req/s > decode ≈ 22.2 req/s > clients ≈ 17.8 req/s)
    # the decode pool limits, but the 10 clients ask less than it serves: no queue
    assert prefill_rate > decode_rate > 10 / latency
    assert row["limiting_pool"] == "decode"
    assert row["request_rate"] == pytest.approx(10 / latency, rel=1e-9)
    assert row["queue_wait_s"] == pytest.approx(0, abs=1e-12)
    assert row["ttft_s"] == pytest.approx(ttft, rel=1e-9)
    assert row["prefill_utilisation"] == pytest.approx(10 / latency / prefill_rate, rel=1e-9)
    assert row["decode_utilisation"] == pytest.approx(10 / latency / decode_rate, rel=1e-9)
    # the aggregated schedule's columns do not apply
    assert (row["wave_ttft_s"], row["steady_ttft_s"], row["first_wave_share"]) == (None, None, None)
    # 1 prefill instance, 16 clients: a prefill step still holds 2 prompts (min(16, 2)), the
    # decode batch is 16 (the same steps P and D); prefill 1 · 2 / tp ≈ 19.2 req/s, decode
    # 16 / (100 · td) ≈ 35.5 req/s, the clients 16 / L ≈ 28.4 req/s: the prefill pool limits and
    # the clients queue for it, a cycle of 16 / (2 / tp) = 8 · tp, L of it served
    q = shared["sol"]["xpyd-queue"]
    prefill_rate, decode_rate = 2 / tp, 16 / (100 * td)
    assert 16 / latency > prefill_rate and decode_rate > prefill_rate
    assert (q["limiting_pool"], q["step_requests"], q["prefill_workload"], q["decode_workload"]) == ("prefill", 2, P, D)
    assert q["request_rate"] == pytest.approx(prefill_rate, rel=1e-9)
    assert q["prefill_utilisation"] == pytest.approx(1, rel=1e-9)
    assert q["queue_wait_s"] == pytest.approx(8 * tp - latency, rel=1e-9)
    assert q["ttft_s"] == pytest.approx(ttft + 8 * tp - latency, rel=1e-9)
    assert q["output_tokens_per_s"] == pytest.approx(prefill_rate * 101, rel=1e-9)


def test_a_disaggregated_case_names_what_it_cannot_express(shared):
    """Pool fields without a prefill pool, counts out of range, pools whose KV dtypes differ."""
    cases = [
        _case(serving_case="nopool", decode_instances=2),
        _case(serving_case="typo", prefill_deployment="h10"),
        _case(serving_case="zero", prefill_deployment="h100", prefill_instances=0, kv_link_bytes_per_s=-1.0),
        _case(serving_case="fp8", prefill_deployment="h100-fp8kv"),
    ]
    with pytest.raises(QueryError) as failed:
        serving.estimate(shared["db"], cases)
    text = str(failed.value)
    assert "case 'nopool': decode_instances describe a disaggregated case, which needs a prefill deployment" in text
    assert "case 'typo': no prefill deployment 'h10'" in text and "did you mean 'h100'" in text
    assert "case 'zero': prefill_instances must be an integer in 1 .. 2^20" in text
    assert "case 'zero': kv_link_bytes_per_s must be a positive number" in text
    assert "caches KV in fp8, the decode deployment '1xH200-single' in bf16" in text


def test_cli_serve_estimate_disaggregated(shared):
    """The CLI's pool options reach the case (checked before any pricing): the link in Gbit/s and
    µs becomes bytes/s and s (-8 Gbit/s = -1e9 bytes/s, -5 µs = -5e-06 s), both refused; pool
    options without a prefill deployment are refused; and the table format's pool columns are
    serving_estimates columns."""
    from archsql.cli import SERVE_COLUMNS, SERVE_POOL_COLUMNS

    args = ["--db", str(shared["db"]), "serve-estimate", "Meta-Llama-3.1-8B", "--framework", "vllm@0.12.0"]
    args += ["--isl", "1000", "--osl", "10", "--decode-deployment", "1xH200-single"]
    pools = ["--prefill-deployment", "h100", "--prefill-instances", "2"]
    bad = CliRunner().invoke(cli, [*args, *pools, "--kv-link-gbps", "-8", "--kv-link-latency-us", "-5"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "kv_link_bytes_per_s must be a positive number" in bad.output and "-1000000000.0" in bad.output
    assert "kv_link_latency_s must be a number >= 0" in bad.output and "-5e-06" in bad.output
    bad = CliRunner().invoke(cli, [*args, "--prefill-instances", "2"])
    assert bad.exit_code == 2 and "needs a prefill deployment" in bad.output and "Traceback" not in bad.output
    columns = {c.strip() for c in serving.ESTIMATE_COLUMNS.split(",")}
    assert {*SERVE_COLUMNS, *SERVE_POOL_COLUMNS} <= columns
