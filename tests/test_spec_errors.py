"""Bad input: one test per rejection of the spec loader / evaluator.

Each test copies a real spec (Meta-Llama-3.1-8B and its components), breaks ONE thing,
evaluates it through the library API and checks that the error names the file, the exact
line of the broken key (computed from the test text), the YAML path, expected vs got
where it applies, and the fix (a did-you-mean or a hint).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from archsql.errors import ArchsqlError, Issue, ShapeError, SpecError
from archsql.evaluator import evaluate
from archsql.specs import COMPONENTS_DIR, CONFIGS_DIR, MODELS_DIR, load_library

CONFIG_8B = CONFIGS_DIR / "meta-llama__Meta-Llama-3.1-8B.json"
LLAMA = (
    (MODELS_DIR / "Meta-Llama-3.1-8B.yaml")
    .read_text()
    .replace("config: meta-llama__Meta-Llama-3.1-8B.json", f"config: {CONFIG_8B}")
)
LLAMA_405B = (
    (MODELS_DIR / "Meta-Llama-3.1-405B.yaml")
    .read_text()
    .replace(
        "config: meta-llama__Meta-Llama-3.1-405B.json",
        f"config: {CONFIGS_DIR / 'meta-llama__Meta-Llama-3.1-405B.json'}",
    )
)
GQA = (COMPONENTS_DIR / "gqa_attention.yaml").read_text()
BLOCK = (COMPONENTS_DIR / "pre_norm_block.yaml").read_text()


# --------------------------------------------------------------------------- helpers


def edit(text: str, old: str, new: str) -> str:
    """Replace ``old`` (which must occur exactly once) by ``new``."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    """1-based number of the only line of ``text`` that contains ``needle``."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, f"{needle!r} is on lines {hits}"
    return hits[0]


class SpecDir:
    """A temp library: broken components override the real ones by file name."""

    def __init__(self, root: Path):
        self.components = root / "components"
        self.models = root / "models"
        self.components.mkdir()
        self.models.mkdir()

    def component(self, name: str, text: str) -> Path:
        path = self.components / f"{name}.yaml"
        path.write_text(text)
        return path

    def model(self, text: str, name: str = "broken_llama") -> Path:
        path = self.models / f"{name}.yaml"
        path.write_text(text)
        return path

    def evaluate(self, model: Path):
        return evaluate(model, library=load_library(components_dir=self.components, models_dir=self.models))

    def reject(self, model: Path, error: type[ArchsqlError] = SpecError) -> ArchsqlError:
        with pytest.raises(error) as info:
            self.evaluate(model)
        return info.value


@pytest.fixture
def specs(tmp_path: Path) -> SpecDir:
    return SpecDir(tmp_path)


def located(exc: ArchsqlError, file: Path, line: int, path: str | None) -> Issue:
    """The issue at ``file:line path``; the rendered message must show it on one line."""
    text = str(exc)
    where = rf"{re.escape(str(file))}:{line}(?::\d+)?" + (rf" {re.escape(path)}" if path else "") + ": "
    assert re.search(where, text), f"expected '{file.name}:{line} {path or ''}' in:\n{text}"
    hits = [i for i in exc.issues if i.file == str(file) and i.line == line and i.path == path]
    assert hits, f"no issue with file={file.name} line={line} path={path} in:\n{text}"
    return hits[0]


def assert_all_located(exc: ArchsqlError) -> None:
    assert exc.issues, "an error about a file must carry located issues"
    for issue in exc.issues:
        assert issue.file and issue.line is not None, f"unlocated issue: {issue.render()}"


# --------------------------------------------------------------------------- baseline


def test_unbroken_copies_evaluate(specs):
    """The copies used below are valid, so each failure comes from the one broken thing."""
    specs.component("gqa_attention", GQA)
    specs.component("pre_norm_block", BLOCK)
    analysis = specs.evaluate(specs.model(LLAMA))
    assert analysis.dims["d_model"] == 4096


# --------------------------------------------------------------------------- unknown keys


def test_unknown_top_level_key_in_model(specs):
    text = edit(LLAMA, "\ngraph:\n", "\ngraf:\n")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "graf:"), "$.graf")
    assert "unknown key 'graf'" in issue.message
    assert issue.hint == "did you mean 'graph'?"
    assert "did you mean 'graph'?" in str(exc)
    assert "missing required key 'graph'" in str(exc)
    assert len(exc.issues) == 2, str(exc)  # no cascade of follow-up errors
    assert_all_located(exc)


def test_unknown_top_level_key_in_component(specs):
    text = edit(GQA, "\ngraph:\n", "\ngraf:\n")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "graf:"), "$.graf")
    assert issue.hint == "did you mean 'graph'?"
    # outputs/cache naming nodes of the missing graph are not reported on top
    assert "is not a node" not in str(exc) and "not in the graph" not in str(exc)
    assert_all_located(exc)


def test_unknown_node_key(specs):
    text = edit(GQA, "merge:   { op: merge_heads, in: attn }", "merge:   { op: merge_heads, in: attn, dimz: {} }")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "dimz:"), "$.graph.merge.dimz")
    assert "unknown key 'dimz'" in issue.message
    assert "did you mean 'dims'?" in str(exc)


def test_unknown_key_in_slot_fill(specs):
    text = edit(
        LLAMA, "components: { block: pre_norm_block,", "components: { block: { component: pre_norm_block, pth: x },"
    )
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "pth: x"), "$.components.block.pth")
    assert "did you mean 'path'?" in str(exc)


# --------------------------------------------------------------------------- unknown names


def test_unknown_op(specs):
    text = edit(GQA, "o_proj:  { op: linear", "o_proj:  { op: linaer")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "op: linaer"), "$.graph.o_proj")
    assert issue.message == "unknown op 'linaer'"
    assert "did you mean 'linear'?" in str(exc)


def test_unknown_op_in_model_graph(specs):
    text = edit(LLAMA, "{ op: rmsnorm, in: decoder", "{ op: rmsnrm, in: decoder")
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "op: rmsnrm"), "$.graph.norm")
    assert "unknown op 'rmsnrm'" in str(exc) and "did you mean 'rmsnorm'?" in str(exc)


def test_unknown_component_role(specs):
    text = edit(GQA, "role: attention", "role: atention")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "role: atention"), "$.role")
    assert issue.message == "unknown role 'atention'"
    assert "did you mean 'attention'?" in str(exc)


def test_unknown_node_role(specs):
    text = edit(BLOCK, "in: [x, self_attn], role: residual", "in: [x, self_attn], role: residul")
    comp = specs.component("pre_norm_block", text)
    exc = specs.reject(specs.model(LLAMA))
    located(exc, comp, line_of(text, "role: residul"), "$.graph.attn_residual")
    assert "unknown role 'residul'" in str(exc) and "did you mean 'residual'?" in str(exc)


def test_unknown_node_role_in_model_graph(specs):
    text = edit(LLAMA, "path: model.norm,", "path: model.norm, role: nrm,")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "role: nrm"), "$.graph.norm")
    assert issue.message == "unknown role 'nrm'"
    assert issue.hint == "did you mean 'norm'?"


def test_unknown_slot_role(specs):
    text = edit(BLOCK, "slots: { attention: [attention,", "slots: { attention: [attn,")
    comp = specs.component("pre_norm_block", text)
    exc = specs.reject(specs.model(LLAMA))
    located(exc, comp, line_of(text, "slots:"), "$.slots")
    assert "slot 'attention': unknown role 'attn'" in str(exc)


def test_unknown_dim_in_component_expression(specs):
    old = 'q_proj:  { op: linear, in: x, dims: { in: d_model, out: "n_heads * d_head"'
    text = edit(GQA, old, old.replace("n_heads", "n_head"))
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, '"n_head * d_head"'), "$.graph.q_proj.dims.out")
    assert "unknown dim 'n_head'" in issue.message
    assert issue.got == "string 'n_head * d_head'" and issue.expected is not None
    assert "did you mean 'n_heads'?" in str(exc)


def test_unknown_dim_in_list_parameter(specs):
    text = edit(GQA, "dims: { parts: [n_heads, d_head] }", "dims: { parts: [n_heads, d_haed] }")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    located(exc, comp, line_of(text, "d_haed"), "$.graph.q_heads.dims.parts")
    assert "unknown dim 'd_haed'" in str(exc) and "did you mean 'd_head'?" in str(exc)


def test_unknown_dim_bound_in_model(specs):
    text = edit(LLAMA, "  d_model: config.hidden_size", "  d_modle: config.hidden_size")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "d_modle:"), "$.dims.d_modle")
    assert issue.message == "unknown dim 'd_modle'"
    assert "did you mean 'd_model'?" in str(exc)
    assert "dims.yaml" in issue.hint  # where new dims are declared


def test_unknown_op_parameter(specs):
    old = 'o_proj:  { op: linear, in: merge, dims: { in: "n_heads * d_head"'
    text = edit(GQA, old, old.replace("{ in:", "{ inn:"))
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    line = line_of(text, "inn:")
    issue = located(exc, comp, line, "$.graph.o_proj.dims.inn")
    assert issue.message == "unknown parameter 'inn' for op 'linear'"
    assert issue.hint == "did you mean 'in'?"


def test_missing_required_op_parameter(specs):
    old = 'o_proj:  { op: linear, in: merge, dims: { in: "n_heads * d_head", out: d_model'
    text = edit(GQA, old, "o_proj:  { op: linear, in: merge, dims: { out: d_model")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "o_proj:"), "$.graph.o_proj")
    assert "op 'linear' needs parameter 'in'" in issue.message
    assert "add 'in: <dim expression>' under $.graph.o_proj.dims" in str(exc)


def test_wrong_arity(specs):
    text = edit(GQA, "merge:   { op: merge_heads, in: attn }", "merge:   { op: merge_heads, in: [attn, probs] }")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "merge:"), "$.graph.merge")
    assert "takes 1 input(s)" in issue.message and issue.got == "2"


def test_unknown_component_in_model(specs):
    text = edit(LLAMA, "ffn: swiglu_mlp", "ffn: swiglu_mpl")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "swiglu_mpl"), "$.components.ffn")
    assert "unknown component 'swiglu_mpl'" in issue.message
    assert issue.hint == "did you mean 'swiglu_mlp'?"


def test_unknown_template_in_schedule(specs):
    text = edit(LLAMA, "    schedule: dense", "    schedule: dens")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "schedule: dens"), "$.stacks.decoder.schedule")
    assert issue.message == "unknown template 'dens'"
    assert issue.hint == "did you mean 'dense'?"


def test_unknown_stack(specs):
    text = edit(LLAMA, "{ stack: decoder, in", "{ stack: decodr, in")
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "stack: decodr"), "$.graph.decoder")
    assert "unknown stack 'decodr'" in str(exc) and "did you mean 'decoder'?" in str(exc)


def test_unknown_extends_target(specs):
    specs.model(LLAMA, name="Meta-Llama-3.1-8B")
    text = edit(LLAMA_405B, "extends: Meta-Llama-3.1-8B", "extends: Meta-Llama-3.1-8b")
    model = specs.model(text, name="Meta-Llama-3.1-405B")
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "extends:"), "$.extends")
    assert "Meta-Llama-3.1-8b" in issue.message and "no file Meta-Llama-3.1-8b.yaml" in issue.message
    assert issue.hint == "did you mean 'Meta-Llama-3.1-8B'?"
    # the keys the missing parent would have supplied are not reported as missing too
    assert len(exc.issues) == 1, str(exc)


def test_extends_cycle(specs):
    text = edit(LLAMA_405B, "extends: Meta-Llama-3.1-8B", "extends: Meta-Llama-3.1-405B")
    model = specs.model(text, name="Meta-Llama-3.1-405B")
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "extends:"), "$.extends")
    assert issue.message == "model 'Meta-Llama-3.1-405B' extends itself"  # issue 19 class 7 (was "cycle: X → X")


def test_error_in_derived_model_names_the_derived_file(specs):
    specs.model(LLAMA, name="Meta-Llama-3.1-8B")
    text = LLAMA_405B + "dims:\n  d_modle: config.hidden_size\n"
    model = specs.model(text, name="Meta-Llama-3.1-405B")
    exc = specs.reject(model)
    located(exc, model, line_of(text, "d_modle:"), "$.dims.d_modle")
    assert "did you mean 'd_model'?" in str(exc)


# --------------------------------------------------------------------------- references


def test_dangling_in_reference(specs):
    text = edit(GQA, "q_heads: { op: view_split, in: q_proj,", "q_heads: { op: view_split, in: q_prj,")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "in: q_prj"), "$.graph.q_heads")
    assert "'q_prj'" in issue.message and "neither a node nor an input" in issue.message
    assert issue.hint == "did you mean 'q_proj'?"


def test_dangling_output(specs):
    text = edit(LLAMA, "outputs: [lm_head]", "outputs: [lm_hed]")
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "outputs:"), "$.outputs")
    assert "output 'lm_hed' is not a node" in str(exc) and "did you mean 'lm_head'?" in str(exc)


def test_dangling_cache_entry(specs):
    text = edit(GQA, "- { node: k_rope,", "- { node: k_rop,")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    located(exc, comp, line_of(text, "node: k_rop,"), "$.cache.entries[0]")
    assert "did you mean 'k_rope'?" in str(exc)


def test_cycle(specs):
    text = edit(GQA, "q_heads: { op: view_split, in: q_proj,", "q_heads: { op: view_split, in: merge,")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    m = re.search(r"cycle in graph: (.+)", str(exc))
    assert m, str(exc)
    cycle = m.group(1).split(" → ")
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"q_heads", "q_rope", "scores", "probs", "attn", "merge"}
    # consecutive names are real edges: each node reads the one after it
    for a, b in itertools.pairwise(cycle):
        assert re.search(rf"^  {a}:.*in: (\[[^]]*\b{b}\b[^]]*\]|{b}\b)", text, re.M), (a, b)
    located(exc, comp, line_of(text, f"  {cycle[0]}:"), f"$.graph.{cycle[0]}")
    assert "stack stream" in str(exc)  # the hint says how cross-layer values flow


def test_unfilled_slot(specs):
    text = edit(LLAMA, "attention: gqa_attention, ", "")
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "components:"), "$.components.block")
    assert "slot 'attention' of 'pre_norm_block' is not filled" in str(exc)
    assert "add 'attention: <component>'" in str(exc)


def test_slot_filled_with_wrong_role(specs):
    text = edit(LLAMA, "ffn: swiglu_mlp", "ffn: gqa_attention")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "ffn: gqa_attention"), "$.components.ffn")
    assert "component 'gqa_attention' has role 'attention'" in issue.message
    assert issue.expected == "ffn | ffn_moe" and issue.got == "attention"
    assert "(expected ffn | ffn_moe, got attention)" in str(exc)


def test_undeclared_slot(specs):
    text = edit(BLOCK, "{ slot: ffn, in: post_attention_layernorm }", "{ slot: fnn, in: post_attention_layernorm }")
    comp = specs.component("pre_norm_block", text)
    exc = specs.reject(specs.model(LLAMA))
    located(exc, comp, line_of(text, "slot: fnn"), "$.graph.mlp")
    assert "did you mean 'ffn'?" in str(exc)


# --------------------------------------------------------------------------- config


def test_missing_config_key(specs):
    text = edit(LLAMA, "d_model: config.hidden_size", "d_model: config.hiden_size")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "config.hiden_size"), "$.dims.d_model")
    assert "config key 'config.hiden_size' is missing" in issue.message
    assert CONFIG_8B.name in issue.message
    assert "did you mean 'hidden_size'?" in issue.hint


def test_missing_config_file(specs):
    text = edit(LLAMA, f"config: {CONFIG_8B}", "config: meta-llama__Meta-Llama-3.1-8b.json")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "config:"), "$.config")
    assert "config file not found" in issue.message
    assert "meta-llama__Meta-Llama-3.1-8B.json" in issue.hint  # did you mean the real one


def test_binding_must_be_an_integer(specs):
    text = edit(LLAMA, "d_model: config.hidden_size", "d_model: config.torch_dtype")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "config.torch_dtype"), "$.dims.d_model")
    assert issue.expected == "integer" and issue.got == "string 'bfloat16'"


# --------------------------------------------------------------------------- YAML


def test_yaml_syntax_error_in_model(specs):
    text = edit(LLAMA, "  n_layers: config.num_hidden_layers", "  n_layers: config.num_hidden_layers: 2")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "num_hidden_layers: 2"), None)
    assert issue.message.startswith("YAML syntax error")
    assert "must be quoted" in issue.hint


def test_yaml_syntax_error_unclosed_flow_mapping(specs):
    """PyYAML notices an unclosed '{' on the next line; the message names both lines."""
    old = "  probs:   { op: softmax, in: scores, dims: { causal: 1, window: window } }"
    text = edit(GQA, old, old[:-2])
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    bad = line_of(text, "probs:   {")
    issue = located(exc, comp, bad + 1, None)
    assert f"started at line {bad}" in issue.message


def test_yaml_tab_indentation(specs):
    text = edit(LLAMA, "  n_layers: config.num_hidden_layers", "\tn_layers: config.num_hidden_layers")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "\tn_layers"), None)
    assert "'\\t'" in issue.message


def test_duplicate_yaml_key(specs):
    text = edit(
        GQA,
        "  merge:   { op: merge_heads, in: attn }",
        "  merge:   { op: merge_heads, in: attn }\n  probs:   { op: softmax, in: scores }",
    )
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    second = [i for i, line in enumerate(text.splitlines(), 1) if line.startswith("  probs:")][1]
    issue = located(exc, comp, second, "$.graph.probs")
    assert issue.message == "duplicate key 'probs'"
    assert "remove or rename" in issue.hint


def test_empty_model_file(specs):
    model = specs.model("")
    exc = specs.reject(model)
    assert str(model) in str(exc) and "expected mapping, got null" in str(exc)


# --------------------------------------------------------------------------- types


def test_wrong_type_dims_list(specs):
    text = edit(
        GQA,
        "probs:   { op: softmax, in: scores, dims: { causal: 1, window: window } }",
        "probs:   { op: softmax, in: scores, dims: [1, 2] }",
    )
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "dims: [1, 2]"), "$.graph.probs.dims")
    assert issue.expected == "mapping" and issue.got == "list"
    assert "(expected mapping, got list)" in str(exc)


def test_wrong_type_node_is_a_scalar(specs):
    text = edit(GQA, "merge:   { op: merge_heads, in: attn }", "merge:   merge_heads")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "merge:   merge_heads"), "$.graph.merge")
    assert issue.expected == "mapping" and issue.got == "string 'merge_heads'"


def test_wrong_type_model_dims(specs):
    text = edit(LLAMA, "dims:\n  d_model: config.hidden_size\n", "dims: [1]\n")
    text = re.sub(
        r"(?m)^  (\w+): .*\n",
        "",
        text,
    )
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "dims: [1]"), "$.dims")
    assert issue.got == "list" and issue.expected == "mapping"


def test_wrong_type_in_reference(specs):
    text = edit(GQA, "merge:   { op: merge_heads, in: attn }", "merge:   { op: merge_heads, in: 5 }")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, "in: 5"), "$.graph.merge.in")
    assert issue.got == "int 5"


def test_unparsable_dim_expression(specs):
    old = 'q_proj:  { op: linear, in: x, dims: { in: d_model, out: "n_heads * d_head"'
    text = edit(GQA, old, old.replace('"n_heads * d_head"', '"n_heads * "'))
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    issue = located(exc, comp, line_of(text, '"n_heads * "'), "$.graph.q_proj.dims.out")
    assert "cannot parse expression" in issue.message


# --------------------------------------------------------------------------- shapes, schedule, dims


def test_shape_mismatch(specs):
    old = 'o_proj:  { op: linear, in: merge, dims: { in: "n_heads * d_head"'
    text = edit(GQA, old, old.replace('"n_heads * d_head"', "d_ff"))
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA), ShapeError)
    issue = located(exc, comp, line_of(text, "o_proj:"), "$.graph.o_proj")
    assert "o_proj" in issue.message and "(linear)" in issue.message
    assert issue.expected == "d_ff = 14336"
    assert issue.got == "n_heads*d_head = 4096"
    assert issue.hint


def test_schedule_not_covering_all_layers(specs):
    text = edit(LLAMA, "    schedule: dense", "    schedule: [{ template: dense, layers: '0:30' }]")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "schedule:"), "$.stacks.decoder.schedule")
    assert "does not cover layers 30, 31" in issue.message
    assert "every layer needs exactly one template" in issue.hint


def test_schedule_layer_twice(specs):
    text = edit(
        LLAMA,
        "    schedule: dense",
        "    schedule:\n      - { template: dense, layers: '0:32' }\n      - { template: dense, layers: [3] }",
    )
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "layers: [3]"), "$.stacks.decoder.schedule[1]")
    assert "layer 3 is scheduled twice" in issue.message


def test_template_no_layer_uses(specs):
    text = edit(LLAMA, "  dense: {}", "  dense: {}\n  sparse: {}")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "sparse:"), "$.templates.sparse")
    assert "template 'sparse' is declared but no stack schedules it" in issue.message
    assert "add it to a schedule" in issue.hint


def test_repeat_names_unknown_dim(specs):
    text = edit(LLAMA, "    repeat: n_layers", "    repeat: n_layer")
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "repeat:"), "$.stacks.decoder.repeat")
    assert "unknown dim 'n_layer'" in str(exc) and "did you mean 'n_layers'?" in str(exc)


def test_dim_used_but_not_bound(specs):
    text = edit(LLAMA, "  d_ff: config.intermediate_size\n", "")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, text.splitlines().index("dims:") + 1, "$.dims")
    assert "dim 'd_ff' is used but not bound by model 'Meta-Llama-3.1-8B'" in issue.message
    assert "swiglu_mlp.yaml" in issue.message  # where it is used
    assert "bind it under dims:" in issue.hint and "never defaulted" in issue.hint


def test_dim_bound_but_unused(specs):
    text = edit(LLAMA, "  vocab: config.vocab_size", "  vocab: config.vocab_size\n  top_k: 2")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "top_k: 2"), "$.dims.top_k")
    assert "dim 'top_k' is bound but no node" in issue.message
    assert "remove the binding" in issue.hint


def test_flag_dim_must_be_0_or_1(specs):
    text = edit(LLAMA, "  qkv_bias: config.attention_bias", "  qkv_bias: 2")
    model = specs.model(text)
    exc = specs.reject(model)
    issue = located(exc, model, line_of(text, "qkv_bias: 2"), "$.dims.qkv_bias")
    assert issue.expected == "0 or 1" and issue.got == "2"


# --------------------------------------------------------------------------- collection


def test_several_errors_in_one_component_are_reported_together(specs):
    text = edit(GQA, "o_proj:  { op: linear", "o_proj:  { op: linaer")
    text = edit(text, "merge:   { op: merge_heads", "merge:   { op: merge_head")
    text = edit(text, "q_heads: { op: view_split, in: q_proj,", "q_heads: { op: view_split, in: q_prj,")
    comp = specs.component("gqa_attention", text)
    exc = specs.reject(specs.model(LLAMA))
    assert len(exc.issues) >= 3, str(exc)
    located(exc, comp, line_of(text, "linaer"), "$.graph.o_proj")
    located(exc, comp, line_of(text, "merge_head,"), "$.graph.merge")
    located(exc, comp, line_of(text, "q_prj"), "$.graph.q_heads")
    assert "did you mean 'linear'?" in str(exc)
    assert "did you mean 'merge_heads'?" in str(exc)
    assert "did you mean 'q_proj'?" in str(exc)
    assert len({i.line for i in exc.issues}) >= 3


def test_several_errors_in_one_model_are_reported_together(specs):
    """Structure (unknown key), references (op, in:, component) and dims of one model file
    come back in one exception."""
    text = edit(LLAMA, "{ op: rmsnorm, in: decoder", "{ op: rmsnrm, in: decoder")
    text = edit(text, "lm_head:      { op: lm_head, in: norm", "lm_head:      { op: lm_head, in: nrm")
    text = edit(text, "ffn: swiglu_mlp", "ffn: swiglu_mpl")
    text = edit(text, "  d_model: config.hidden_size", "  d_model: config.hidden_size\n  d_modle: 1")
    text += "grpah: {}\n"
    model = specs.model(text)
    exc = specs.reject(model)
    located(exc, model, line_of(text, "rmsnrm"), "$.graph.norm")
    located(exc, model, line_of(text, "in: nrm"), "$.graph.lm_head")
    located(exc, model, line_of(text, "swiglu_mpl"), "$.components.ffn")
    located(exc, model, line_of(text, "d_modle"), "$.dims.d_modle")
    located(exc, model, line_of(text, "grpah"), "$.grpah")
    assert len(exc.issues) == 5, str(exc)
    for fix in ("'rmsnorm'", "'norm'", "'swiglu_mlp'", "'d_model'", "'graph'"):
        assert f"did you mean {fix}?" in str(exc)
    assert_all_located(exc)


def test_issue_render_shows_only_what_is_known():
    from archsql.errors import Issue

    assert Issue("m", file="f.yaml", line=3, got="x").render() == "f.yaml:3: m (got x)"
    assert Issue("m", file="f.yaml", expected="y", got="x").render() == "f.yaml: m (expected y, got x)"
