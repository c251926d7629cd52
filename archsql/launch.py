"""What a serving framework launches for a model on a deployment (``archsql kernels``): the
rows of the views ``launched_kernels`` (one per launched kernel) and ``fusion_hits`` (every
fusion rule's match, launched or not, and why not), with the names checked.

The numbers are the views'; this module only chooses the rows: the framework version
(``vllm@0.11``; a bare ``vllm`` is its newest version with rules), the deployment, and the
workload (default: the store's first workload of the phase by batch and context).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from archsql.errors import Issue, QueryError, unknown_name
from archsql.store import connect


@dataclass(frozen=True)
class Launch:
    """The launch list of one model × deployment × workload under one framework version."""

    model: str
    deployment: str
    gpu: str
    workload: str
    phase: str
    framework: str
    version: str
    kernels: pa.Table  # launched_kernels rows, in uid order
    not_launched: pa.Table  # fusion_hits rows of the phase's rules not launched on the deployment, with the reason
    time_s: float
    unfused_time_s: float


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in version.replace("-", ".").split("."))


def _fail(kind: str, name: str, known: list[str]) -> QueryError:
    message, hint = unknown_name(kind, name, known)
    return QueryError(message, [Issue(message, hint=hint)])


def launched(
    db: str | Path,
    model: str,
    *,
    framework: str,
    deployment: str,
    workload: str | None = None,
    phase: str = "decode",
) -> Launch:
    """The kernels ``framework`` (``name@version`` or ``name``) launches for ``model`` on
    ``deployment`` at ``workload`` (default: the first workload of ``phase``)."""
    con = connect(db)
    try:
        name, _, version = framework.partition("@")
        versions = con.execute("select distinct framework, version from base_fusion_rules").fetchall()
        frameworks = sorted({f for f, _ in versions})
        if name not in frameworks:
            raise _fail("framework", name, frameworks)
        known = sorted((v for f, v in versions if f == name), key=_version_key)
        if not version:
            version = known[-1]
        elif version not in known:
            raise _fail(f"{name} version", version, known)
        models = [r[0] for r in con.execute("select model from base_models").fetchall()]
        if model not in models:
            raise _fail("model", model, models)
        gpus = dict(con.execute("select deployment, gpu from base_deployments").fetchall())
        if deployment not in gpus:
            raise _fail("deployment", deployment, list(gpus))
        workloads = con.execute(
            "select workload, phase from base_workloads order by phase, batch, context, workload"
        ).fetchall()
        if workload is None:
            chosen = [w for w, p in workloads if p == phase]
            if not chosen:
                raise QueryError(
                    f"the store has no {phase} workload", [Issue("add one", hint="archsql workload add …")]
                )
            workload = chosen[0]
        phases = dict(workloads)
        if workload not in phases:
            raise _fail("workload", workload, list(phases))
        phase = phases[workload]
        key = {"model": model, "deployment": deployment, "workload": workload, "framework": name, "version": version}
        kernels = con.sql(
            "select kernel, rule, members, ops, flops, bytes, saved_bytes, comm_bytes, time_s, unfused_time_s,"
            " bound, kernel_uid from launched_kernels where model = $model and deployment = $deployment"
            " and workload = $workload and framework = $framework and version = $version order by kernel_uid",
            params=key,
        ).to_arrow_table()
        if kernels.num_rows == 0:
            checks = con.execute("select problem from deployment_checks where deployment = ?", [deployment]).fetchall()
            hint = "; ".join(r[0] for r in checks) or "is the model evaluated and the deployment valid?"
            raise QueryError(
                f"no launched kernels for {model} on {deployment} at {workload}",
                [Issue("the deployment's speed of light has no rows", hint=hint)],
            )
        not_launched = con.sql(
            "select h.rule, h.kernel, h.members, h.reason from fusion_hits as h inner join base_fusion_rules as r"
            " on r.framework = h.framework and r.version = h.version and r.rule = h.rule"
            " where h.model = $model and h.deployment = $deployment and h.framework = $framework"
            " and h.version = $version and h.phase = $phase and not h.launched"
            " and (r.phase is null or r.phase = h.phase) order by h.priority, h.members",
            params={k: v for k, v in key.items() if k != "workload"} | {"phase": phase},
        ).to_arrow_table()
        time_s = sum(kernels.column("time_s").to_pylist())
        unfused = sum(kernels.column("unfused_time_s").to_pylist())
        return Launch(
            model, deployment, gpus[deployment], workload, phase, name, version, kernels, not_launched, time_s, unfused
        )
    finally:
        con.close()
