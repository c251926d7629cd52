-- One row per node of each model; a node present in both phases appears once.
with

source as (
    select
        model,
        phase,
        uid,
        stack,
        template,
        path,
        op,
        role,
        component
    from nodes
),

per_node as (
    select
        model,
        uid,
        stack,
        template,
        path,
        op,
        role,
        component,
        bool_or(phase = 'prefill') as in_prefill,
        bool_or(phase = 'decode') as in_decode
    from source
    group by model, uid, stack, template, path, op, role, component
)

select
    model,
    uid,
    stack,
    template,
    path,
    op,
    role,
    component,
    in_prefill,
    in_decode
from per_node
