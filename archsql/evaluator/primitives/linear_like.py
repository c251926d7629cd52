"""Contractions with weights: linear, embedding, lm_head, expert linear.

A contraction's FLOPs are 2 × (product of all index sizes) of its einsum; a bias add is
one FLOP per output element.
"""

from __future__ import annotations

import sympy

from archsql.evaluator.dimmap import Axis, InputDim, NewDim, Singleton, keep
from archsql.evaluator.primitives.base import (
    Contraction,
    Ctx,
    Param,
    Primitive,
    WeightDecl,
    expect_axis,
    expect_rank,
    leading,
    numel,
)


def vocab_parallel(ctx: Ctx) -> tuple[list[dict], tuple]:
    """The vocabulary table [vocab, d_model] split by vocabulary rows over the attention
    tensor-parallel group, d_model whole — vLLM ``VocabParallelEmbedding`` / ``ParallelLMHead``
    (vllm/model_executor/layers/vocab_parallel_embedding.py), SGLang likewise.  The lookup then
    yields a pending sum (each rank holds only its rows: masked lookup + all-reduce), the head
    logits sharded by vocabulary (gathered where the logits leave the graph) — both inferred by
    the layouts pass, not written here."""
    vocab = ctx.dim("vocab")
    return [{"world": "attention", "parts": str(vocab.expr)}, {"replicated": True}], (vocab, ctx.dim("d_model"))


class Linear(Primitive):
    """y = x Wᵀ (+ b): ``...k,nk->...n``.  Weight [out, in] as stored by PyTorch."""

    math_class = "weight_gemm"

    kernel_kind = "gemm"

    partial_passes = True  # linear in its input

    shape_kind = "contract"
    params = {
        "in": Param(doc="input features (contracted)"),
        "out": Param(doc="output features"),
        "bias": Param("flag", 0, "1 when the layer has a bias vector"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_axis(ctx, 0, -1, ctx.dim("in"), "linear input features")

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        return (*keep(0, rank, rank - 1), NewDim(ctx.dim("out")))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        out = [WeightDecl("weight", (ctx.dim("out"), ctx.dim("in")))]
        if ctx.flag("bias"):
            out.append(WeightDecl("bias", (ctx.dim("out"),)))
        return out

    def contraction(self, ctx: Ctx) -> Contraction:
        last = len(ctx.ins[0]) - 1
        return Contraction({last: 0}, ((0, last, 1),))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        m = leading(ctx.ins[0])
        total = 2 * m * ctx.e("in") * ctx.e("out")
        if ctx.flag("bias"):
            total += m * ctx.e("out")
        return total


class Router(Linear):
    """The MoE gate: a linear from the hidden size to expert logits.  ``correction_bias: 1``
    adds the per-expert selection bias of aux-loss-free routing (``e_score_correction_bias``,
    used to choose experts, not to weight them)."""

    params = {
        "in": Param(doc="hidden size"),
        "out": Param(doc="number of experts (logits)"),
        "bias": Param("flag", 0),
        "correction_bias": Param("flag", 0, "1 with an e_score_correction_bias vector"),
    }

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        out = super().weights(ctx)
        if ctx.flag("correction_bias"):
            out.append(WeightDecl("e_score_correction_bias", (ctx.dim("out"),)))
        return out


class AbsorbedLinear(Primitive):
    """A per-head matmul by a slice of a stored weight: [..., heads, in] → [..., heads, out]
    (MLA's absorbed form: q_nope · W_UK, latent · W_UV, both slices of kv_b_proj).  FLOPs
    2·M·heads·in·out.

    The stored tensor is declared once: by the node that says ``holds`` (the per-head rows of
    the stored ``[heads·holds, out]`` tensor, MLA: ``d_qk_nope + d_v_head`` rows per head of
    kv_b_proj ``[n_heads·(d_qk_nope + d_v_head), d_kv_lora]``; give the node the stored
    module's ``path``), or by another node of the model (``holds`` 0: no weight of its own).
    A graph that runs only the absorbed form in every phase (sparse MLA) must hold the weight
    on one of its absorbed matmuls, or it would not be counted at all.  The weight is placed
    by the node's ``weight_axes``; it meets the input per head (no contraction over a split
    axis), so a head-split input and weight need no collective."""

    math_class = "weight_gemm"

    partial_passes = True  # linear in its input

    shape_kind = "contract"
    params = {
        "heads": Param(doc="heads"),
        "in": Param(doc="input features per head"),
        "out": Param(doc="output features per head"),
        "holds": Param(
            "dim", 0, "per-head rows of the stored [heads·holds, out] weight this node declares (0: none of its own)"
        ),
    }

    def check(self, ctx: Ctx) -> None:
        expect_axis(ctx, 0, -2, ctx.dim("heads"), "absorbed_linear heads")
        expect_axis(ctx, 0, -1, ctx.dim("in"), "absorbed_linear input features")

    def dimmap(self, ctx: Ctx):
        rank = len(ctx.ins[0])
        return (*keep(0, rank, rank - 1), NewDim(ctx.dim("out")))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        holds = ctx.dim("holds")
        if holds.value == 0:
            return []
        heads = ctx.dim("heads")
        rows = Axis(f"{heads.label}*({holds.label})", heads.expr * holds.expr, heads.value * holds.value)
        return [WeightDecl("weight", (rows, ctx.dim("out")))]

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * leading(ctx.ins[0]) * ctx.e("in") * ctx.e("out")


class Embedding(Primitive):
    """Token ids [B, s] → vectors [B, s, d]: a gather, no FLOPs.  Weight [vocab, d], unless
    ``shared: 1``: the lookup reads another node's table (an MTP layer embedding its next
    tokens with the model's embed_tokens) and has no weight of its own."""

    shape_kind = "source"
    default_role = "embedding"
    params = {
        "vocab": Param(doc="vocabulary size"),
        "d_model": Param(doc="embedding width"),
        "shared": Param("flag", 0, "1 when the table is another node's (no weight of its own)"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 2, "embedding takes token ids [B, s]")

    def dimmap(self, ctx: Ctx):
        return (*keep(0, 2), NewDim(ctx.dim("d_model")))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        if ctx.flag("shared"):
            return []
        return [WeightDecl("weight", (ctx.dim("vocab"), ctx.dim("d_model")), streamed=False)]

    def contraction(self, ctx: Ctx) -> Contraction:
        return Contraction({2: 1}, (), (0,))

    def default_weight_axes(self, ctx: Ctx):
        """Vocabulary-parallel: a shared lookup reads the model's table, split the same way."""
        return vocab_parallel(ctx)

    def io(self, ctx: Ctx):
        """A lookup reads the token ids and one table row per token (not the whole table)."""
        return numel(ctx.ins[0]) + numel(ctx.out), numel(ctx.out)


class LmHead(Primitive):
    """Logits where tokens are sampled: [B, s, d] → [B, positions, vocab].

    Serving engines compute logits only where a token is sampled: prefill samples the last
    position of each request (2·B·d·vocab); decode samples every new position (2·B·s·d·vocab
    — s = 1 normally, s > 1 when speculative tokens are verified).  ``tied: 1`` reuses the
    embedding matrix, ``shared: 1`` another head's matrix (an MTP layer predicting with the
    model's lm_head): no weight of its own either way.
    """

    math_class = "weight_gemm"

    kernel_kind = "gemm"

    partial_passes = True  # linear in its input

    shape_kind = "contract"
    default_role = "lm_head"
    params = {
        "d_model": Param(doc="hidden size"),
        "vocab": Param(doc="vocabulary size"),
        "tied": Param("flag", 0, "1 when the weight is the embedding matrix"),
        "shared": Param("flag", 0, "1 when the weight is another head's (no weight of its own)"),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 3, "lm_head input [B, s, d]")
        expect_axis(ctx, 0, -1, ctx.dim("d_model"), "lm_head input features")

    def dimmap(self, ctx: Ctx):
        positions = Singleton() if ctx.phase == "prefill" else InputDim(0, 1)
        return (*keep(0, 1), positions, NewDim(ctx.dim("vocab")))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        if ctx.flag("tied") or ctx.flag("shared"):
            return []
        return [WeightDecl("weight", (ctx.dim("vocab"), ctx.dim("d_model")))]

    def contraction(self, ctx: Ctx) -> Contraction:
        return Contraction({2: 0}, ((0, 2, 1),))

    def default_weight_axes(self, ctx: Ctx):
        """Vocabulary-parallel; a tied or shared head reads its table split the same way."""
        return vocab_parallel(ctx)

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return 2 * leading(ctx.out) * ctx.e("d_model") * ctx.e("vocab")


class ExpertLinear(Primitive):
    """One routed expert's linear over dispatched tokens [B, s, k, in] → [B, s, k, out].

    The node stands for ``experts`` copies (one per expert, weight [out, in] each); a
    token uses ``top_k`` of them.  Per copy it sees B·s·k/experts tokens (uniform
    routing), so copies × per-copy FLOPs = 2·B·s·k·in·out.
    """

    math_class = "weight_gemm"

    kernel_kind = "grouped_gemm"

    partial_passes = True  # linear in its input

    shape_kind = "contract"
    params = {
        "in": Param(doc="input features"),
        "out": Param(doc="output features"),
        "experts": Param(doc="routed experts per layer"),
        "top_k": Param(doc="experts each token is sent to"),
        "bias": Param("flag", 0),
    }

    def check(self, ctx: Ctx) -> None:
        expect_rank(ctx, 0, 4, "expert_linear takes dispatched tokens [B, s, top_k, in]")
        expect_axis(ctx, 0, 2, ctx.dim("top_k"), "expert_linear dispatch axis")
        expect_axis(ctx, 0, 3, ctx.dim("in"), "expert_linear input features")

    def dimmap(self, ctx: Ctx):
        return (*keep(0, 4, 3), NewDim(ctx.dim("out")))

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        out = [WeightDecl("weight", (ctx.dim("out"), ctx.dim("in")))]
        if ctx.flag("bias"):
            out.append(WeightDecl("bias", (ctx.dim("out"),)))
        return out

    def contraction(self, ctx: Ctx) -> Contraction:
        return Contraction({3: 0}, ((0, 3, 1),))

    def flops(self, ctx: Ctx) -> sympy.Expr:
        tokens = leading(ctx.ins[0]) / ctx.e("experts")
        total = 2 * tokens * ctx.e("in") * ctx.e("out")
        if ctx.flag("bias"):
            total += tokens * ctx.e("out")
        return total

    def io(self, ctx: Ctx):
        """Per copy: its share of the dispatched tokens read and its outputs written (the
        same uniform routing as the FLOPs), so copies × per copy = the whole tensors."""
        experts = ctx.e("experts")
        return (numel(ctx.ins[0]) / experts,), numel(ctx.out) / experts

    def copies(self, ctx: Ctx) -> sympy.Expr:
        return ctx.e("experts")

    def active_copies(self, ctx: Ctx) -> sympy.Expr:
        return ctx.e("top_k")


class StackedExpertLinear(ExpertLinear):
    """Routed experts held as one stacked parameter per layer: a fused experts module whose
    ``nn.Parameter`` is [experts, out, in] (``transposed: 1``: [experts, in, out], as
    Llama-4 applies it with ``bmm(x, W)``), bias [experts, out] named ``<param>_bias``.
    Same copies, FLOPs and per-copy weight as expert_linear; only the checkpoint layout
    differs: the node's path names the parameter itself (``experts.gate_up_proj``), one
    tensor per layer with a leading experts axis (the weights row keeps the per-copy shape).
    Sources: transformers GptOssExperts (gate_up_proj, gate_up_proj_bias, down_proj, …),
    Llama4TextExperts (gate_up_proj, down_proj)."""

    params = {**ExpertLinear.params, "transposed": Param("flag", 0, "1 when stored [experts, in, out]")}

    def weights(self, ctx: Ctx) -> list[WeightDecl]:
        axes = (ctx.dim("out"), ctx.dim("in"))
        out = [WeightDecl("weight", axes[::-1] if ctx.flag("transposed") else axes, suffix="", stacked=True)]
        if ctx.flag("bias"):
            out.append(WeightDecl("bias", (ctx.dim("out"),), suffix="_bias", stacked=True))
        return out

    def contraction(self, ctx: Ctx) -> Contraction:
        if ctx.flag("transposed"):
            return Contraction({3: 1}, ((0, 3, 0),))
        return super().contraction(ctx)


class ScaledEmbedding(Embedding):
    """An embedding whose forward multiplies the gathered rows by a constant (Gemma:
    √d_model): token ids [B, s] → [B, s, d], 1 FLOP per output element.  Weight [vocab, d].
    Source: transformers Gemma2TextScaledWordEmbedding.forward."""

    def flops(self, ctx: Ctx) -> sympy.Expr:
        return numel(ctx.out)
