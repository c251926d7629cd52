-- The nodes each deployment holds and runs, per phase, and how many forwards of each a step
-- runs.  Every base-model node: held, one forward per step.  The multi-token-prediction (MTP)
-- nodes only where the deployment drafts with them (speculative_tokens k > 0): k forwards per
-- decode step (one per draft token) and one per prefill step (the drafter over the prompt),
-- each forward through one layer of the MTP stack (vLLM DeepSeekMultiTokenPredictor.forward
-- runs layer spec_step_idx % num_mtp_layers), so a node of an n-layer stack, whose terms count
-- all n layers, runs k / n (prefill 1 / n) times its terms.  An MTP node's embedding lookup
-- and output head read the target model's tables (vLLM SpecDecodeBaseProposer
-- _maybe_share_embeddings / _maybe_share_lm_head; SGLang EAGLEWorker set_embed_and_head):
-- the deployment does not hold a second copy, even where the checkpoint stores one.
with

deployments as (
    select
        deployment,
        coalesce(speculative_tokens, 0) as speculative_tokens
    from base_deployments
),

stacks as (
    select
        model,
        stack,
        layers
    from base_stacks
),

nodes as (
    select
        model,
        uid,
        stack,
        op,
        in_base_model,
        in_prefill,
        in_decode
    from base_nodes
),

phases as (
    select model, uid, 'prefill' as phase from nodes where in_prefill
    union all
    select model, uid, 'decode' as phase from nodes where in_decode
),

loaded as (
    select
        n.model,
        d.deployment,
        p.phase,
        n.uid,
        case
            when n.in_base_model then 1.0
            else (case p.phase when 'decode' then d.speculative_tokens else 1 end)::double / coalesce(st.layers, 1)
        end as runs,
        n.in_base_model or n.op not in ('embedding', 'lm_head') as holds_weights
    from nodes as n
    inner join phases as p on p.model = n.model and p.uid = n.uid
    cross join deployments as d
    left join stacks as st on st.model = n.model and st.stack = n.stack
    where n.in_base_model or d.speculative_tokens > 0
)

select
    model,
    deployment,
    phase,
    uid,
    runs,
    holds_weights
from loaded
