-- Deployments that break the layout rules, one row per problem, with the fix.
with

deployments as (
    select
        deployment,
        gpu,
        gpus,
        tp,
        dp,
        ep,
        moe_tp,
        pp,
        weight_dtype,
        act_dtype,
        kv_dtype,
        usable_memory_fraction
    from base_deployments
),

gpus as (
    select distinct gpu
    from int_gpu_specs
),

dtypes as (
    select dtype
    from base_dtypes
),

problems as (
    select
        deployment,
        'attention degrees' as rule,
        format('tp × dp × pp = {} × {} × {} = {} GPUs, the deployment has {}', tp, dp, pp, tp * dp * pp, gpus)
            as problem,
        'make tp × dp × pp equal gpus' as fix
    from deployments
    where tp * dp * pp <> gpus
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
    where least(tp, dp, ep, moe_tp, pp, gpus) < 1
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
)

select
    deployment,
    rule,
    problem,
    fix
from problems
