-- The schedule of every serving case (aggregated in-flight batching, docs/serving.md): the
-- framework facts it runs under and the two steps it is made of, as workload shapes.  A
-- disaggregated case (xPyD) runs its prefill steps on the prefill deployment (the facts of its
-- GPU, the clients' share of its x instances' ranks) and its decode steps on the decode
-- deployment (the clients' share of its y instances' ranks); the KV cache a prompt leaves is
-- named as a workload too (one request, the whole prompt) for the transfer between the pools.
with

cases as (
    select
        serving_case,
        model,
        deployment,
        framework,
        version,
        isl,
        osl,
        concurrency,
        acceptance_rate,
        disaggregated,
        prefill_deployment,
        prefill_instances,
        decode_instances,
        kv_link_bytes_per_s,
        kv_link_latency_s
    from base_serving_cases
),

-- the deployment each pool runs (aggregated: the case's deployment both)
pools as (
    select serving_case, 'decode' as pool, deployment from cases
    union all
    select serving_case, 'prefill' as pool, prefill_deployment as deployment from cases
),

deployments as (
    select
        d.deployment,
        d.gpu,
        coalesce(d.speculative_tokens, 0) as draft_tokens,
        g.dp
    from base_deployments as d
    inner join int_deployment_degrees as g on g.deployment = d.deployment
),

gpu_memory as (
    select
        gpu,
        memory_bytes / 2 ^ 30 as memory_gib
    from int_gpu_specs
    where dtype = 'bf16'
),

-- the framework row of the case's version for the largest memory threshold each pool's GPU reaches
facts as (
    select
        c.serving_case,
        p.pool,
        f.max_batched_tokens,
        f.chunked_prefill,
        f.mixed_steps,
        f.dp_contexts_aligned,
        f.max_running_requests,
        f.kv_admission,
        f.cuda_graph_max_bs,
        f.cuda_graph_step,
        f.memory_fraction,
        f.ttft_definition,
        f.tpot_definition,
        f.metric_mean,
        row_number() over (partition by c.serving_case, p.pool order by f.min_gpu_memory_gib desc) as pick
    from cases as c
    inner join pools as p on p.serving_case = c.serving_case
    inner join deployments as d on d.deployment = p.deployment
    inner join gpu_memory as m on m.gpu = d.gpu
    inner join serving_frameworks as f
        on f.framework = c.framework and f.version = c.version and f.min_gpu_memory_gib <= m.memory_gib
),

-- per attention-DP rank: its share of the requests (a decode instance's: the clients over the y
-- instances), the prompt tokens one step computes per request (the whole prompt, or a chunk of
-- the prefill pool's budget) and its share of the requests a prefill step may hold (a prefill
-- instance's: the clients over the x instances)
per_rank as (
    select
        c.*,
        d.gpu,
        d.dp,
        d.draft_tokens,
        pd.gpu as prefill_gpu,
        pd.dp as prefill_dp,
        pf.max_batched_tokens,
        pf.chunked_prefill,
        f.mixed_steps,
        f.dp_contexts_aligned,
        f.max_running_requests,
        f.kv_admission,
        f.cuda_graph_max_bs,
        f.cuda_graph_step,
        -- a fraction of the memory left free after the weights (TensorRT-LLM's
        -- free_gpu_memory_fraction); null: the frameworks table's fraction of the whole memory
        f.memory_fraction as free_memory_fraction,
        f.ttft_definition,
        f.tpot_definition,
        f.metric_mean,
        cast(ceil(c.concurrency / (c.decode_instances * d.dp)) as bigint) as rank_requests,
        cast(ceil(c.concurrency / (c.prefill_instances * pd.dp)) as bigint) as prefill_rank_requests,
        case when pf.chunked_prefill then least(c.isl, pf.max_batched_tokens) else c.isl end as chunk
    from cases as c
    inner join deployments as d on d.deployment = c.deployment
    inner join deployments as pd on pd.deployment = c.prefill_deployment
    inner join facts as f on f.serving_case = c.serving_case and f.pool = 'decode' and f.pick = 1
    inner join facts as pf on pf.serving_case = c.serving_case and pf.pool = 'prefill' and pf.pick = 1
),

shaped as (
    select
        *,
        cast(ceil(isl / chunk) as bigint) as chunks,
        greatest(1, least(prefill_rank_requests, max_batched_tokens // chunk)) as step_requests,
        -- the decode batch a CUDA graph runs: padded up to a captured size (a multiple of the
        -- step above it); beyond the largest graph the batch runs as it is
        case
            when rank_requests <= cuda_graph_step or rank_requests > cuda_graph_max_bs then rank_requests
            else cast(ceil(rank_requests / cuda_graph_step) * cuda_graph_step as bigint)
        end as decode_requests
    from per_rank
),

grouped as (
    select
        *,
        cast(ceil(rank_requests / step_requests) as bigint) as prefill_groups,
        -- the context a chunk ends at, averaged over the prompt's chunks: (isl + chunk) / 2
        cast(ceil((isl + chunk) / 2) as bigint) as prefill_context,
        isl + osl // 2 as decode_context
    from shaped
)

select
    serving_case,
    model,
    deployment,
    gpu,
    framework,
    version,
    isl,
    osl,
    concurrency,
    acceptance_rate,
    disaggregated,
    prefill_deployment,
    prefill_gpu,
    prefill_dp,
    prefill_instances,
    decode_instances,
    kv_link_bytes_per_s,
    kv_link_latency_s,
    dp,
    draft_tokens,
    max_batched_tokens,
    chunked_prefill,
    mixed_steps,
    dp_contexts_aligned,
    max_running_requests,
    kv_admission,
    cuda_graph_max_bs,
    cuda_graph_step,
    free_memory_fraction,
    ttft_definition,
    tpot_definition,
    metric_mean,
    rank_requests,
    prefill_rank_requests,
    chunk,
    chunks,
    step_requests,
    prefill_groups,
    decode_requests,
    prefill_context,
    decode_context,
    -- the two steps, as workloads of the store (the deployment's batch is global: × dp; the
    -- prefill step the prefill deployment's)
    format('serve:prefill:b{}:s{}:c{}', step_requests * prefill_dp, chunk, prefill_context) as prefill_workload,
    step_requests * prefill_dp as prefill_batch,
    format('serve:decode:b{}:s{}:c{}', decode_requests * dp, 1 + draft_tokens, decode_context) as decode_workload,
    decode_requests * dp as decode_batch,
    1 + draft_tokens as decode_new_tokens,
    -- disaggregated: the KV cache one request's whole prompt leaves (a prefill of batch 1), which
    -- crosses the link to the decode pool
    case when disaggregated then format('serve:prefill:b1:s{}:c{}', isl, isl) end as kv_workload
from grouped
