-- Deployments that break the layout rules, one row per problem, with the fix.
with

deployments as (
    select
        d.deployment,
        d.gpu,
        d.gpus,
        g.tp,
        g.dp,
        g.ep,
        g.moe_tp,
        g.pp,
        g.cp,
        d.cp_kind,
        d.nodes,
        d.weight_dtype,
        d.act_dtype,
        d.kv_dtype,
        d.usable_memory_fraction,
        d.weight_profile
    from base_deployments as d
    inner join int_deployment_degrees as g on g.deployment = d.deployment
),

mesh_rows as (
    select
        deployment,
        axis
    from base_deployment_mesh
),

axes as (
    select distinct
        axis,
        position
    from base_parallel_groups
),

gpus as (
    select distinct gpu
    from int_gpu_specs
),

mesh as (
    select
        deployment,
        nodes,
        derived,
        gpus_per_node,
        scaleup_domain_gpus
    from int_deployment_mesh
),

dtypes as (
    select dtype
    from base_dtypes
),

weight_profiles as (
    select distinct profile
    from base_storage_tensors
),

problems as (
    select
        deployment,
        'attention degrees' as rule,
        format(
            'tp × cp × dp × pp = {} × {} × {} × {} = {} GPUs, the deployment has {}',
            tp, cp, dp, pp, tp * cp * dp * pp, gpus
        ) as problem,
        'make tp × cp × dp × pp equal gpus' as fix
    from deployments
    where tp * cp * dp * pp <> gpus
    union all
    select
        deployment,
        'moe degrees' as rule,
        format('ep × moe_tp × pp = {} × {} × {} = {} GPUs, the deployment has {}', ep, moe_tp, pp, ep * moe_tp * pp, gpus)
            as problem,
        'make ep × moe_tp × pp equal gpus' as fix
    from deployments
    where ep * moe_tp * pp <> gpus
    union all
    select
        deployment,
        'degrees' as rule,
        'a degree below 1' as problem,
        'every degree is at least 1' as fix
    from deployments
    where least(tp, dp, ep, moe_tp, pp, cp, gpus) < 1
    union all
    select
        deployment,
        'cp kind' as rule,
        format('cp = {} with cp_kind = {}', cp, coalesce(cp_kind, 'null')) as problem,
        case when cp > 1 then 'cp_kind is ulysses or ring' else 'cp_kind is none, ulysses or ring' end as fix
    from deployments
    where cp_kind is null
        or cp_kind not in ('ulysses', 'ring', 'none')
        or (cp > 1 and cp_kind = 'none')
    union all
    select
        deployment,
        'nodes' as rule,
        format('{} GPUs on {} nodes', gpus, nodes) as problem,
        'nodes is at least 1 and divides gpus (or null: derived from the GPU''s scale-up domain)' as fix
    from deployments
    where nodes is not null and (nodes < 1 or gpus % nodes <> 0)
    union all
    select
        deployment,
        'nodes' as rule,
        format('{} GPUs per node, the scale-up domain of the GPU is {}', gpus_per_node, scaleup_domain_gpus)
            as problem,
        'use more nodes (or null: one scale-up domain per node)' as fix
    from mesh
    where not derived and nodes >= 1 and gpus_per_node > scaleup_domain_gpus
    union all
    select
        d.deployment,
        'gpu' as rule,
        format('unknown GPU ''{}''', d.gpu) as problem,
        'use a gpus.gpu name (archsql sql "select gpu from gpus")' as fix
    from deployments as d
    left join gpus as g on g.gpu = d.gpu
    where g.gpu is null
    union all
    select
        d.deployment,
        'dtype' as rule,
        format('unknown dtype in weight/act/kv: {}, {}, {}', d.weight_dtype, d.act_dtype, d.kv_dtype) as problem,
        'use dtypes.dtype names' as fix
    from deployments as d
    where d.weight_dtype not in (select dtype from dtypes)
        or d.act_dtype not in (select dtype from dtypes)
        or d.kv_dtype not in (select dtype from dtypes)
    union all
    select
        deployment,
        'memory fraction' as rule,
        format('usable_memory_fraction {} is outside (0, 1]', usable_memory_fraction) as problem,
        'use a fraction such as 0.9' as fix
    from deployments
    where not (usable_memory_fraction > 0 and usable_memory_fraction <= 1)
    union all
    select
        m.deployment,
        'mesh axis' as rule,
        format('unknown mesh axis ''{}''', m.axis) as problem,
        format('use an axis of parallel_groups: {}', (select string_agg(axis, ', ' order by position) from axes)) as fix
    from mesh_rows as m
    where m.axis not in (select axis from axes)
    union all
    select
        m.deployment,
        'mesh deployment' as rule,
        'deployment_mesh rows of a deployment that is not in deployments' as problem,
        'add the deployments row (or delete its deployment_mesh rows)' as fix
    from mesh_rows as m
    where m.deployment not in (select deployment from deployments)
    union all
    select
        d.deployment,
        'weight profile' as rule,
        format('unknown weight_profile {}', coalesce(d.weight_profile, 'null')) as problem,
        'use native or a profile of archsql/specs/quant/profiles (archsql sql "select distinct profile from storage_tensors")'
            as fix
    from deployments as d
    where d.weight_profile is null
        or (d.weight_profile not in (select profile from weight_profiles) and exists (select 1 from weight_profiles))
)

select
    deployment,
    rule,
    problem,
    fix
from problems
