-- Every match of a fusion rule (fusion_matches) on every deployment, with its conditions
-- tested: applied when every condition holds, launched when applied and no earlier rule of
-- its file (a lower priority) that applies takes one of its members (a call — several kernels
-- measured as one — takes nothing and is not taken).  A group not launched
-- runs unfused, and reason says why (every failing condition, or the rule that took it).
with

matches as (
    select
        model,
        phase,
        framework,
        version,
        rule,
        priority,
        pattern,
        kernel,
        input_uid,
        members
    from fusion_matches
),

rules as (
    select
        framework,
        version,
        rule,
        call,
        tp_min,
        phase,
        flag,
        flag_default,
        dim,
        dim_values,
        act_dtypes,
        gpu_families,
        model_roles
    from base_fusion_rules
),

deployments as (
    select
        d.deployment,
        d.gpu,
        d.act_dtype,
        g.tp,
        a.family
    from base_deployments as d
    inner join int_deployment_degrees as g on g.deployment = d.deployment
    left join base_gpu_architectures as a on a.gpu = d.gpu
),

flags as (
    select
        deployment,
        flag,
        enabled
    from base_deployment_flags
),

dims as (
    select
        model,
        dim,
        value
    from base_dims
),

model_roles as (
    select
        model,
        list(distinct role) as roles
    from base_nodes
    group by model
),

tested as (
    select
        m.*,
        r.call,
        d.deployment,
        list_filter(
            [
                case when r.tp_min is not null and d.tp < r.tp_min then format('tp {} < {} (tp_min)', d.tp, r.tp_min) end,
                case when r.phase is not null and r.phase <> m.phase then format('runs in {} only', r.phase) end,
                case
                    when r.flag is not null and not coalesce(f.enabled, r.flag_default)
                        then format(
                            'launch flag {} is off ({}; set it in deployment_flags)',
                            r.flag,
                            case when f.enabled is null then 'its default' else 'deployment_flags' end
                        )
                end,
                case
                    when r.dim is not null and x.value is null then format('the model has no dim {} (dim_in)', r.dim)
                    when r.dim is not null and not list_contains(r.dim_values, x.value)
                        then format('{} = {} not in {} (dim_in)', r.dim, x.value, r.dim_values)
                end,
                case
                    when r.act_dtypes is not null and not list_contains(r.act_dtypes, d.act_dtype)
                        then format('act dtype {} not in {} (act_dtype)', d.act_dtype, r.act_dtypes)
                end,
                case
                    when r.gpu_families is not null and not coalesce(list_contains(r.gpu_families, d.family), false)
                        then format(
                            'GPU {} ({}) not in {} (gpu_family)', d.gpu, coalesce(d.family, 'no family known'), r.gpu_families
                        )
                end,
                case
                    when r.model_roles is not null and not list_has_all(mr.roles, r.model_roles)
                        then format('the model has no {} nodes (model_roles)', list_filter(r.model_roles, lambda x: not list_contains(mr.roles, x)))
                end
            ],
            lambda c: c is not null
        ) as failed
    from matches as m
    inner join rules as r on r.framework = m.framework and r.version = m.version and r.rule = m.rule
    cross join deployments as d
    left join flags as f on f.deployment = d.deployment and f.flag = r.flag
    left join dims as x on x.model = m.model and x.dim = r.dim
    left join model_roles as mr on mr.model = m.model
),

applied as (
    select *
    from tested
    where array_length(failed) = 0
),

-- an applied group an earlier applied rule shares a member with: that rule takes it
taken as (
    select
        a.model,
        a.phase,
        a.deployment,
        a.framework,
        a.version,
        a.rule,
        a.members,
        string_agg(distinct b.rule, ', ' order by b.rule) as taken_by
    from applied as a
    inner join applied as b
        on
            b.model = a.model and b.phase = a.phase and b.deployment = a.deployment
            and b.framework = a.framework and b.version = a.version
            and b.priority < a.priority and b.pattern <> 'node' and a.pattern <> 'node' and not a.call and not b.call
            and array_length(list_intersect(a.members, b.members)) > 0
    group by a.model, a.phase, a.deployment, a.framework, a.version, a.rule, a.members
)

select
    t.model,
    t.deployment,
    t.phase,
    t.framework,
    t.version,
    t.rule,
    t.priority,
    t.pattern,
    t.kernel,
    t.input_uid,
    t.members,
    t.call,
    array_length(t.failed) = 0 as applied,
    array_length(t.failed) = 0 and k.taken_by is null as launched,
    case
        when array_length(t.failed) > 0 then array_to_string(t.failed, '; ')
        when k.taken_by is not null then format('taken by {}', k.taken_by)
    end as reason
from tested as t
left join taken as k
    on
        k.model = t.model and k.phase = t.phase and k.deployment = t.deployment and k.framework = t.framework
        and k.version = t.version and k.rule = t.rule and k.members = t.members
