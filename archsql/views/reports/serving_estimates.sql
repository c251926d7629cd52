-- TTFT and TPOT of every serving case: aggregated in-flight batching at the client
-- concurrency (docs/serving.md), the mean of two schedules weighted by the framework's
-- first_wave_share (serving_constants; the framework version's own where serving_constants has
-- one, applies_to 'framework@version', else the framework's):
-- * wave: a rank's requests arrive together and are prefilled in groups of step_requests
--   (chunks steps per group); a request of group j waits for the groups before it, then
--   decodes; the prefill steps of later groups stall it (no mixed steps) or are shared with
--   its decodes (mixed steps: it decodes one step's tokens in each);
-- * steady: requests arrive as others finish, spread over the cycle; a step carries the
--   running decodes and, on average, arrivals_per_step · isl prompt tokens at the prefill
--   step's cost per token; TTFT is half a step of waiting plus the steps of its own chunks
--   (no mixed steps: the full prefill steps of the group it arrives with), TPOT the mean step (mixed steps) or the decode step plus the prefill time per decoded
--   token (no mixed steps).
-- TTFT adds the framework's request overhead (receiving, tokenizing, scheduling a request and
-- returning its first token: fitted, serving_constants; the framework version's own value where
-- serving_constants has one, else the framework's), and the wait in the queue when the
-- rank's KV cache (device_memory) or the framework's request cap admits fewer requests than its
-- clients send (closed loop: (c - B) / B request latencies).
-- With MTP a decode step verifies 1 + k tokens and yields 1 + a + ... + a^k of them.
-- Disaggregated (xPyD; a prefill deployment given): x prefill instances run prefill-only steps
-- and y decode instances decode-only steps.  TTFT = request overhead + the request's own
-- prefill steps (chunks × the prefill step) + the KV transfer (kv_per_request's bytes of the
-- whole prompt at the decode deployment's KV dtype / the link's bandwidth + its latency) + the
-- queue wait; TPOT = the decode step / the tokens it yields.  Rate matching: a prefill instance
-- serves step_requests × dp prompts per chunks prefill steps, a decode instance its admitted
-- requests × dp per (osl − 1) / tokens-per-step decode steps; the system's request rate is the
-- least of x × the one, y × the other and the clients' closed-loop rate c / L (L: the request
-- latency without a queue), the pool of the lesser capacity limits, and the clients the limiting
-- pool cannot serve wait c / rate − L in the queue (counted in TTFT).
with

-- the schedule runs the requests a rank admits (serving_admission): its clients' unless the KV
-- cache or the request cap holds fewer
steps as (
    select
        s.*,
        a.kv_requests,
        -- disaggregated: the KV bytes of one request's whole prompt at the decode deployment's KV
        -- dtype, and the link that carries them: as given, else the slower scale-out NIC of the
        -- two pools' GPUs (gpus.csv scaleout_nic_per_gpu_Gbps) and no latency
        k.bytes_per_request as kv_transfer_bytes,
        coalesce(s.kv_link_bytes_per_s, least(pn.scaleout_bytes_per_s, dn.scaleout_bytes_per_s)) as link_bytes_per_s,
        coalesce(s.kv_link_latency_s, 0) as link_latency_s,
        case
            when not s.disaggregated then null
            when s.kv_link_bytes_per_s is not null then 'given'
            else format('gpus.csv scale-out NIC ({})', case
                when pn.scaleout_bytes_per_s <= dn.scaleout_bytes_per_s then s.prefill_gpu else s.gpu
            end)
        end as kv_link_source,
        a.admitted_requests,
        a.running_workload,
        -- attention DP without aligned contexts (TensorRT-LLM's default): each rank's prefill
        -- groups take iterations of their own, every rank waiting for them, so the dp ranks'
        -- groups follow one another: dp · g prefill steps, a request's group among dp · B
        -- requests (aligned, or one rank: the B requests of its rank, g steps)
        case when s.dp_contexts_aligned or s.disaggregated then 1 else s.dp end as serial_ranks,
        cast(
            ceil(a.admitted_requests * (case when s.dp_contexts_aligned or s.disaggregated then 1 else s.dp end)
            / s.step_requests) as bigint
        ) as running_groups
    from int_serving_steps as s
    inner join serving_admission as a on a.serving_case = s.serving_case
    left join base_deployments as dd on dd.deployment = s.deployment
    left join kv_per_request as k on k.model = s.model and k.workload = s.kv_workload and k.dtype = dd.kv_dtype
    left join int_gpu_specs as pn on pn.gpu = s.prefill_gpu and pn.dtype = 'bf16'
    left join int_gpu_specs as dn on dn.gpu = s.gpu and dn.dtype = 'bf16'
),

times as (
    select
        model,
        deployment,
        framework,
        workload,
        sol_s,
        overhead_s,
        time_s
    from serving_step_times
),

framework_constants as (
    select
        applies_to as framework,
        any_value(value) filter (where constant = 'first_wave_share') as first_wave_share,
        any_value(value) filter (where constant = 'request_overhead_s') as request_overhead_s
    from serving_constants
    group by applies_to
),

-- a framework version's own request overhead and first-wave share (applies_to
-- 'framework@version'; '@*' the rows that do not record their version)
version_constants as (
    select
        applies_to,
        any_value(value) filter (where constant = 'first_wave_share') as first_wave_share,
        any_value(value) filter (where constant = 'request_overhead_s') as request_overhead_s
    from serving_constants
    where contains(applies_to, '@')
    group by applies_to
),

timed as (
    select
        s.*,
        p.time_s as prefill_step_s,
        p.sol_s as prefill_step_sol_s,
        d.time_s as decode_step_s,
        d.sol_s as decode_step_sol_s,
        coalesce(v.first_wave_share, w.first_wave_share) as first_wave_share,
        coalesce(v.request_overhead_s, w.request_overhead_s) as request_overhead_s,
        -- the cost of one prompt token in a full prefill step (its overhead left out)
        (p.time_s - p.overhead_s) / (s.step_requests * s.chunk) as prefill_token_s,
        -- mean group index of a request: groups 1 .. g-1 of step_requests, the last of the rest
        (
            s.step_requests * (s.running_groups - 1) * s.running_groups / 2
            + (s.admitted_requests * s.serial_ranks - s.step_requests * (s.running_groups - 1)) * s.running_groups
        ) / (s.admitted_requests * s.serial_ranks) as mean_group,
        -- accepted tokens per decode step: 1 + sum_{i=1..k} a^i
        case
            when s.draft_tokens = 0 or s.acceptance_rate = 0 then 1.0
            when s.acceptance_rate = 1 then 1.0 + s.draft_tokens
            else (1 - s.acceptance_rate ^ (s.draft_tokens + 1)) / (1 - s.acceptance_rate)
        end as tokens_per_decode_step
    from steps as s
    inner join times as p
        on p.model = s.model and p.deployment = s.prefill_deployment and p.framework = s.framework
        and p.workload = s.prefill_workload
    inner join times as d
        on d.model = s.model and d.deployment = s.deployment and d.framework = s.framework
        and d.workload = s.running_workload
    inner join framework_constants as w on w.framework = s.framework
    left join version_constants as v on v.applies_to = s.framework || '@' || s.version
),

scheduled as (
    select
        *,
        osl - 1 as later_tokens,
        -- wave
        chunks * prefill_step_s * mean_group as wave_ttft_s,
        chunks * (running_groups - mean_group) as stall_steps,
        -- steady: decode steps a request lives, and the prompts arriving per step
        (osl - 1) / tokens_per_decode_step as decode_steps,
        admitted_requests / (chunks + (osl - 1) / tokens_per_decode_step) as arrivals_per_step
    from timed
),

regimes as (
    select
        *,
        case
            when later_tokens <= 0 then null
            when mixed_steps
                then (
                    stall_steps * prefill_step_s
                    + greatest(later_tokens - stall_steps * tokens_per_decode_step, 0)
                    / tokens_per_decode_step * decode_step_s
                ) / later_tokens
            else (stall_steps * prefill_step_s + decode_steps * decode_step_s) / later_tokens
        end as wave_tpot_s,
        -- the mean step: the decodes plus the prompt tokens arriving per step
        decode_step_s + arrivals_per_step * isl * prefill_token_s as steady_step_s
    from scheduled
),

-- steady TTFT without mixed steps (SGLang): a waiting prefill batch runs before the decode
-- batch, so the requests one prefill step admits start decoding in the same step and, with one
-- output length, finish in the same step; their clients send the next requests together, so
-- requests arrive in groups of a prefill step's requests and a request's prefill is the full
-- step (step_requests prompts), after half a decode step of waiting
steady as (
    select
        *,
        case
            when mixed_steps then steady_step_s / 2 + chunks * (decode_step_s + chunk * prefill_token_s)
            else decode_step_s / 2 + chunks * prefill_step_s
        end as steady_ttft_s,
        case
            when later_tokens <= 0 then null
            when mixed_steps then steady_step_s / tokens_per_decode_step
            else (decode_step_s + arrivals_per_step * isl * prefill_token_s) / tokens_per_decode_step
        end as steady_tpot_s
    from regimes
),

blended as (
    select
        *,
        request_overhead_s + first_wave_share * wave_ttft_s + (1 - first_wave_share) * steady_ttft_s
            as service_ttft_s,
        first_wave_share * wave_tpot_s + (1 - first_wave_share) * steady_tpot_s as tpot_s
    from steady
),

-- disaggregated: prefill-only and decode-only steps, the KV transfer between the pools, and
-- the request rate each pool serves (requests/s of all its instances)
pooled as (
    select
        * replace (
            case
                when disaggregated then request_overhead_s + chunks * prefill_step_s + kv_transfer_s
                else service_ttft_s
            end as service_ttft_s,
            case
                when not disaggregated then tpot_s
                when later_tokens > 0 then decode_step_s / tokens_per_decode_step
            end as tpot_s
        ),
        case
            when disaggregated then prefill_instances * step_requests * prefill_dp / (chunks * prefill_step_s)
        end as prefill_pool_rate,
        -- no later tokens: no decode steps, a decode pool of no limit
        case
            when disaggregated and later_tokens > 0
                then decode_instances * admitted_requests * dp * tokens_per_decode_step / (later_tokens * decode_step_s)
        end as decode_pool_rate
    from (
        select
            *,
            case when disaggregated then kv_transfer_bytes / link_bytes_per_s + link_latency_s end as kv_transfer_s
        from blended
    )
),

-- rate matching: the clients' closed-loop rate c / L, capped by the pool of the lesser capacity
matched as (
    select
        *,
        case
            when disaggregated then least(
                concurrency / (service_ttft_s + coalesce(later_tokens * tpot_s, 0)),
                prefill_pool_rate,
                coalesce(decode_pool_rate, prefill_pool_rate)
            )
        end as request_rate,
        case
            when not disaggregated then null
            when decode_pool_rate is null or prefill_pool_rate <= decode_pool_rate then 'prefill'
            else 'decode'
        end as limiting_pool
    from pooled
),

-- closed loop: c clients share B slots, a slot serves one request per request latency L
-- (service TTFT + later tokens × TPOT), so a client's cycle is c/B · L and a request waits
-- (c − B)/B · L in the queue before its prefill starts; disaggregated: a client's cycle is
-- c / the request rate, and a request waits that less L
waited as (
    select
        *,
        case
            when disaggregated
                then greatest(concurrency / request_rate - (service_ttft_s + coalesce(later_tokens * tpot_s, 0)), 0)
            else (rank_requests - admitted_requests) / admitted_requests
                * (service_ttft_s + coalesce(later_tokens * tpot_s, 0))
        end as queue_wait_s
    from matched
),

answered as (
    select
        *,
        service_ttft_s + queue_wait_s as ttft_s
    from waited
)

select
    serving_case,
    model,
    deployment,
    gpu,
    framework,
    version,
    version = '*' as version_assumed,
    isl,
    osl,
    concurrency,
    dp,
    draft_tokens,
    acceptance_rate,
    max_batched_tokens,
    mixed_steps,
    dp_contexts_aligned,
    kv_admission,
    max_running_requests,
    rank_requests,
    kv_requests,
    admitted_requests,
    chunk,
    chunks,
    step_requests,
    case when not disaggregated then running_groups end as prefill_groups,
    case when not disaggregated then mean_group end as mean_group,
    prefill_workload,
    running_workload as decode_workload,
    prefill_step_s,
    prefill_step_sol_s,
    prefill_token_s,
    decode_step_s,
    decode_step_sol_s,
    tokens_per_decode_step,
    case when not disaggregated then first_wave_share end as first_wave_share,
    request_overhead_s,
    case when not disaggregated then stall_steps end as stall_steps,
    case when not disaggregated then wave_ttft_s end as wave_ttft_s,
    case when not disaggregated then wave_tpot_s end as wave_tpot_s,
    case when not disaggregated then arrivals_per_step end as arrivals_per_step,
    case when not disaggregated then steady_step_s end as steady_step_s,
    case when not disaggregated then steady_ttft_s end as steady_ttft_s,
    case when not disaggregated then steady_tpot_s end as steady_tpot_s,
    service_ttft_s,
    queue_wait_s,
    ttft_s,
    tpot_s,
    ttft_definition,
    tpot_definition,
    metric_mean,
    ttft_s + later_tokens * tpot_s as request_latency_s,
    concurrency * osl / nullif(ttft_s + later_tokens * tpot_s, 0) as output_tokens_per_s,
    case when disaggregated then 'disaggregated' else 'aggregated' end as serving_mode,
    case when disaggregated then prefill_deployment end as prefill_deployment,
    case when disaggregated then prefill_gpu end as prefill_gpu,
    case when disaggregated then prefill_dp end as prefill_dp,
    case when disaggregated then prefill_instances end as prefill_instances,
    case when disaggregated then decode_instances end as decode_instances,
    case when disaggregated then kv_transfer_bytes end as kv_transfer_bytes,
    case when disaggregated then link_bytes_per_s end as kv_link_bytes_per_s,
    case when disaggregated then link_latency_s end as kv_link_latency_s,
    kv_link_source,
    kv_transfer_s,
    prefill_pool_rate,
    decode_pool_rate,
    request_rate,
    limiting_pool,
    request_rate / prefill_pool_rate as prefill_utilisation,
    request_rate / decode_pool_rate as decode_utilisation
from answered
