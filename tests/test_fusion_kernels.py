"""What a framework launches (issue 14): launched_kernels (one row per kernel), the
conditions of fusion_hits with their reasons, the all-reduce + add + RMSNorm chain of three,
role sets (DeepSeek's shared expert), the MLA decode/prefill kernels and `archsql kernels`.
Every figure is derived by hand in the test from the model's config and the GPU's datasheet
numbers (H200: 4.8 TB/s HBM, 450 GB/s NVLink per direction)."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from archsql import store
from archsql.cli import cli
from archsql.store import connect, insert_deployments, keep_deployments

MODELS = ("Meta-Llama-3.1-8B", "Qwen3-30B-A3B", "DeepSeek-V3")
HBM = 4.8e12  # H200 bytes/s
LINK = 450e9  # H200 NVLink bytes/s per direction


@pytest.fixture(scope="module")
def fusion_db(store_of):
    return store_of(*MODELS)


@pytest.fixture
def flagged_db(fusion_db, tmp_path):
    """A copy of the store whose deployments 1xH200-single and 8xH200-tp8 turn on vLLM's
    all-reduce fusion pass and SGLang's fused QK-norm + RoPE (writable: live views)."""
    db = tmp_path / "flags.duckdb"
    shutil.copy(fusion_db, db)
    con = connect(db, read_only=False)
    store.insert_rows(
        con,
        "deployment_flags",
        [
            {"deployment": d, "flag": f, "enabled": True}
            for d in ("1xH200-single", "8xH200-tp8")
            for f in ("enable_fi_allreduce_fusion", "enable_fused_qk_norm_rope")
        ],
    )
    yield con
    con.close()


def _kernel(con, model, deployment, workload, rule, framework="vllm", version="0.11", like="%"):
    return con.execute(
        "select members, flops, bytes, unfused_time_s, time_s, memory_s, comm_s from launched_kernels"
        " where model = ? and deployment = ? and workload = ? and framework = ? and version = ? and rule = ?"
        " and kernel_uid like ?",
        [model, deployment, workload, framework, version, rule, like],
    ).fetchall()


def test_merged_gate_up_flops_are_the_sum_of_its_members(fusion_db):
    """Llama-3.1-8B prefill of T = 2048 tokens on one H200: gate and up are each
    2·T·d·f = 2·2048·4096·14336 = 240,518,168,576 FLOPs per layer; the merged GEMM runs both,
    × 32 layers.  Its HBM bytes are the two GEMMs' less one read of the normed input
    (T·d·2 B = 16,777,216 B per layer)."""
    t, d, f, layers = 2048, 4096, 14336, 32
    with connect(fusion_db) as con:
        ((members, flops, fused_bytes, *_),) = _kernel(
            con, "Meta-Llama-3.1-8B", "1xH200-single", "prefill_2k", "merged_gate_up_projection"
        )
        unfused = con.execute(
            "select sum(bytes) from op_sol where model = 'Meta-Llama-3.1-8B' and deployment = '1xH200-single'"
            " and workload = 'prefill_2k' and uid in ('decoder/dense/mlp.gate_proj', 'decoder/dense/mlp.up_proj')"
        ).fetchone()[0]
    assert members == ["decoder/dense/mlp.gate_proj", "decoder/dense/mlp.up_proj"]
    assert flops == 2 * (2 * t * d * f) * layers == 15_393_162_788_864
    assert fused_bytes == pytest.approx(unfused - t * d * 2 * layers, rel=1e-12)


def test_silu_and_mul_kernel_bytes_are_unfused_less_the_intermediate_twice(fusion_db):
    """The SiLU output [T, f] (T = 2048, f = 14336, BF16) is written by silu and read back by
    mul when unfused: the silu_and_mul kernel moves 2·T·f·2 B = 117,440,512 B less per layer."""
    t, f, layers = 2048, 14336, 32
    with connect(fusion_db) as con:
        ((members, _, fused_bytes, *_),) = _kernel(
            con, "Meta-Llama-3.1-8B", "1xH200-single", "prefill_2k", "silu_and_mul"
        )
        unfused = con.execute(
            "select sum(bytes) from op_sol where model = 'Meta-Llama-3.1-8B' and deployment = '1xH200-single'"
            " and workload = 'prefill_2k' and uid in ('decoder/dense/mlp.act', 'decoder/dense/mlp.gated')"
        ).fetchone()[0]
    assert members == ["decoder/dense/mlp.act", "decoder/dense/mlp.gated"]
    assert unfused - fused_bytes == pytest.approx(2 * t * f * 2 * layers, rel=1e-12)


def test_add_rmsnorm_fuses_only_the_residual_pattern(fusion_db):
    """fused_add_rms_norm takes an add of role residual whose sum an RMSNorm reads on port 0:
    DeepSeek-V3's MoE output add (mlp.out, role ffn_moe) and the q/k norms of Qwen3 (reading a
    projection, not an add) never match."""
    with connect(fusion_db) as con:
        rows = con.execute(
            "select m.members[1], n.op, n.role from fusion_matches as m inner join base_nodes as n"
            " on n.model = m.model and n.uid = m.members[1] where m.rule = 'fused_add_rms_norm'"
        ).fetchall()
        norms = {
            r[0]
            for r in con.execute("select members[2] from fusion_matches where rule = 'fused_add_rms_norm'").fetchall()
        }
    assert rows and {(op, role) for _, op, role in rows} == {("add", "residual")}
    assert not any(u.endswith(("q_norm", "k_norm", "q_a_layernorm", "kv_a_layernorm")) for u in norms)


def test_allreduce_add_rmsnorm_runs_only_with_tp_above_one_and_its_flag(flagged_db, fusion_db):
    """vLLM's AllReduceFusionPass: all-reduce → residual add → RMSNorm, one kernel, when tp ≥ 2
    and pass_config.enable_fi_allreduce_fusion is on (off by default).

    Llama-3.1-8B on 8×H200 TP8, decode of B = 64 (T = 64 tokens), d = 4096, BF16, 32 layers:
      all-reduce (ring) sends 2·(8−1)/8 · T·d·2 B = 917,504 B per layer → 29,360,128 B,
        29,360,128 / 450e9 = 65.245 µs;
      add reads residual and the reduced sum, writes the sum: 3·T·d·2 = 1,572,864 B per layer;
      norm reads the sum, writes its output, reads its weight: 2·524,288 + 8,192 = 1,056,768 B;
      fused, the norm does not re-read the sum (the add still writes it: the next residual):
        (1,572,864 + 1,056,768 − 524,288) · 32 = 67,371,008 B → 14.036 µs.
    One kernel: max(65.245, 14.036) = 65.245 µs instead of 65.245 + 10.486 + 7.045 µs."""
    con = flagged_db
    reasons = dict(
        con.execute(
            "select deployment || ' ' || rule, reason from fusion_hits where model = 'Meta-Llama-3.1-8B'"
            " and framework = 'vllm' and version = '0.11' and phase = 'decode'"
            " and members[1] like 'decoder/dense/attn_residual%'"
            " and deployment in ('1xH200-single', '8xH200-tp8', '8xH200-tp8-ep8')"
        ).fetchall()
    )
    assert reasons == {
        "1xH200-single allreduce_fused_add_rms_norm": "tp 1 < 2 (tp_min)",
        "1xH200-single fused_add_rms_norm": None,
        "8xH200-tp8 allreduce_fused_add_rms_norm": None,
        "8xH200-tp8 fused_add_rms_norm": "taken by allreduce_fused_add_rms_norm",
        "8xH200-tp8-ep8 allreduce_fused_add_rms_norm": (
            "launch flag enable_fi_allreduce_fusion is off (its default; set it in deployment_flags)"
        ),
        "8xH200-tp8-ep8 fused_add_rms_norm": None,
    }
    ((members, _, fused_bytes, unfused_s, time_s, memory_s, comm_s),) = _kernel(
        con, "Meta-Llama-3.1-8B", "8xH200-tp8", "decode_b64_c2k", "allreduce_fused_add_rms_norm", like="%attn%"
    )
    t, d, layers = 64, 4096, 32
    comm = 2 * 7 / 8 * t * d * 2 * layers
    add, norm, sum_pass = 3 * t * d * 2, 2 * t * d * 2 + d * 2, t * d * 2
    assert members == [
        "decoder/dense/attn_residual",
        "decoder/dense/attn_residual#all_reduce[1]",
        "decoder/dense/post_attention_layernorm",
    ]
    assert fused_bytes == pytest.approx((add + norm - sum_pass) * layers, rel=1e-12)
    assert comm_s == pytest.approx(comm / LINK, rel=1e-9)
    assert memory_s == pytest.approx((add + norm - sum_pass) * layers / HBM, rel=1e-9)
    assert time_s == pytest.approx(comm / LINK, rel=1e-9)
    assert unfused_s == pytest.approx(comm / LINK + add * layers / HBM + norm * layers / HBM, rel=1e-9)


def test_a_failing_head_dim_condition_leaves_the_path_unfused_with_the_reason(flagged_db):
    """SGLang 0.5 fuses Qwen3-MoE's per-head q/k RMSNorm and RoPE (fused_qk_norm_rope) when
    the flag is on and head_dim ∈ {64, 128, 256}.  Qwen3-30B-A3B (d_head = 128, 32 heads, 48
    layers) on 8×H200 TP8, decode B = 64: the q_norm output [T, 32/8 heads, 128] is
    64·4·128·2 = 65,536 B per layer, written by the norm and read by RoPE when unfused —
    2 · 65,536 · 48 = 6,291,456 B saved.  With the rule's head_dim set narrowed to {64, 256}
    the same path runs unfused and says why."""
    con = flagged_db
    query = (
        "select launched, reason from fusion_hits where model = 'Qwen3-30B-A3B' and deployment = '8xH200-tp8'"
        " and framework = 'sglang' and version = '0.5' and phase = 'decode' and rule = 'fused_qk_norm_rope'"
        " and members[1] like '%q_norm'"
    )
    saved_query = (
        "select sum(saved_bytes) from kernel_sol where model = 'Qwen3-30B-A3B' and deployment = '8xH200-tp8'"
        " and workload = 'decode_b64_c2k' and framework = 'sglang' and version = '0.5'"
        " and uid in ('decoder/dense/self_attn.q_norm', 'decoder/dense/self_attn.q_rope')"
    )
    assert con.execute(query).fetchall() == [(True, None)]
    assert con.execute(saved_query).fetchone()[0] == pytest.approx(2 * 64 * 4 * 128 * 2 * 48, rel=1e-12)
    con.execute("update fusion_rules set dim_values = [64, 256] where rule = 'fused_qk_norm_rope'")
    assert con.execute(query).fetchall() == [(False, "d_head = 128 not in [64, 256] (dim_in)")]
    assert con.execute(saved_query).fetchone()[0] == 0


def test_deepseek_shared_expert_routed_experts_and_mla_kernels(fusion_db):
    """DeepSeek-V3 in vLLM 0.11: the shared expert (role ffn_moe) runs a merged gate_up GEMM
    like a dense MLP (MergedColumnParallelLinear); the routed experts' gate and up are one
    grouped GEMM over w13; decode attends the latent cache in one FlashMLA kernel (score,
    softmax, apply), prefill runs the expanded variable-length flash attention."""
    with connect(fusion_db) as con:
        kernels = dict(
            con.execute(
                "select workload || ' ' || rule, members from launched_kernels where model = 'DeepSeek-V3'"
                " and deployment = '8xH200-tp8-ep8' and framework = 'vllm' and version = '0.11'"
                " and workload in ('decode_b64_c2k', 'prefill_2k') and kernel_uid like 'decoder/moe/%'"
                " and rule in ('merged_gate_up_projection', 'fused_moe_w13', 'mla_decode_attention', 'mla_prefill_attention')"
            ).fetchall()
        )
        names = dict(
            con.execute(
                "select workload, kernel from launched_kernels where model = 'DeepSeek-V3' and deployment = '8xH200-tp8-ep8'"
                " and framework = 'vllm' and version = '0.11' and kernel_uid = 'decoder/moe/self_attn.scores'"
                " and workload in ('decode_b64_c2k', 'prefill_2k')"
            ).fetchall()
        )
    m = "decoder/moe/"
    assert kernels["decode_b64_c2k merged_gate_up_projection"] == [m + "mlp.shared_gate_proj", m + "mlp.shared_up_proj"]
    assert kernels["decode_b64_c2k fused_moe_w13"] == [m + "mlp.gate_proj", m + "mlp.up_proj"]
    assert kernels["decode_b64_c2k mla_decode_attention"] == [
        m + "self_attn.attn_latent",
        m + "self_attn.probs",
        m + "self_attn.scores",
    ]
    assert kernels["prefill_2k mla_prefill_attention"] == [
        m + "self_attn.attn",
        m + "self_attn.probs",
        m + "self_attn.scores",
    ]
    assert names == {"decode_b64_c2k": "flash_mla_with_kvcache", "prefill_2k": "flash_attn_varlen (expanded MLA)"}


def test_kernels_command_prints_the_launch_list(fusion_db):
    def run(*args):
        return CliRunner().invoke(cli, ["--db", str(fusion_db), "kernels", *args], env={"COLUMNS": "200"})

    result = run(
        "Meta-Llama-3.1-8B", "--framework", "vllm@0.11", "--deployment", "8xH200-tp8", "--workload", "decode_b64_c2k"
    )
    assert result.exit_code == 0, result.output
    assert "vllm 0.11 launches for Meta-Llama-3.1-8B on 8xH200-tp8 (H200 SXM), decode_b64_c2k (decode)" in result.output
    assert "silu_and_mul" in result.output and "mlp.act + mlp.gated" in result.output
    assert "launch flag enable_fi_allreduce_fusion is off" in result.output
    csv = run("Meta-Llama-3.1-8B", "--framework", "vllm", "--deployment", "1xH200-single", "--format", "csv")
    assert csv.exit_code == 0, csv.output
    assert csv.output.splitlines()[0].startswith("kernel,rule,members,ops,flops,bytes")
    bad = run("Meta-Llama-3.1-8B", "--framework", "vllm@0.9", "--deployment", "1xH200-single")
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "unknown vllm version '0.9'" in bad.stderr


def test_explain_names_the_kernel_a_node_is_launched_in(fusion_db):
    """`explain --framework --deployment`: after the formula, the launched kernel(s) holding the
    node and their members — vLLM 0.11 runs Llama's SiLU (mlp.act) fused with the gate product
    (mlp.gated) in silu_and_mul, and SGLang 0.5 its q_proj in the merged QKV GEMM."""

    def run(*args):
        return CliRunner().invoke(cli, ["--db", str(fusion_db), "explain", "Meta-Llama-3.1-8B", *args])

    act = run("--node", "mlp.act", "--phase", "decode", "--framework", "vllm@0.11", "--deployment", "1xH200-single")
    assert act.exit_code == 0, act.output
    text = " ".join(act.output.split())
    assert "vllm 0.11 on 1xH200-single (decode_b1_c2k): 1 launched kernel(s) run these nodes" in text
    assert "silu_and_mul (fused by silu_and_mul): decoder/dense/mlp.act + decoder/dense/mlp.gated" in text
    q = run("--node", "self_attn.q_proj", "--framework", "sglang@0.5", "--deployment", "8xH200-tp8")
    assert "(fused by merged_qkv_projection): decoder/dense/self_attn.k_proj + decoder/dense/self_attn.q_proj" in (
        " ".join(q.output.split())
    )
    alone = run("--framework", "vllm@0.11")
    assert alone.exit_code == 2 and "--framework and --deployment go together" in alone.output


def test_a_fused_moe_call_is_measured_as_one_and_priced_by_its_kernels(fusion_db):
    """SGLang's fused_experts is one call of several kernels (w13 grouped GEMM, SiLU-and-mul,
    w2 grouped GEMM, sum): the region rule fused_moe groups the routed experts from dispatch to
    combine as one measured unit (op kind moe) but fuses nothing — the w13 and SiLU-and-mul
    rules still make its kernels.  DeepSeek-V3 on 8×H200 TP8 + EP8, decode B = 64: the
    whole-MoE signature is tokens = 64, hidden = d_model = 7168, inter = d_ff_expert = 2048
    (moe_tp 1), top-k 8 of 256 experts, one launch per MoE layer (58)."""
    key = "model = 'DeepSeek-V3' and deployment = '8xH200-tp8-ep8' and framework = 'sglang' and version = '0.5'"
    with connect(fusion_db) as con:
        hits = con.execute(
            f"select rule, launched, call, reason from fusion_hits where {key} and phase = 'decode'"
            " and members[1] like 'decoder/moe/mlp.%' and rule in ('fused_moe', 'fused_moe_w13', 'silu_and_mul')"
            " order by rule, members"
        ).fetchall()
        calls = dict(
            con.execute(
                f"select kernel_uid, call_uid from launched_kernels where {key} and workload = 'decode_b64_c2k'"
                " and kernel_uid like 'decoder/moe/mlp.%'"
            ).fetchall()
        )
        moe = con.execute(
            f"select uid, tokens, hidden, inter, topk, experts, launches from launched_signatures where {key}"
            " and workload = 'decode_b64_c2k' and op_kind = 'moe'"
        ).fetchall()
    assert hits == [
        ("fused_moe", True, True, None),
        ("fused_moe_w13", True, False, None),
        ("silu_and_mul", True, False, None),  # the routed experts' act → gated
        ("silu_and_mul", True, False, None),  # the shared expert's
    ]
    call = "decoder/moe/mlp.act"
    assert {k for k, c in calls.items() if c == call} == {
        "decoder/moe/mlp.act",  # silu_and_mul
        "decoder/moe/mlp.combine",
        "decoder/moe/mlp.dispatch",
        "decoder/moe/mlp.down_proj",
        "decoder/moe/mlp.gate_proj",  # fused_moe_w13
    }
    assert moe == [(call, 64, 7168, 2048, 8, 256, 58)]


def test_a_merged_gemm_is_measured_as_one_gemm(fusion_db):
    """Llama-3.1-8B's merged QKV on 8×H200 TP8 is one GEMM of n = (32 + 8 + 8) · 128 / 8 = 768
    columns (q: 4096 / 8 = 512, k and v: 1024 / 8 = 128 each) over k = d_model = 4096, m = 64
    tokens at decode B = 64."""
    with connect(fusion_db) as con:
        rows = con.execute(
            "select op_kind, m, n, k from launched_signatures where model = 'Meta-Llama-3.1-8B'"
            " and deployment = '8xH200-tp8' and workload = 'decode_b64_c2k' and framework = 'vllm'"
            " and version = '0.11' and rule = 'merged_qkv_projection'"
        ).fetchall()
    assert rows == [("gemm", 64, 512 + 128 + 128, 4096)]


def test_a_gpu_family_condition_names_the_gpu_and_its_family(flagged_db):
    """vLLM's FlashMLA decode kernel runs on Hopper and Blackwell (mla_decode_attention:
    gpu_family [hopper, blackwell]); were the H200 an Ampere part, the MLA decode would run
    unnamed and the reason would say which GPU and family failed."""
    con = flagged_db
    query = (
        "select launched, reason from fusion_hits where model = 'DeepSeek-V3' and deployment = '8xH200-tp8-ep8'"
        " and framework = 'vllm' and version = '0.11' and phase = 'decode' and rule = 'mla_decode_attention'"
        " and members = ['decoder/moe/self_attn.scores']"
    )
    assert con.execute(query).fetchall() == [(True, None)]
    con.execute("update gpu_architectures set family = 'ampere' where gpu = 'H200 SXM'")
    assert con.execute(query).fetchall() == [(False, "GPU H200 SXM (ampere) not in [hopper, blackwell] (gpu_family)")]


def test_a_drafting_deployment_saves_per_forward_it_runs(fusion_db, tmp_path):
    """DeepSeek-V3's MTP layer runs k = 2 forwards per decode step on a drafting deployment
    (op_sol.runs); its fused kernels save per forward.  Its routed experts' SiLU output has
    the shape of one of the 58 MoE layers', so the MTP SiLU-and-mul saves 2 / 58 of what the
    58 MoE layers' save in one step."""
    db = tmp_path / "mtp.duckdb"
    shutil.copy(fusion_db, db)
    con = connect(db, read_only=False)
    insert_deployments(con, [{"deployment": "8xH200-tp8-ep8-mtp2", "speculative_tokens": 2}], like="8xH200-tp8-ep8")
    keep_deployments(con, ["8xH200-tp8-ep8-mtp2"])
    saved = dict(
        con.execute(
            "select split_part(uid, '/', 1), sum(saved_bytes) from kernel_sol where model = 'DeepSeek-V3'"
            " and deployment = '8xH200-tp8-ep8-mtp2' and workload = 'decode_b64_c2k' and framework = 'vllm'"
            " and version = '0.11' and uid in ('mtp/mtp/layer.mlp.act', 'mtp/mtp/layer.mlp.gated',"
            " 'decoder/moe/mlp.act', 'decoder/moe/mlp.gated') group by 1"
        ).fetchall()
    )
    con.close()
    assert saved["decoder"] > 0
    assert saved["mtp"] == pytest.approx(2 / 58 * saved["decoder"], rel=1e-12)
