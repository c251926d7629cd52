-- The requests each serving case's attention-DP rank runs at once (docs/serving.md, "KV
-- capacity and the queue"): its clients' requests, unless its KV cache (device_memory at the
-- decode step's context) or the framework's request cap holds fewer; and the decode step of
-- that running batch, as a workload.  A paged cache holds a running request's tokens so far
-- (isl + osl/2 on average, the decode step's context), a reserving one its whole length.  A
-- framework whose KV cache takes a fraction of the memory left free after the weights and the
-- activations (serving_frameworks.memory_fraction: TensorRT-LLM's free_gpu_memory_fraction)
-- holds floor(fraction × (memory − weights − activations) / KV bytes per request) requests per
-- device (device_memory's bytes at the clients' decode step), split over the attention-DP ranks;
-- the others device_memory's max batch under the frameworks table's fraction of the whole memory.
with

steps as (
    select
        serving_case,
        model,
        deployment,
        isl,
        osl,
        dp,
        draft_tokens,
        rank_requests,
        max_running_requests,
        kv_admission,
        cuda_graph_max_bs,
        cuda_graph_step,
        free_memory_fraction,
        decode_workload,
        decode_context
    from int_serving_steps
),

capacity as (
    select
        model,
        deployment,
        workload,
        batch,
        weight_bytes,
        kv_bytes,
        activation_bytes,
        memory_bytes,
        max_batch_per_dp_rank
    from device_memory
),

-- the requests one rank's KV cache holds at the decode step's context
rank_capacity as (
    select
        s.*,
        case
            when s.free_memory_fraction is null then m.max_batch_per_dp_rank
            when m.kv_bytes = 0 then null
            else floor(
                floor(
                    greatest(s.free_memory_fraction * (m.memory_bytes - m.weight_bytes - m.activation_bytes), 0)
                    / (m.kv_bytes / m.batch)
                )
                / s.dp
            )
        end as rank_kv_requests
    from steps as s
    left join capacity as m
        on m.model = s.model and m.deployment = s.deployment and m.workload = s.decode_workload
),

held as (
    select
        *,
        case
            when kv_admission = 'reserve' then floor(rank_kv_requests * decode_context / (isl + osl))
            else rank_kv_requests
        end as kv_requests
    from rank_capacity
),

admitted as (
    select
        *,
        -- a deployment whose weights alone exceed archsql's usable memory (max batch 0) ran all
        -- the same: its memory fraction was not the default, so its KV cache limits nothing here
        cast(
            greatest(least(rank_requests, nullif(kv_requests, 0), max_running_requests), 1) as bigint
        ) as admitted_requests
    from held
),

-- the running batch a CUDA graph runs: padded up to a captured size (int_serving_steps' rule)
padded as (
    select
        *,
        case
            when admitted_requests <= cuda_graph_step or admitted_requests > cuda_graph_max_bs
                then admitted_requests
            else cast(ceil(admitted_requests / cuda_graph_step) * cuda_graph_step as bigint)
        end as running_requests
    from admitted
)

select
    serving_case,
    model,
    deployment,
    kv_requests,
    admitted_requests,
    running_requests,
    format('serve:decode:b{}:s{}:c{}', running_requests * dp, 1 + draft_tokens, decode_context) as running_workload,
    running_requests * dp as running_batch,
    1 + draft_tokens as running_new_tokens,
    decode_context
from padded
