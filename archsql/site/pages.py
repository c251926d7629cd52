"""The pages of the static site, as data: which saved query (or named view) feeds each figure,
how the figure shows it, and what the page says when the store has no rows for it.

A figure never computes a number: a table shows the query's columns, a chart is a Vega-Lite
spec (:mod:`archsql.site.charts`) over the query's rows, and every figure links to the SQL
that produced its rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from archsql.site import charts


@dataclass(frozen=True)
class Column:
    """A table column: the query column, its header, and how its value is shown
    (``human``, ``bytes``, ``seconds``, ``text``, or ``unit``: as the row's ``unit`` column
    says; the exact value is kept in ``data-value``)."""

    name: str
    header: str
    fmt: str = "text"


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    source: str  # a saved query (archsql/queries/NAME.sql) or a named view
    empty: str  # what the page says when the source has no rows for what the page shows
    chart: Callable[[str], dict[str, Any]] | None = None  # Vega-Lite spec over the named data `source`
    columns: tuple[Column, ...] = ()  # a table when given
    filters: tuple[str, ...] = ()  # page controls whose field filters this figure's rows
    note: str = ""
    also: tuple[str, ...] = ()  # more saved queries the chart draws (their rows filtered like `source`'s)
    needs: str = ""  # a relation only some stores hold (the kernel corpus's): without it the figure has no rows

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source, *self.also)


@dataclass(frozen=True)
class Page:
    slug: str  # "gallery", "model", "deploy"
    title: str
    figures: tuple[Figure, ...]
    controls: tuple[str, ...] = ()  # fields the page offers a selector for (first value selected)
    per_model: bool = False
    intro: str = ""
    store: str = "main"  # "main": the --db store; "design": the --design-store of `archsql compare`
    # a control whose value splits the rows of the figures it filters into one data file per
    # value, loaded when the value is picked (the explorer: one file per deployment)
    split: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


GALLERY = Page(
    slug="gallery",
    title="Gallery",
    intro="Every model in the store side by side. Click a header to sort; type or pick to filter the table and the plots.",
    figures=(
        Figure(
            "models",
            "Models",
            "site_gallery",
            "The store holds no models: build some with `archsql build`.",
            columns=(
                Column("model", "model"),
                Column("params", "params", "human"),
                Column("active_params", "active params", "human"),
                Column("layers", "layers", "human"),
                Column("attention_family", "attention family"),
                Column("attention_pattern", "attention pattern"),
                Column("kv_bytes_per_token_bf16", "KV / token bf16", "bytes"),
                Column("kv_bytes_per_token_fp8", "KV / token fp8", "bytes"),
                Column("kv_bytes_per_token_fp4", "KV / token fp4", "bytes"),
                Column("state_bytes_per_request_bf16", "state / request bf16", "bytes"),
            ),
        ),
        Figure(
            "kv_curve",
            "KV cache bytes per request vs context (bf16)",
            "site_kv_curve",
            "None of the models shown keeps a cache, or the store has no decode workloads "
            "(`archsql workload add` adds one): there is no cache size per context to plot.",
            chart=charts.kv_curve,
            note="One line per model at every decode workload's context; sliding windows flatten, recurrent state stays flat.",
        ),
        Figure(
            "params",
            "Parameters vs active parameters",
            "site_gallery",
            "The store holds no models.",
            chart=charts.params_vs_active,
        ),
    ),
)

INSPECTOR = Page(
    slug="model",
    title="Model inspector",
    per_model=True,
    intro="The evaluated graph, grouped by stack, layer group (template) and component. "
    "Hover a FLOP count for its symbolic formula.",
    figures=(
        Figure("graph", "Evaluated graph", "site_graph", "The store has no graph rows for this model."),
        Figure(
            "caches",
            "Caches",
            "site_caches",
            "This model keeps no cache across decode steps.",
            columns=(
                Column("uid", "node"),
                Column("cache", "cache"),
                Column("kind", "kind"),
                Column("growth", "growth law"),
                Column("window", "window", "human"),
                Column("ratio", "ratio", "human"),
                Column("elements", "elements / token", "human"),
                Column("dtype", "dtype"),
            ),
        ),
        Figure(
            "checkpoint",
            "Checkpoint reconciliation",
            "checkpoint_reconciliation",
            "No checkpoint is attached to this model in this store, so there is no per-tensor reconciliation "
            "to show (archsql.store.write_checkpoint attaches one; `archsql validate MODEL --checkpoint PATH` "
            "checks one without keeping it).",
            columns=(
                Column("checkpoint", "checkpoint"),
                Column("canonical_name", "tensor"),
                Column("status", "status"),
                Column("expected_dtype", "expected dtype"),
                Column("actual_dtype", "actual dtype"),
                Column("expected_shape", "expected shape"),
                Column("actual_shape", "actual shape"),
                Column("expected_bytes", "expected bytes", "human"),
                Column("actual_bytes", "actual bytes", "human"),
            ),
        ),
    ),
)

NO_MEASURED = (
    "The kernel corpus holds no measured kernel with the signature of any kernel of this step (this deployment "
    "and workload), or the store has no corpus (`archsql corpus import …` adds one): the step is speed of light only."
)

DEPLOY = Page(
    slug="deploy",
    title="Deployment explorer",
    per_model=True,
    controls=("deployment", "workload", "sweep"),
    split="deployment",
    intro="Speed of light and memory of this model on one deployment; pick the deployment and the workload.",
    figures=(
        Figure(
            "memory",
            "Per-device memory by part",
            "site_device_memory",
            "The store has no per-device memory rows for this model on this deployment.",
            chart=charts.device_memory,
            filters=("deployment",),
            columns=(
                Column("workload", "workload"),
                Column("stage", "stage", "human"),
                Column("batch", "batch", "human"),
                Column("context", "context", "human"),
                Column("part", "part"),
                Column("bytes", "bytes", "bytes"),
                Column("usable_bytes", "usable", "bytes"),
                Column("fits", "fits"),
            ),
        ),
        Figure(
            "step_time",
            "Step time by what bounds each op",
            "site_step_time",
            "The store has no speed-of-light rows for this model on this deployment.",
            chart=charts.step_time,
            filters=("deployment",),
            columns=(
                Column("workload", "workload"),
                Column("phase", "phase"),
                Column("bound", "bound by"),
                Column("ops", "ops", "human"),
                Column("time_s", "time", "seconds"),
            ),
        ),
        Figure(
            "roofline",
            "Roofline of op kinds",
            "site_roofline",
            "The store has no op rows with FLOPs and bytes for this model, deployment and workload.",
            chart=charts.roofline,
            filters=("deployment", "workload"),
            also=("site_roofline_roofs",),
            columns=(
                Column("phase", "phase"),
                Column("op", "op"),
                Column("bound", "bound by"),
                Column("flops", "FLOPs", "human"),
                Column("bytes", "bytes", "bytes"),
                Column("arithmetic_intensity", "FLOP / byte", "human"),
                Column("flops_per_s", "attained FLOP/s", "human"),
                Column("peak_flops_per_s", "peak FLOP/s", "human"),
            ),
            note="Dashed: the GPU's roofs (gpus table): HBM bandwidth × intensity up to the peak of each math dtype "
            "the ops use (site_roofline_roofs).",
        ),
        Figure(
            "measured",
            "Measured kernel time over speed of light",
            "site_measured_vs_sol",
            NO_MEASURED,
            chart=charts.measured_vs_sol,
            filters=("deployment", "workload"),
            needs="measured_vs_sol",
            note="Each kernel of the step the kernel corpus holds a measurement of the same signature for, under the "
            "framework policy (each library's newest version holding it) and the envelope (fastest correct row).",
            columns=(
                Column("policy", "policy"),
                Column("measured_with", "framework"),
                Column("uid", "kernel (node)"),
                Column("op_kind", "op kind"),
                Column("launches", "launches", "human"),
                Column("sol_s", "SOL", "seconds"),
                Column("measured_s", "measured", "seconds"),
                Column("measured_over_sol", "measured / SOL", "human"),
                Column("library_version", "version"),
                Column("kernel", "library kernel"),
            ),
        ),
        Figure(
            "max_batch",
            "Max batch vs context",
            "site_max_batch",
            "Not one request fits on this deployment at any stored decode context (or the store has no decode "
            "workloads), so there is no max batch to plot.",
            chart=charts.max_batch,
            filters=("deployment",),
            columns=(
                Column("context", "context", "human"),
                Column("max_batch", "max batch", "human"),
                Column("limited_by", "limited by"),
            ),
        ),
        Figure(
            "pareto",
            "Decode throughput: per GPU vs per user, every deployment",
            "site_pareto",
            "No decode step of this model fits on any deployment in the store, so there is no throughput to plot.",
            chart=charts.pareto,
            columns=(
                Column("deployment", "deployment"),
                Column("workload", "workload"),
                Column("gpus", "GPUs", "human"),
                Column("tokens_per_s_per_user", "tokens/s per user", "human"),
                Column("tokens_per_s_per_gpu", "tokens/s per GPU", "human"),
                Column("on_frontier", "on the frontier"),
            ),
            note="Every stored deployment × decode workload that fits; the frontier's points are labelled, and the "
            "chosen deployment's points ringed and labelled in bold.",
        ),
        Figure(
            "sweep",
            "A saved sweep's Pareto frontier: tokens/s per GPU vs per user, by layout",
            "site_sweep_pareto",
            "No sweep of this model is saved in the store, or no point of a saved one fits: `archsql sweep MODEL "
            "--layout tp8 --layout tp4,dp2 … --save NAME` keeps one (the grid of `archsql sweep` otherwise lives only "
            "for its query).",
            chart=charts.sweep_pareto,
            filters=("sweep",),
            needs="sweep_points",
            columns=(
                Column("layout", "layout"),
                Column("gpu", "GPU"),
                Column("gpus", "GPUs", "human"),
                Column("batch", "batch", "human"),
                Column("context", "context", "human"),
                Column("tokens_per_s_per_user", "tokens/s per user", "human"),
                Column("tokens_per_s_per_gpu", "tokens/s per GPU", "human"),
                Column("on_frontier", "on the frontier"),
                Column("stale", "model built again since"),
            ),
            note="Every point of the sweep that fits (decode step at each batch × context); the frontier's points are "
            "labelled with their layout and batch. The points are the sweep's as saved: a later build of the model "
            "marks them stale (save the sweep again).",
        ),
    ),
)

NO_CORPUS = (
    "The store has no kernel corpus: `archsql corpus import aiconfigurator` (or `archsql corpus import FILE.csv`) "
    "adds measured kernels."
)

CORPUS = Page(
    slug="corpus",
    title="Corpus browser",
    intro="The kernel corpus of the store: what is measured (op kind × GPU × library), how close each kernel comes "
    "to the roofline, and what the imports rejected and why.",
    figures=(
        Figure(
            "coverage",
            "Coverage: measurements per op kind × GPU × library",
            "site_corpus_coverage",
            NO_CORPUS,
            chart=charts.corpus_coverage,
            needs="kernel_measurements",
            columns=(
                Column("op_kind", "op kind"),
                Column("family", "family"),
                Column("gpu", "GPU"),
                Column("library", "library"),
                Column("measurements", "measurements", "human"),
                Column("library_versions", "versions"),
                Column("kernels", "kernels", "human"),
            ),
        ),
        Figure(
            "efficiency",
            "Measured efficiency vs the roofline, per kernel",
            "site_corpus_efficiency",
            NO_CORPUS,
            chart=charts.corpus_efficiency,
            needs="kernel_measurements",
            note="A measurement's share of the roofline is its largest utilization (MFU, MBU or link use): the roofline "
            "time over the measured time. The work counts are lower bounds, so the shares are too.",
            columns=(
                Column("gpu", "GPU"),
                Column("op_kind", "op kind"),
                Column("library", "library"),
                Column("library_version", "version"),
                Column("kernel", "kernel"),
                Column("measurements", "measurements", "human"),
                Column("lowest", "lowest", "human"),
                Column("median", "median", "human"),
                Column("highest", "highest", "human"),
            ),
        ),
        Figure(
            "rejects",
            "Rejected rows and why",
            "site_corpus_rejects",
            "No import rejected a row (or the store has no kernel corpus).",
            needs="kernel_corpus_rejects",
            columns=(
                Column("source_key", "source"),
                Column("op_kind", "op kind"),
                Column("field", "field"),
                Column("reason", "reason"),
                Column("rows", "rows", "human"),
                Column("first_location", "first at"),
                Column("first_value", "value"),
            ),
        ),
    ),
)


NO_DESIGN = (
    "The design store holds no component comparison (or no design store was given): run `archsql compare SLOT "
    "-C COMPONENT@MODEL … --store PATH`, then `archsql site --design-store PATH`."
)
NO_EDIT = (
    "The design store records no model edit (or no design store was given): run `archsql edit MODEL --swap "
    "SLOT=COMPONENT … --store PATH` (or --set DIM=VALUE), then `archsql site --design-store PATH`."
)
NO_AUDIT = (
    "The design store holds no audit card (or no design store was given): run `archsql audit BASELINE CANDIDATE "
    "--changed-field FIELD --store PATH`, then `archsql site --design-store PATH`."
)

DESIGN = Page(
    slug="design",
    title="Design playground",
    store="design",
    intro="From the design store the design commands wrote: components compared for one slot under one contract "
    "(`archsql compare`), each recorded model edit old → new with its graph diff (`archsql edit`), and audit cards "
    "with their decision and evidence (`archsql audit`).",
    figures=(
        Figure(
            "comparison",
            "Component comparison",
            "site_component_comparison",
            NO_DESIGN,
            needs="design_comparison",
            columns=(
                Column("component", "component"),
                Column("origin", "from"),
                Column("role", "role"),
                Column("context", "context", "human"),
                Column("params_per_layer", "params / layer", "human"),
                Column("weight_bytes_per_layer", "weights / layer", "bytes"),
                Column("cache_growth", "cache growth"),
                Column("cache_bytes_per_request", "cache / request", "bytes"),
                Column("prefill_time_s", "prefill", "seconds"),
                Column("decode_time_s", "decode step", "seconds"),
            ),
        ),
        Figure(
            "comparison_cache",
            "Cache bytes per request vs context, per component",
            "site_component_comparison",
            NO_DESIGN,
            chart=charts.comparison("cache_bytes_per_request", "cache bytes per request (one layer)"),
            needs="design_comparison",
        ),
        Figure(
            "comparison_prefill",
            "Prefill time vs context, per component",
            "site_component_comparison",
            NO_DESIGN,
            chart=charts.comparison("prefill_time_s", "speed-of-light prefill time (s, one layer)"),
            needs="design_comparison",
        ),
        Figure(
            "comparison_decode",
            "Decode step time vs context, per component",
            "site_component_comparison",
            NO_DESIGN,
            chart=charts.comparison("decode_time_s", "speed-of-light decode step (s, one layer)"),
            needs="design_comparison",
        ),
        Figure(
            "edit_ledger",
            "Model edits: the ledger old → new",
            "site_edit_ledger",
            NO_EDIT,
            needs="design_edits",
            columns=(
                Column("edit", "edit"),
                Column("layer_group", "layer group"),
                Column("layers_old", "layers old", "human"),
                Column("layers_new", "layers new", "human"),
                Column("quantity", "quantity"),
                Column("old", "old", "unit"),
                Column("new", "new", "unit"),
                Column("delta", "delta", "unit"),
                Column("ratio", "new / old", "human"),
            ),
            note="Each layer group (block template) and the whole model, as `archsql edit` reported them (recorded in "
            "the design store's design_edit_ledger): prefill FLOPs and KV at the edit's context, SOL and device memory "
            "on its deployment.",
        ),
        Figure(
            "edit_graph",
            "Model edits: the graph diff on the inspector view",
            "site_edit_graph",
            NO_EDIT,
            needs="design_edits",
            note="The derived model's graph grouped like the inspector's; nodes the edit added, changed or removed "
            "(the base's, shown where they were) are highlighted, and a changed node names what changed "
            "(`archsql diff BASE DERIVED`, recorded in design_edit_diff).",
        ),
        Figure(
            "audit_cards",
            "Audit cards",
            "site_audit_cards",
            NO_AUDIT,
            needs="audit_cards",
            also=("site_audit_evidence",),
        ),
    ),
)

PAGES = (GALLERY, INSPECTOR, DEPLOY, CORPUS, DESIGN)

# The row order of a named view read whole (a saved query orders its own rows).
VIEW_ORDER = {
    "checkpoint_reconciliation": "checkpoint, canonical_name, part",
    "component_comparison": "position, context",
}
