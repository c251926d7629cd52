"""Vega-Lite specs of the site's charts, written with altair over named data.

Each function takes the name of the dataset (the saved query) and returns a spec; the page
binds the query's rows to that name at load time and again whenever a filter changes, so the
numbers drawn are the query's rows as they are (stacking and axes are Vega-Lite's).
"""

from __future__ import annotations

from typing import Any

import altair as alt

WIDTH = 560
HEIGHT = 320


def _spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    return chart.properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)


def kv_curve(name: str) -> dict[str, Any]:
    return _spec(
        alt.Chart(alt.NamedData(name))
        .mark_line(point=True)
        .encode(
            x=alt.X("context:Q", scale=alt.Scale(type="log", base=2), title="context (tokens)"),
            y=alt.Y(
                "bytes_per_request:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~s"),
                title="cache bytes per request",
            ),
            color=alt.Color("model:N", legend=alt.Legend(columns=2, symbolLimit=60)),
            tooltip=["model:N", "context:Q", alt.Tooltip("bytes_per_request:Q", format=",.0f")],
        )
    )


def params_vs_active(name: str) -> dict[str, Any]:
    return _spec(
        alt.Chart(alt.NamedData(name))
        .mark_point(filled=True, size=70)
        .encode(
            x=alt.X("params:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~s"), title="parameters"),
            y=alt.Y(
                "active_params:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~s"),
                title="active parameters per token",
            ),
            color=alt.Color("attention_family:N", title="attention family"),
            tooltip=[
                "model:N",
                alt.Tooltip("params:Q", format=",.0f"),
                alt.Tooltip("active_params:Q", format=",.0f"),
            ],
        )
    )


def device_memory(name: str) -> dict[str, Any]:
    return _spec(
        alt.Chart(alt.NamedData(name))
        .mark_bar()
        .encode(
            x=alt.X("workload:N", title="workload"),
            xOffset=alt.XOffset("stage:N"),
            y=alt.Y("bytes:Q", stack="zero", axis=alt.Axis(format="~s"), title="bytes per device"),
            color=alt.Color("part:N", sort=["weights", "kv", "activations", "reserve"]),
            tooltip=["workload:N", "stage:Q", "part:N", alt.Tooltip("bytes:Q", format=",.0f"), "fits:N"],
        )
    )


def step_time(name: str) -> dict[str, Any]:
    """One panel per phase, each with its own time axis (a long prefill would flatten decode)."""
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("workload:N", title="workload"),
            y=alt.Y("time_s:Q", stack="zero", axis=alt.Axis(format="~s"), title="speed-of-light step time (s)"),
            color=alt.Color("bound:N", title="op bound by"),
            tooltip=["workload:N", "bound:N", "ops:Q", alt.Tooltip("time_s:Q", format=".3e")],
        )
        .properties(width=WIDTH // 2 - 20, height=HEIGHT)
    )
    chart = alt.FacetChart(data=alt.NamedData(name), spec=bars, facet=alt.Facet("phase:N", title=None))
    return chart.resolve_scale(x="independent", y="independent").to_dict(validate=True)


def roofline(name: str, roofs: str | None = None) -> dict[str, Any]:
    """Each op kind at its intensity and attained FLOP/s; with ``roofs`` (the rows of
    site_roofline_roofs) the GPU's HBM roof and compute peaks drawn as lines under them."""
    points = (
        alt.Chart()
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("arithmetic_intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)"),
            y=alt.Y("flops_per_s:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~s"), title="attained FLOP/s"),
            color=alt.Color("bound:N", title="bound by"),
            shape=alt.Shape("phase:N"),
            tooltip=[
                "op:N",
                "bound:N",
                alt.Tooltip("flops:Q", format=".3e"),
                alt.Tooltip("bytes:Q", format=".3e"),
                alt.Tooltip("arithmetic_intensity:Q", format=".3g"),
                alt.Tooltip("flops_per_s:Q", format=".3e"),
                alt.Tooltip("peak_flops_per_s:Q", format=".3e"),
            ],
        )
    )
    if roofs is None:
        return _spec(points.properties(data=alt.NamedData(name)))
    lines = (
        alt.Chart(alt.NamedData(roofs))
        .mark_line(color="#888", strokeDash=[4, 3])
        .encode(
            x="arithmetic_intensity:Q",
            y="flops_per_s:Q",
            detail="roof:N",
            order="point:O",
            tooltip=[
                "roof:N",
                "gpu:N",
                alt.Tooltip("peak_flops_per_s:Q", format=".3e"),
                alt.Tooltip("hbm_bytes_per_s:Q", format=".3e"),
                alt.Tooltip("ridge:Q", format=".3g", title="ridge (FLOP/byte)"),
            ],
        )
    )
    labels = (
        alt.Chart(alt.NamedData(roofs))
        .transform_filter("datum.point == 3")
        .mark_text(align="right", dy=-7, fontSize=10, color="#555")
        .encode(x="arithmetic_intensity:Q", y="flops_per_s:Q", text="roof:N")
    )
    return (
        alt.layer(lines, labels, points, data=alt.NamedData(name))
        .properties(width=WIDTH, height=HEIGHT)
        .to_dict(validate=True)
    )


def max_batch(name: str) -> dict[str, Any]:
    return _spec(
        alt.Chart(alt.NamedData(name))
        .mark_line(point=True)
        .encode(
            x=alt.X("context:Q", scale=alt.Scale(type="log", base=2), title="context (tokens)"),
            y=alt.Y("max_batch:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~s"), title="max batch"),
            color=alt.Color("limited_by:N", title="limited by"),
            tooltip=["context:Q", alt.Tooltip("max_batch:Q", format=",.0f"), "limited_by:N"],
        )
    )


def pareto(name: str) -> dict[str, Any]:
    """Every decode point that fits; the frontier's points labelled with their deployment, and
    the deployment chosen on the page (the param ``chosen_deployment``, which the page sets to
    its deployment control's value) ringed and labelled."""
    chosen = alt.param(name="chosen_deployment", value="")
    is_chosen = "datum.deployment === chosen_deployment"
    base = alt.Chart().encode(
        x=alt.X("tokens_per_s_per_user:Q", scale=alt.Scale(type="log"), title="tokens/s per user"),
        y=alt.Y("tokens_per_s_per_gpu:Q", scale=alt.Scale(type="log"), title="tokens/s per GPU"),
    )
    points = base.mark_point(filled=True).encode(
        color=alt.Color("on_frontier:N", title="Pareto frontier", sort=[True, False]),
        size=alt.condition("datum.on_frontier", alt.value(110), alt.value(40)),
        stroke=alt.condition(is_chosen, alt.value("#111"), alt.value(None)),
        strokeWidth=alt.condition(is_chosen, alt.value(2), alt.value(0)),
        tooltip=[
            "deployment:N",
            "workload:N",
            "batch:Q",
            "context:Q",
            alt.Tooltip("tokens_per_s_per_user:Q", format=",.1f"),
            alt.Tooltip("tokens_per_s_per_gpu:Q", format=",.1f"),
        ],
    )
    labels = (
        base.transform_filter(f"datum.on_frontier && !({is_chosen})")
        .mark_text(align="left", dx=7, dy=-6, fontSize=10)
        .encode(text=alt.Text("deployment:N"))
    )
    chosen_labels = (
        base.transform_filter(is_chosen)
        .mark_text(align="left", dx=7, dy=-6, fontSize=10, fontWeight="bold")
        .encode(text=alt.Text("deployment:N"))
    )
    return (
        alt.layer(points, labels, chosen_labels, data=alt.NamedData(name))
        .add_params(chosen)
        .properties(width=WIDTH, height=HEIGHT)
        .to_dict(validate=True)
    )


def sweep_pareto(name: str) -> dict[str, Any]:
    """A saved sweep's points that fit, one colour per layout; the frontier drawn as a line
    through its points, each labelled with its layout and batch."""
    base = alt.Chart().encode(
        x=alt.X("tokens_per_s_per_user:Q", scale=alt.Scale(type="log"), title="tokens/s per user"),
        y=alt.Y("tokens_per_s_per_gpu:Q", scale=alt.Scale(type="log"), title="tokens/s per GPU"),
    )
    frontier = base.transform_filter("datum.on_frontier").mark_line(color="#444", strokeDash=[5, 3])
    points = base.mark_point(filled=True).encode(
        color=alt.Color("layout:N", title="layout"),
        shape=alt.Shape("on_frontier:N", title="Pareto frontier", sort=[True, False]),
        size=alt.condition("datum.on_frontier", alt.value(120), alt.value(45)),
        tooltip=[
            "sweep:N",
            "layout:N",
            "gpu:N",
            "gpus:Q",
            "batch:Q",
            "context:Q",
            alt.Tooltip("tokens_per_s_per_user:Q", format=",.1f"),
            alt.Tooltip("tokens_per_s_per_gpu:Q", format=",.1f"),
            alt.Tooltip("ttft_s:Q", format=".3e"),
            alt.Tooltip("tpot_s:Q", format=".3e"),
        ],
    )
    labels = (
        base.transform_filter("datum.on_frontier")
        .transform_calculate(label="datum.layout + ' · b' + datum.batch")
        .mark_text(align="left", dx=8, dy=-7, fontSize=10)
        .encode(text="label:N")
    )
    return (
        alt.layer(frontier, points, labels, data=alt.NamedData(name))
        .properties(width=WIDTH, height=HEIGHT)
        .to_dict(validate=True)
    )


def measured_vs_sol(name: str) -> dict[str, Any]:
    """Measured time over speed of light per kernel, one mark per policy and framework (1: at SOL)."""
    return _spec(
        alt.Chart(alt.NamedData(name))
        .transform_calculate(measured_by="datum.policy + ': ' + datum.measured_with")
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("measured_over_sol:Q", scale=alt.Scale(type="log"), title="measured time / speed of light"),
            y=alt.Y("uid:N", sort=alt.EncodingSortField("sol_s", order="descending"), title=None),
            color=alt.Color("measured_by:N", title="measured with"),
            tooltip=[
                "uid:N",
                "op_kind:N",
                "measured_by:N",
                "library_version:N",
                "kernel:N",
                alt.Tooltip("sol_s:Q", format=".3e"),
                alt.Tooltip("measured_s:Q", format=".3e"),
                alt.Tooltip("measured_over_sol:Q", format=".3g"),
            ],
        )
    )


def corpus_coverage(name: str) -> dict[str, Any]:
    """One cell per op kind × library, one panel per GPU, shaded by the measurements it holds."""
    cells = (
        alt.Chart()
        .mark_rect()
        .encode(
            x=alt.X("library:N", title="library"),
            y=alt.Y("op_kind:N", title="op kind"),
            color=alt.Color("measurements:Q", scale=alt.Scale(type="log"), title="measurements"),
            tooltip=["op_kind:N", "gpu:N", "library:N", "measurements:Q", "library_versions:N", "kernels:Q"],
        )
        .properties(width=alt.Step(60), height=alt.Step(18))
    )
    return alt.FacetChart(data=alt.NamedData(name), spec=cells, facet=alt.Facet("gpu:N", title=None)).to_dict(
        validate=True
    )


def corpus_efficiency(name: str) -> dict[str, Any]:
    """Each kernel's lowest–highest share of the roofline as a bar, its median as a point."""
    base = alt.Chart().transform_calculate(
        label="datum.gpu + ' · ' + datum.library + ' ' + datum.library_version + ' · ' + datum.kernel"
    )
    y = alt.Y("label:N", title=None, sort=None)
    span = base.mark_rule(strokeWidth=3, opacity=0.5).encode(
        x=alt.X("lowest:Q", scale=alt.Scale(domain=[0, 1]), title="share of the roofline (roofline / measured time)"),
        x2="highest:Q",
        y=y,
        color=alt.Color("op_kind:N", title="op kind"),
    )
    median = base.mark_point(filled=True, size=60).encode(
        x="median:Q",
        y=y,
        color="op_kind:N",
        tooltip=["label:N", "op_kind:N", "measurements:Q", "lowest:Q", "median:Q", "highest:Q"],
    )
    return alt.layer(span, median, data=alt.NamedData(name)).properties(width=WIDTH).to_dict(validate=True)


def comparison(field: str, title: str):
    """A chart of one component_comparison column against context, one line per component
    (labelled 'component @ origin': one component may come from two models)."""

    def spec(name: str) -> dict[str, Any]:
        return _spec(
            alt.Chart(alt.NamedData(name))
            .transform_calculate(label="datum.component + ' @ ' + datum.origin")
            .mark_line(point=True)
            .encode(
                x=alt.X("context:Q", scale=alt.Scale(type="log", base=2), title="context (tokens)"),
                y=alt.Y(f"{field}:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~s"), title=title),
                color=alt.Color("label:N", title="component"),
                tooltip=["label:N", "context:Q", alt.Tooltip(f"{field}:Q", format=".4~g")],
            )
        )

    spec.__name__ = f"comparison_{field}"
    return spec
