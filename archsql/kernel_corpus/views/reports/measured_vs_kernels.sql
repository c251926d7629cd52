-- Every kernel a framework version launches (launched_kernels; the kernels of one framework
-- call, a fused-MoE call, as one unit) next to the measured kernel of the same workload signature (launched_signatures: a merged GEMM as the one GEMM it runs),
-- joined with the corpus exactly, under two policies: 'framework' — the launching framework's
-- own measurements (corpus library = framework), its newest version with a row, then the
-- fastest — and 'envelope' — the fastest correct row of any library.  A kernel without a
-- measurement keeps its speed-of-light time and says why.
with

-- the measured units: a launched kernel, or the kernels of one framework call together (a
-- fused-MoE call, measured as one whole-MoE row)
kernels as (
    select
        k.model,
        k.deployment,
        any_value(d.gpu) as gpu,
        k.workload,
        any_value(k.phase) as phase,
        k.framework,
        k.version,
        coalesce(k.call_uid, k.kernel_uid) as uid,
        string_agg(k.kernel, ' + ' order by k.kernel_uid) as kernel,
        string_agg(distinct k.rule, ', ' order by k.rule) as rule,
        flatten(list(k.members order by k.kernel_uid)) as members,
        sum(k.time_s) as sol_s
    from launched_kernels as k
    inner join base_deployments as d on d.deployment = k.deployment
    group by k.model, k.deployment, k.workload, k.framework, k.version, coalesce(k.call_uid, k.kernel_uid)
),

signatures as not materialized (
    select *
    from launched_signatures
),

op_kinds as (
    select
        op_kind,
        signature
    from base_kernel_op_kinds
),

keys as (
    select
        g.model,
        g.deployment,
        g.workload,
        g.framework,
        g.version,
        g.uid,
        g.gpu,
        g.op_kind,
        g.launches,
        list_transform(o.signature, lambda f: json_extract_string(to_json(g), f)) as key
    from signatures as g
    inner join op_kinds as o on o.op_kind = g.op_kind
),

measured_keys as (
    select *
    from int_kernel_measured_keys
),

candidates as (
    select
        k.model,
        k.deployment,
        k.workload,
        k.framework,
        k.version,
        k.uid,
        c.source_hash || ':' || c.source_row || ':' || c.op_kind as measurement_id,
        c.library,
        c.library_version,
        version_order(c.library_version) as version_order,
        c.kernel,
        c.latency_us
    from keys as k
    inner join measured_keys as c on c.gpu = k.gpu and c.op_kind = k.op_kind and c.key is not distinct from k.key
),

ranked as (
    select
        *,
        'framework' as policy,
        row_number() over (
            partition by model, deployment, workload, framework, version, uid
            order by version_order desc, latency_us, measurement_id
        ) as choice
    from candidates
    where library = framework
    union all
    select
        *,
        'envelope' as policy,
        row_number() over (
            partition by model, deployment, workload, framework, version, uid order by latency_us, measurement_id
        ) as choice
    from candidates
),

chosen as (
    select *
    from ranked
    where choice = 1
),

policies as (
    select unnest(['framework', 'envelope']) as policy
),

joined as (
    select
        k.*,
        p.policy,
        g.op_kind,
        g.launches,
        c.latency_us,
        c.latency_us * 1e-6 * g.launches as measured_s,
        c.measurement_id,
        c.library,
        c.library_version
    from kernels as k
    cross join policies as p
    left join keys as g
        on
            g.model = k.model and g.deployment = k.deployment and g.workload = k.workload
            and g.framework = k.framework and g.version = k.version and g.uid = k.uid
    left join chosen as c
        on
            c.model = k.model and c.deployment = k.deployment and c.workload = k.workload
            and c.framework = k.framework and c.version = k.version and c.uid = k.uid and c.policy = p.policy
)

select
    model,
    deployment,
    gpu,
    workload,
    phase,
    framework,
    version,
    policy,
    uid,
    kernel,
    rule,
    members,
    op_kind,
    launches,
    sol_s,
    measured_s,
    coalesce(measured_s, sol_s) as time_s,
    measured_s is not null as matched,
    case
        when measured_s is not null then 'measured'
        when sol_s = 0 then 'no work'
        when op_kind is null then 'no kernel signature'
        else 'no measurement'
    end as status,
    latency_us,
    measurement_id,
    library,
    library_version
from joined
