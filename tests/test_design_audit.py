"""The architecture audit card: MHA → GQA single-variable with derived KV and attention deltas,
multi-field rejection, evidence routing and hashing, decisions, real-config audits."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.design.audit import Budget, EvidenceRef, audit, reassess, validate_profile
from archsql.design.edit import derive
from archsql.design.store import query
from archsql.errors import DesignError, SpecError
from archsql.specs import CONFIGS_DIR

BF16 = 2
LLAMA = json.loads((CONFIGS_DIR / "meta-llama__Meta-Llama-3.1-8B.json").read_text())
HEAD = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
MHA_KV = LLAMA["num_attention_heads"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("audit")


@pytest.fixture(scope="module")
def mha(root):
    """The MHA baseline: Llama-3.1-8B with one KV head per query head (a derived model)."""
    return derive("Meta-Llama-3.1-8B", set_dims={"n_kv_heads": MHA_KV}, name="Llama-3.1-8B-MHA", out_dir=root)


@pytest.fixture(scope="module")
def card(root, mha):
    return audit(mha.path, "Meta-Llama-3.1-8B", changed_field="num_key_value_heads", db=root / "design.duckdb")


def evidence(path, **overrides):
    record = {
        "benchmark": "kv_structure",
        "evidence_level": "same_family_benchmark",
        "baseline": "Llama-3.1-8B-MHA",
        "candidate": "Meta-Llama-3.1-8B",
        "workload": {"suite": "RULER", "context": 32768},
        "quality": {"metric": "ruler_32k", "baseline": 0.82, "candidate": 0.81, "pass": True},
        "cost": {"metric": "decode tokens/s", "baseline": 1200, "candidate": 2900, "pass": True},
        "failure": None,
    }
    record.update(overrides)
    record = {k: v for k, v in record.items() if v != "DROP"}
    path.write_text(json.dumps(record))
    return path


def row(card, item, section=None):
    return card.ledger_value(item, section)


def test_mha_to_gqa_is_single_variable(card):
    assert card.valid and card.single_variable
    assert card.differing == ["num_key_value_heads"]
    fields = {f.field: f for f in card.fields}
    assert (fields["num_key_value_heads"].baseline, fields["num_key_value_heads"].candidate) == ("32", "8")
    assert fields["attention_type"].differs and not fields["attention_type"].counted  # MHA → GQA follows
    assert (fields["attention_type"].baseline, fields["attention_type"].candidate) == ("MHA", "GQA")
    assert card.benchmark == "kv_structure"
    assert card.evidence_level == "cpu_structure_ledger"  # a derived baseline: no published config


def test_mha_to_gqa_ledger_matches_the_config(card):
    removed_heads = MHA_KV - LLAMA["num_key_value_heads"]
    layers = LLAMA["num_hidden_layers"]
    kv_token = row(card, "kv_bytes_per_token")
    assert kv_token["baseline"] == 2 * MHA_KV * HEAD * layers * BF16
    assert kv_token["delta"] == -2 * removed_heads * HEAD * layers * BF16
    assert row(card, "kv_bytes_per_request")["delta"] == kv_token["delta"] * 32768
    attention = row(card, "attention", "params_by_role")
    assert attention["delta"] == -2 * LLAMA["hidden_size"] * removed_heads * HEAD * layers  # k_proj and v_proj
    assert row(card, "params", "totals")["delta"] == attention["delta"]
    assert row(card, "ffn", "params_by_role")["delta"] == 0


def test_missing_evidence_means_tune(card):
    assert card.decision == "tune"
    assert any("evidence missing" in r and "kv_structure" in r for r in card.reasons)


def test_same_family_passing_quality_and_cost_accepts(card, tmp_path):
    accepted = reassess(card, evidence=[evidence(tmp_path / "ok.json")], budgets=["params=+1%"])
    assert accepted.decision == "accept", accepted.reasons
    assert accepted.evidence_level == "same_family_benchmark"
    assert accepted.evidence[0].sha256_referenced == accepted.evidence[0].sha256_now


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"failure": {"step": 1200, "what": "loss spike"}}, "failure recorded"),
        ({"quality": {"metric": "ruler_32k", "pass": False}}, "quality did not pass"),
        ({"cost": {"metric": "decode tokens/s", "pass": False}}, "cost did not pass"),
        ({"evidence_level": "cross_model_observational"}, "no same_family_benchmark record"),
        ({"evidence_level": "checkpoint_config_audit"}, "no same_family_benchmark record"),
        ({"benchmark": "moe_dispatch"}, "this change needs kv_structure"),
        ({"candidate": "Qwen3-8B"}, "measured candidate 'Qwen3-8B'"),
        ({"cost": "DROP", "failure": "DROP"}, "missing field(s) cost, failure"),
    ],
)
def test_evidence_that_does_not_support_accept(card, tmp_path, overrides, reason):
    judged = reassess(card, evidence=[evidence(tmp_path / "e.json", **overrides)])
    assert judged.decision == "tune"
    assert any(reason in r for r in judged.reasons), judged.reasons


def test_evidence_edited_after_referencing(card, tmp_path):
    path = evidence(tmp_path / "ok.json")
    ref = EvidenceRef.of(path)  # referenced now
    assert reassess(card, evidence=[ref]).decision == "accept"
    evidence(path, quality={"metric": "ruler_32k", "baseline": 0.82, "candidate": 0.90, "pass": True})  # edited
    judged = reassess(card, evidence=[ref.text])
    assert judged.decision == "tune"
    assert judged.evidence[0].status == "changed"
    assert any("changed since it was referenced" in r and "cannot support accept" in r for r in judged.reasons)
    missing = reassess(card, evidence=[str(tmp_path / "gone.json")])
    assert missing.decision == "tune" and missing.evidence[0].status == "missing"


def test_over_budget_rejects(card):
    judged = reassess(card, budgets=["params=-20%"])  # the change must shed a fifth of the params: it does not
    assert judged.decision == "reject"
    assert any(r.startswith("over budget: params delta") for r in judged.reasons)
    assert Budget.parse("kv_bytes_per_token=-1KiB").amount == -1024


def test_wrong_declared_field_rejects(card):
    judged = reassess(card, changed_field="intermediate_size")
    assert judged.decision == "reject" and not judged.single_variable
    assert "the field that differs is num_key_value_heads, not the declared intermediate_size" in judged.reasons[0]


def test_multi_field_candidate_is_rejected_with_the_fields(root, mha):
    both = derive("Meta-Llama-3.1-8B", set_dims={"d_ff": 16384}, name="Llama-3.1-8B-ff16k", out_dir=root)
    judged = audit(mha.path, both.path, changed_field="num_key_value_heads", db=root / "design.duckdb")
    assert judged.decision == "reject"
    assert judged.differing == ["num_key_value_heads", "intermediate_size"]
    assert "2 structural fields differ: num_key_value_heads, intermediate_size" in judged.reasons[0]


def test_real_configs_qwen3_8b_vs_32b(root):
    judged = audit("Qwen3-8B", "Qwen3-32B", changed_field="intermediate_size", db=root / "design.duckdb")
    assert judged.decision == "reject"
    assert judged.differing == ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"]
    assert judged.evidence_level == "checkpoint_config_audit"


def test_real_configs_mixtral_8x7b_vs_8x22b(root):
    configs = [json.loads((CONFIGS_DIR / f"mistralai__Mixtral-{s}-v0.1.json").read_text()) for s in ("8x7B", "8x22B")]
    names = {  # profile field ← config key
        "hidden_size": "hidden_size",
        "num_hidden_layers": "num_hidden_layers",
        "num_attention_heads": "num_attention_heads",
        "num_key_value_heads": "num_key_value_heads",
        "moe_intermediate_size": "intermediate_size",
        "num_experts": "num_local_experts",
        "num_experts_per_tok": "num_experts_per_tok",
        "vocab_size": "vocab_size",
    }
    expected = [f for f, key in names.items() if configs[0][key] != configs[1][key]]
    judged = audit("Mixtral-8x7B-v0.1", "Mixtral-8x22B-v0.1", changed_field="moe_intermediate_size", db=root / "d2")
    assert judged.decision == "reject"
    assert judged.differing == expected
    assert row(judged, "ffn_moe", "params_by_role")["delta"] > 0


def test_real_configs_deepseek_v3_to_v32_changes_the_attention_pattern(root):
    judged = audit("DeepSeek-V3", "DeepSeek-V3.2", changed_field="attention_pattern", db=root / "design.duckdb")
    assert judged.single_variable and judged.benchmark == "attention_access"
    assert judged.decision == "tune" and judged.evidence_level == "checkpoint_config_audit"
    v32 = json.loads((CONFIGS_DIR / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    # the index-key cache: FP8 + one FP32 scale per 128 elements per token and layer
    index_key = v32["index_head_dim"] * 1 + v32["index_head_dim"] // 128 * 4
    assert row(judged, "kv_bytes_per_token")["delta"] == v32["num_hidden_layers"] * index_key


def test_cards_are_rows(card, root):
    db = root / "design.duckdb"
    stored = query(db, "select decision, differing_fields from audit_cards where audit_id = $id", {"id": card.audit_id})
    assert stored.to_pylist() == [{"decision": "tune", "differing_fields": ["num_key_value_heads"]}]
    fields = query(db, "select field from audit_fields where audit_id = $id and counted", {"id": card.audit_id})
    assert fields.column("field").to_pylist() == ["num_key_value_heads"]
    ledger = query(db, "select count(*) as n from audit_ledger where audit_id = $id", {"id": card.audit_id})
    assert ledger.column("n").to_pylist()[0] == card.ledger.num_rows


def test_invalid_candidate_is_rejected(root):
    bad = root / "Llama-kv6.yaml"
    bad.write_text("model: Llama-kv6\nextends: Meta-Llama-3.1-8B\ndims:\n  n_kv_heads: 6\n")
    judged = audit("Meta-Llama-3.1-8B", bad, changed_field="num_key_value_heads", db=root / "design.duckdb")
    assert judged.decision == "reject" and not judged.valid
    assert "candidate Llama-kv6 does not evaluate" in judged.reasons[0] and "heads % kv_heads" in judged.reasons[0]


def test_profile_validation():
    profile = {"hidden_size": "4096", "num_attention_heads": "32", "num_key_value_heads": "6", "num_experts": "8"}
    problems = validate_profile("m", {**profile, "num_experts_per_tok": "9", "intermediate_size": "0"})
    assert any("not a multiple of num_key_value_heads = 6" in p for p in problems)
    assert any("num_experts_per_tok = 9 exceeds num_experts = 8" in p for p in problems)
    assert any("intermediate_size = 0 must be positive" in p for p in problems)
    assert validate_profile("m", {**profile, "num_key_value_heads": "8"}) == []


def test_bad_audit_input(card, root):
    with pytest.raises(DesignError, match=r"(?s)'num_kv_heads' is not a structural field.*did you mean"):
        reassess(card, changed_field="num_kv_heads")
    with pytest.raises(DesignError, match="unknown ledger item 'param'"):
        Budget.parse("param=+1%")
    with pytest.raises(DesignError, match="not ITEM=LIMIT"):
        Budget.parse("params=lots")
    with pytest.raises(DesignError, match="64 hex digits"):
        EvidenceRef.parse("e.json#sha256:abc")
    with pytest.raises(SpecError, match="unknown model 'Qwen3-9B'"):
        audit("Qwen3-9B", "Qwen3-8B", db=root / "x.duckdb")


def test_cli_audit(root, mha, tmp_path):
    path = evidence(tmp_path / "ok.json")
    args = ["audit", str(mha.path), "Meta-Llama-3.1-8B", "--changed-field", "num_key_value_heads"]
    args += ["--evidence", str(path), "--budget", "params=+1%", "--store", str(root / "cli.duckdb")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "decision: ACCEPT" in result.output and "num_key_value_heads" in result.output
    assert "kv_bytes_per_token" in result.output and "within params delta" in result.output
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    payload = json.loads(result.output)
    assert payload["audit_cards"][0]["decision"] == "accept"
    assert {r["item"] for r in payload["audit_ledger"]} >= {"params", "kv_bytes_per_token", "attention"}
