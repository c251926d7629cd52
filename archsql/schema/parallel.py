"""The parallel mesh of a deployment: one list of axes, as DTensor's DeviceMesh is names
plus sizes.

A deployment's mesh is rows of the ``deployment_mesh`` parameter table (deployment, axis,
degree); an axis with no row has its default degree.  Everything that names the axes is
derived from :data:`MESH_AXES`: the ``parallel_groups`` reference table the views join
(which layout groups an axis sizes), the sweep's grid and its CLI options, and the check
of a deployment row's keys.  Adding a parallel mode is one :class:`MeshAxis` here plus the
SQL that uses its degree (``int_deployment_degrees`` pivots the axes for the views that
read them by name; ``deployment_checks`` states the GPU products).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from archsql.errors import did_you_mean

# the GPU products a deployment's degrees must each equal its GPU count: attention layers
# run every 'attention' axis, MoE layers every 'moe' axis (pp is in both)
SPANS = ("attention", "moe")


@dataclass(frozen=True)
class MeshAxis:
    """One axis of the mesh: a name (the ``deployment_mesh.axis`` value and the sweep's CLI
    option), what it splits, the layout groups (``layouts.group``) whose degree it is, and
    the GPU products it is a factor of."""

    name: str
    shards: str
    groups: tuple[str, ...]
    spans: tuple[str, ...]
    default: int = 1
    # the sweep: the degrees tried (a CLI default such as "1,2,4,8"), or None when the
    # axis takes what the other axes of its span leave (gpus / their product)
    sweep: str | None = None
    # groups that take the degree only when the deployment's cp_kind names them (else 1):
    # the collectives of one context-parallel kind
    kind_groups: Mapping[str, str] | None = None

    @property
    def fills(self) -> str | None:
        """The span this axis fills in a sweep (None: swept)."""
        return None if self.sweep is not None else self.spans[0]


# in the order the sweep's output lists the degrees
MESH_AXES: tuple[MeshAxis, ...] = (
    MeshAxis(
        "tp",
        "attention heads and dense-FFN columns (tensor parallel)",
        ("attention", "ffn"),
        ("attention",),
        sweep="1,2,4,8",
    ),
    MeshAxis("dp", "requests of attention layers (data parallel)", ("dp",), ("attention",)),
    MeshAxis("ep", "routed experts (expert parallel)", ("moe_ep",), ("moe",), sweep="1,8"),
    MeshAxis("moe_tp", "columns inside each expert (tensor parallel in experts)", ("moe_tp",), ("moe",)),
    MeshAxis("pp", "contiguous layer ranges (pipeline stages)", ("pp",), ("attention", "moe"), sweep="1"),
    MeshAxis(
        "cp",
        "the sequence and every cache's positions (context parallel)",
        ("cp", "cp_ulysses", "cp_ring"),
        ("attention",),
        sweep="1",
        kind_groups={"cp_ulysses": "ulysses", "cp_ring": "ring"},
    ),
)

AXES: dict[str, MeshAxis] = {a.name: a for a in MESH_AXES}
CP_KINDS = ("ring", "ulysses")

_names = [a.name for a in MESH_AXES]
assert len(set(_names)) == len(_names), "mesh axis names collide"
_groups = [g for a in MESH_AXES for g in a.groups]
assert len(set(_groups)) == len(_groups), "a layout group is sized by two mesh axes"
assert all(len([a for a in MESH_AXES if a.fills == s]) == 1 for s in SPANS), "each span has one filled axis"
# the axes a sweep tries degrees of; each of the others takes what its span leaves
SWEPT_AXES = tuple(a for a in MESH_AXES if a.sweep is not None)

PARALLEL_GROUPS_SCHEMA = pa.schema(
    [
        ("group", pa.string()),  # a layouts.group (or pp)
        ("axis", pa.string()),  # the mesh axis whose degree it takes
        ("cp_kind", pa.string()),  # null: always; else only when deployments.cp_kind is this (else degree 1)
        ("default_degree", pa.int64()),  # the axis's degree when deployment_mesh has no row for it
        ("position", pa.int32()),  # the axis's place in MESH_AXES
        ("shards", pa.string()),  # what the axis splits
    ]
)


def parallel_groups_table() -> pa.Table:
    """The ``parallel_groups`` reference table: one row per layout group of every axis."""
    rows = [
        {
            "group": group,
            "axis": axis.name,
            "cp_kind": (axis.kind_groups or {}).get(group),
            "default_degree": axis.default,
            "position": i,
            "shards": axis.shards,
        }
        for i, axis in enumerate(MESH_AXES)
        for group in axis.groups
    ]
    return pa.Table.from_pylist(rows, schema=PARALLEL_GROUPS_SCHEMA)


def fill_degrees(gpus: int, given: Mapping[str, int]) -> dict[str, int]:
    """The degrees ``given`` plus, for each span (SPANS) whose filled axis (:attr:`MeshAxis.fills`:
    dp for attention, moe_tp for MoE) is not given, that axis's degree: what the span's other
    axes leave of the GPUs (gpus / their product).  A span whose other axes do not divide the
    GPUs gets no filled degree (the deployment's checks then name the product)."""
    mesh = dict(given)
    for span in SPANS:
        (fill,) = (a for a in MESH_AXES if a.fills == span)
        if fill.name in mesh:
            continue
        taken = 1
        for axis in MESH_AXES:
            if span in axis.spans and axis is not fill:
                taken *= mesh.get(axis.name, axis.default)
        if taken >= 1 and gpus % taken == 0:
            mesh[fill.name] = gpus // taken
    return mesh


def split_deployment(row: Mapping[str, object], columns: list[str]) -> tuple[dict, list[dict]]:
    """A deployment written as one mapping (scalar columns and axis degrees by name) → the
    ``deployments`` row and its ``deployment_mesh`` rows.  An unknown key is a
    :class:`ValueError` naming the closest column or axis; an absent axis has no mesh row
    (its default degree)."""
    known = [*columns, *AXES]
    unknown = [k for k in row if k not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise ValueError(f"unknown deployment field '{unknown[0]}'" + (f" ({hint})" if hint else ""))
    scalar = {c: row.get(c) for c in columns}
    mesh = [{"deployment": row["deployment"], "axis": a, "degree": row[a]} for a in AXES if a in row]
    return scalar, mesh
