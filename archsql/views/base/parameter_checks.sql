-- Every row of a parameter table that breaks a rule, one row per problem with the fix: the
-- rows of workload_checks and lookup_checks (gpus, dtypes, frameworks), which the base views
-- leave out, and of deployment_row_checks and the rules that compare a deployment with other
-- tables (its degrees multiply to its GPUs, its GPU, dtypes, weight profile and framework are
-- known and valid): deployment_checks lists those and the answering views leave them out.
with

gpu_rows as (
    select
        gpu,
        scaleup_domain_gpus
    from gpus
),

lookup_problems as (
    select
        entity,
        name
    from lookup_checks
),

valid_gpus as (
    select gpu
    from gpu_rows
    where gpu not in (select name from lookup_problems where entity = 'gpu')
),

valid_dtypes as (
    select dtype
    from dtypes
    where dtype not in (select name from lookup_problems where entity = 'dtype')
),

valid_frameworks as (
    select framework
    from frameworks
    where framework not in (select name from lookup_problems where entity = 'framework')
),

deployment_rows as (
    select
        d.deployment,
        d.gpu,
        d.gpus,
        d.cp_kind,
        d.nodes,
        d.weight_dtype,
        d.act_dtype,
        d.kv_dtype,
        d.usable_memory_fraction,
        d.weight_profile,
        d.speculative_tokens,
        g.scaleup_domain_gpus
    from deployments as d
    left join gpu_rows as g on g.gpu = d.gpu
),

degrees as (
    select
        deployment,
        any_value(degree) filter (where axis = 'tp') as tp,
        any_value(degree) filter (where axis = 'dp') as dp,
        any_value(degree) filter (where axis = 'ep') as ep,
        any_value(degree) filter (where axis = 'moe_tp') as moe_tp,
        any_value(degree) filter (where axis = 'pp') as pp,
        any_value(degree) filter (where axis = 'cp') as cp
    from parameter_degrees
    group by deployment
),

laid_out as (
    select
        d.*,
        g.tp,
        g.dp,
        g.ep,
        g.moe_tp,
        g.pp,
        g.cp,
        -- the GPUs each kind of layer spans, in DOUBLE: a hostile degree cannot overflow here
        g.tp::double * g.cp * g.dp * g.pp as attention_gpus,
        g.ep::double * g.moe_tp * g.pp as moe_gpus
    from deployment_rows as d
    inner join degrees as g on g.deployment = d.deployment
),

mesh_rows as (
    select
        deployment,
        axis
    from deployment_mesh
),

axes as (
    select distinct
        axis,
        position
    from base_parallel_groups
),

weight_profiles as (
    select distinct profile
    from base_storage_tensors
),

deployment_frameworks as (
    select
        deployment,
        framework
    from deployment_frameworks
),

deployment_problems as (
    select
        deployment,
        'attention degrees' as rule,
        format(
            'tp × cp × dp × pp = {} × {} × {} × {} = {} GPUs, the deployment has {}',
            tp, cp, dp, pp, case when attention_gpus < 1e18 then attention_gpus::bigint end, gpus
        ) as problem,
        'make tp × cp × dp × pp equal gpus' as fix
    from laid_out
    where attention_gpus <> gpus
    union all
    select
        deployment,
        'moe degrees' as rule,
        format(
            'ep × moe_tp × pp = {} × {} × {} = {} GPUs, the deployment has {}',
            ep, moe_tp, pp, case when moe_gpus < 1e18 then moe_gpus::bigint end, gpus
        ) as problem,
        'make ep × moe_tp × pp equal gpus' as fix
    from laid_out
    where moe_gpus <> gpus
    union all
    select
        deployment,
        'cp kind' as rule,
        format('cp = {} with cp_kind = {}', cp, coalesce(cp_kind, 'null')) as problem,
        case when cp > 1 then 'cp_kind is ulysses or ring' else 'cp_kind is none, ulysses or ring' end as fix
    from laid_out
    where cp_kind is null
        or cp_kind not in ('ulysses', 'ring', 'none')
        or (cp > 1 and cp_kind = 'none')
    union all
    select
        deployment,
        'nodes' as rule,
        format('{} GPUs per node, the scale-up domain of the GPU is {}', gpus / greatest(nodes, 1), scaleup_domain_gpus)
            as problem,
        'use more nodes (or null: one scale-up domain per node)' as fix
    from deployment_rows
    where nodes >= 1 and gpus / greatest(nodes, 1) > scaleup_domain_gpus
    union all
    select
        deployment,
        'gpu' as rule,
        case
            when gpu in (select gpu from gpu_rows) then format('GPU ''{}'' is invalid (its gpus row: parameter_checks)', gpu)
            else format('unknown GPU ''{}''', coalesce(gpu, 'null'))
        end as problem,
        'use a gpus.gpu name (archsql sql "select gpu from gpus")' as fix
    from deployment_rows
    where gpu is null or gpu not in (select gpu from valid_gpus)
    union all
    select
        deployment,
        'dtype' as rule,
        format(
            'unknown dtype in weight/act/kv: {}, {}, {}',
            coalesce(weight_dtype, 'null'), coalesce(act_dtype, 'null'), coalesce(kv_dtype, 'null')
        ) as problem,
        'use dtypes.dtype names (weight_dtype null: native)' as fix
    from deployment_rows
    where weight_dtype not in (select dtype from valid_dtypes)
        or act_dtype is null
        or act_dtype not in (select dtype from valid_dtypes)
        or kv_dtype is null
        or kv_dtype not in (select dtype from valid_dtypes)
    union all
    select
        deployment,
        'weight profile' as rule,
        format('unknown weight_profile {}', coalesce(weight_profile, 'null')) as problem,
        'use native or a profile of archsql/specs/quant/profiles (archsql sql "select distinct profile from storage_tensors")'
            as fix
    from deployment_rows
    where weight_profile is null
        or (weight_profile not in (select profile from weight_profiles) and exists (select 1 from weight_profiles))
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
    where m.deployment not in (select deployment from deployment_rows)
    union all
    select
        f.deployment,
        'framework' as rule,
        case
            when f.framework in (select framework from frameworks)
                then format('framework ''{}'' is invalid (its frameworks row: parameter_checks)', f.framework)
            else format('unknown framework ''{}''', coalesce(f.framework, 'null'))
        end as problem,
        'use a frameworks.framework name (archsql sql "select framework from frameworks")' as fix
    from deployment_frameworks as f
    where f.framework is null or f.framework not in (select framework from valid_frameworks)
    union all
    -- the memory fraction comes from the deployment, else its framework's default (SGLang's is
    -- derived by its own rule: int_deployment_memory); with neither, no device memory answer
    select
        d.deployment,
        'memory fraction' as rule,
        case
            when f.framework is null then 'no usable_memory_fraction and no framework to take it from'
            else format('no usable_memory_fraction, and framework ''{}'' has no default_fraction', f.framework)
        end as problem,
        'give usable_memory_fraction (e.g. 0.9) or a framework (archsql deployment add … --framework vllm)' as fix
    from deployment_rows as d
    left join deployment_frameworks as f on f.deployment = d.deployment
    left join frameworks as fw on fw.framework = f.framework
    where d.usable_memory_fraction is null
        and (f.framework is null or (fw.framework is not null and fw.default_fraction is null and fw.framework <> 'sglang'))
    union all
    select
        f.deployment,
        'framework deployment' as rule,
        'deployment_frameworks row of a deployment that is not in deployments' as problem,
        'add the deployments row (or delete its deployment_frameworks row)' as fix
    from deployment_frameworks as f
    where f.deployment not in (select deployment from deployment_rows)
),

problems as (
    select * from workload_checks
    union all
    select * from lookup_checks
    union all
    select * from deployment_row_checks
    union all
    select
        case
            when rule in ('mesh axis', 'mesh deployment') then 'deployment_mesh'
            when rule in ('framework', 'framework deployment') then 'deployment_frameworks'
            else 'deployments'
        end as parameter_table,
        deployment as row_key,
        'deployment' as entity,
        deployment as name,
        rule,
        problem,
        fix
    from deployment_problems
)

select
    parameter_table,
    row_key,
    entity,
    name,
    rule,
    problem,
    fix
from problems
