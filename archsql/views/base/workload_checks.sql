-- Rows of workloads and workload_images that break a rule (parameter_checks has every
-- parameter table's); base_workloads and base_workload_images leave their workloads out.
with

-- the physical bounds of a workload: 2^20 requests per step, 2^24 tokens of context, 2^20
-- image patches per request; they keep every integer product of the views (s · c, v^2) well
-- inside BIGINT
bounds as (
    select
        1048576 as max_batch,
        16777216 as max_context,
        1048576 as max_image_patches
),

workloads as (
    select
        workload,
        phase,
        batch,
        new_tokens,
        context
    from workloads
),

workload_images as (
    select
        workload,
        image_patches
    from workload_images
),

phases as (
    select unnest(['prefill', 'decode']) as phase
),

workload_problems as (
    select
        workload,
        'phase' as rule,
        format('unknown phase {}', coalesce('''' || phase || '''', 'null')) as problem,
        'phase is prefill or decode' as fix
    from workloads
    where phase is null or phase not in (select phase from phases)
    union all
    select
        workload,
        'batch' as rule,
        format('batch {} is outside 1 .. {}', coalesce(batch::varchar, 'null'), max_batch) as problem,
        format('batch counts the requests in the step: 1 .. {}', max_batch) as fix
    from workloads
    cross join bounds
    where batch is null or batch < 1 or batch > max_batch
    union all
    select
        workload,
        'new_tokens' as rule,
        format('new_tokens {} is below 1', coalesce(new_tokens::varchar, 'null')) as problem,
        'new_tokens counts the tokens each request computes this step: at least 1' as fix
    from workloads
    where new_tokens is null or new_tokens < 1
    union all
    select
        workload,
        'context' as rule,
        format('context {} is outside 1 .. {}', coalesce(context::varchar, 'null'), max_context) as problem,
        format('context counts the tokens attended after the step (cached + new): 1 .. {}', max_context) as fix
    from workloads
    cross join bounds
    where context is null or context < 1 or context > max_context
    union all
    select
        workload,
        'new tokens in context' as rule,
        format('new_tokens {} exceeds context {}', new_tokens, context) as problem,
        'context counts the cached and the new tokens: at least new_tokens' as fix
    from workloads
    where new_tokens > context
),

image_problems as (
    select
        workload,
        'image patches' as rule,
        format('image_patches {} is outside 0 .. {}', coalesce(image_patches::varchar, 'null'), max_image_patches)
            as problem,
        format('image_patches counts the patches of one image per request: 0 .. {}', max_image_patches) as fix
    from workload_images
    cross join bounds
    where image_patches is null or image_patches < 0 or image_patches > max_image_patches
    union all
    select
        workload,
        'images workload' as rule,
        'workload_images row of a workload that is not in workloads' as problem,
        'add the workloads row (or delete its workload_images row)' as fix
    from workload_images
    where workload not in (select workload from workloads)
),

problems as (
    select
        'workloads' as parameter_table,
        workload as row_key,
        'workload' as entity,
        workload as name,
        rule,
        problem,
        fix
    from workload_problems
    union all
    select
        'workload_images' as parameter_table,
        workload as row_key,
        'workload' as entity,
        workload as name,
        rule,
        problem,
        fix
    from image_problems
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
