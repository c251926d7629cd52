-- One row per node of each model; a node present in both phases appears once.
with

stacks as (
    select
        model,
        stack,
        role
    from stacks
),

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
        role,
        any_value(op) filter (where phase = 'prefill') as prefill_op,
        any_value(component) filter (where phase = 'prefill') as prefill_component,
        any_value(op) filter (where phase = 'decode') as decode_op,
        any_value(component) filter (where phase = 'decode') as decode_component,
        bool_or(phase = 'prefill') as in_prefill,
        bool_or(phase = 'decode') as in_decode
    from source
    group by model, uid, stack, template, path, role
),

final as (
    select
        n.model,
        n.uid,
        n.stack,
        st.role as stack_role,
        n.template,
        n.path,
        coalesce(n.prefill_op, n.decode_op) as op,
        n.role,
        coalesce(n.prefill_component, n.decode_component) as component,
        n.decode_op,
        n.decode_component,
        n.in_prefill,
        n.in_decode,
        coalesce(st.role, 'decoder') <> 'mtp' and n.role <> 'mtp' as in_base_model
    from per_node as n
    left join stacks as st on st.model = n.model and st.stack = n.stack
)

select
    model,
    uid,
    stack,
    stack_role,
    template,
    path,
    op,
    role,
    component,
    decode_op,
    decode_component,
    in_prefill,
    in_decode,
    in_base_model
from final
