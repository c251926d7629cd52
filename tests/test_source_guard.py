"""The source guard: every stream ``src`` anchor must be in the forward source the model
names (``source:``), or a located, actionable error says which anchor, where, and what the
source holds now.

The sources here are small stand-in files written by the tests (the project ships no
third-party modeling code).  GLM-5.2's anchor, `topk_indices = prev_topk_indices`, is the
line of transformers' GlmMoeDsaAttention.forward that hands a "shared" layer the previous
full layer's top-k; the stand-in holds it in the same surroundings.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from archsql.cli import cli
from archsql.publish_check import validate
from archsql.schema.spec import parse_model
from archsql.source_guard import check_sources, fragments
from archsql.specs import MODELS_DIR

GLM52 = MODELS_DIR / "GLM-5.2.yaml"
NAME = "modeling_glm_moe_dsa.py"

FORWARD = """\
class GlmMoeDsaAttention(nn.Module):
    def forward(self, hidden_states, prev_topk_indices=None):
        if not self.skip_topk or prev_topk_indices is None:
            topk_indices = self.indexer(hidden_states)
        else:
            topk_indices = prev_topk_indices  # [B, S, topk]
        return topk_indices
"""


def _spec(path: Path = GLM52):
    spec, col = parse_model(path)
    assert not col.issues
    return spec


def _src_line(path: Path = GLM52) -> int:
    """Line of the topk stream's src: in the model YAML (1-based)."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line.strip().startswith("src:"))


@pytest.fixture
def sources(tmp_path) -> Path:
    """A checkout-like folder: <root>/src/transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py."""
    folder = tmp_path / "src" / "transformers" / "models" / "glm_moe_dsa"
    folder.mkdir(parents=True)
    (folder / NAME).write_text(FORWARD)
    return tmp_path


def test_anchor_is_parsed_from_the_src_sentence():
    assert fragments(_spec().stacks["decoder"].stream_specs["topk"].src) == ["topk_indices = prev_topk_indices"]
    assert _spec().source == ["src/transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py"]


def test_anchor_found_in_the_named_source(sources):
    """The model's source: resolves under a checkout folder, or as the file itself."""
    assert check_sources(_spec(), [sources]) == []
    assert check_sources(_spec(), [sources / "src/transformers/models/glm_moe_dsa" / NAME]) == []


def test_anchor_matches_across_line_breaks(tmp_path):
    """Runs of spaces and line breaks in the source match one space in the fragment."""
    wrapped = FORWARD.replace("topk_indices = prev_topk_indices", "topk_indices  =\n                prev_topk_indices")
    (tmp_path / NAME).write_text(wrapped)
    assert check_sources(_spec(), [tmp_path]) == []


def test_changed_source_is_a_located_error_with_the_closest_line(tmp_path):
    """The source renamed the variable: the anchor no longer matches.  The error sits on the
    stream's src: line of GLM-5.2.yaml, names the fragment, the file searched and the line
    that now stands there."""
    (tmp_path / NAME).write_text(FORWARD.replace("prev_topk_indices  #", "previous_layer_topk  #"))
    (issue,) = check_sources(_spec(), [tmp_path])
    assert (issue.file, issue.line) == (str(GLM52), _src_line())
    assert issue.path == "$.stacks.decoder.streams.topk.src"
    assert "stream 'topk' of stack 'decoder'" in issue.message
    assert "`topk_indices = prev_topk_indices` is not in the forward source" in issue.message
    assert issue.expected == f"the fragment in {tmp_path / NAME}"
    assert issue.got == f"closest line {NAME}:6 `topk_indices = previous_layer_topk # [B, S, topk]`"
    assert "quote the current code in src" in issue.hint


def test_named_source_missing_under_the_given_sources(tmp_path):
    (tmp_path / "modeling_deepseek_v32.py").write_text(FORWARD)
    (issue,) = check_sources(_spec(), [tmp_path])
    assert issue.path == "$.source"
    assert (
        issue.message
        == "forward source 'src/transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py' is not under the given sources"
    )
    assert issue.expected.startswith(f"a file named {NAME}")
    assert "--source PATH" in issue.hint


def test_streams_without_a_named_source(tmp_path, sources):
    """A derived model that drops source: still quotes the code in its stream: the error sits
    on the src and says how to name the file."""
    derived = tmp_path / "GLM-5.2-nosource.yaml"
    derived.write_text("model: GLM-5.2-nosource\nextends: GLM-5.2\nsource: null\n")
    (issue,) = check_sources(_spec(derived), [sources])
    assert issue.path == "$.stacks.decoder.streams.topk.src"
    assert "the model names no source" in issue.message
    assert issue.hint.startswith("add the modeling file to the model: source: ")


def test_models_without_streams_pass_without_a_source(tmp_path):
    assert check_sources(_spec(MODELS_DIR / "GLM-5.yaml"), [tmp_path]) == []


def test_validate_runs_the_source_guard_only_with_sources(tmp_path, sources):
    (tmp_path / NAME).write_text(FORWARD.replace("= prev_topk_indices", "= cached_topk"))
    assert validate("GLM-5.2") == []
    assert validate("GLM-5.2", sources=[sources]) == []
    (error,) = validate("GLM-5.2", sources=[tmp_path / NAME])
    assert error.guard == "source"
    assert error.location == f"{GLM52}:{_src_line()}:9 $.stacks.decoder.streams.topk.src"


def test_cli_validate_with_a_changed_source(tmp_path):
    (tmp_path / NAME).write_text(FORWARD.replace("= prev_topk_indices", "= cached_topk"))
    result = CliRunner().invoke(cli, ["validate", "GLM-5.2", "--source", str(tmp_path)])
    assert result.exit_code == 1
    assert "source: 1 error" in result.output
    flat = " ".join(result.output.split())  # a long message wraps at the terminal's width
    assert "src anchor `topk_indices = prev_topk_indices` is not in the forward source" in flat
    assert "GLM-5.2: not publishable (1 error)" in flat
