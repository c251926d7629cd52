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
--   step's cost per token; TTFT is half a step of waiting plus the steps of its own chunks,
--   TPOT the mean step (mixed steps) or the decode step plus the prefill time per decoded
--   token (no mixed steps).
-- TTFT adds the framework's request overhead (receiving, tokenizing, scheduling a request and
-- returning its first token: fitted, serving_constants; the framework version's own value where
-- serving_constants has one, else the framework's), and the wait in the queue when the
-- rank's KV cache (device_memory) or the framework's request cap admits fewer requests than its
-- clients send (closed loop: (c - B) / B request latencies).
-- With MTP a decode step verifies 1 + k tokens and yields 1 + a + ... + a^k of them.
with

-- the schedule runs the requests a rank admits (serving_admission): its clients' unless the KV
-- cache or the request cap holds fewer
steps as (
    select
        s.*,
        a.kv_requests,
        a.admitted_requests,
        a.running_workload,
        cast(ceil(a.admitted_requests / s.step_requests) as bigint) as running_groups
    from int_serving_steps as s
    inner join serving_admission as a on a.serving_case = s.serving_case
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
            + (s.admitted_requests - s.step_requests * (s.running_groups - 1)) * s.running_groups
        ) / s.admitted_requests as mean_group,
        -- accepted tokens per decode step: 1 + sum_{i=1..k} a^i
        case
            when s.draft_tokens = 0 or s.acceptance_rate = 0 then 1.0
            when s.acceptance_rate = 1 then 1.0 + s.draft_tokens
            else (1 - s.acceptance_rate ^ (s.draft_tokens + 1)) / (1 - s.acceptance_rate)
        end as tokens_per_decode_step
    from steps as s
    inner join times as p
        on p.model = s.model and p.deployment = s.deployment and p.framework = s.framework
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

steady as (
    select
        *,
        case
            when mixed_steps then steady_step_s / 2 + chunks * (decode_step_s + chunk * prefill_token_s)
            else decode_step_s / 2 + chunks * (prefill_step_s - (step_requests - 1) * chunk * prefill_token_s)
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

-- closed loop: c clients share B slots, a slot serves one request per request latency L
-- (service TTFT + later tokens × TPOT), so a client's cycle is c/B · L and a request waits
-- (c − B)/B · L in the queue before its prefill starts
waited as (
    select
        *,
        (rank_requests - admitted_requests) / admitted_requests * (service_ttft_s + coalesce(later_tokens * tpot_s, 0))
            as queue_wait_s
    from blended
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
    kv_admission,
    max_running_requests,
    rank_requests,
    kv_requests,
    admitted_requests,
    chunk,
    chunks,
    step_requests,
    running_groups as prefill_groups,
    mean_group,
    prefill_workload,
    running_workload as decode_workload,
    prefill_step_s,
    prefill_step_sol_s,
    prefill_token_s,
    decode_step_s,
    decode_step_sol_s,
    tokens_per_decode_step,
    first_wave_share,
    request_overhead_s,
    stall_steps,
    wave_ttft_s,
    wave_tpot_s,
    arrivals_per_step,
    steady_step_s,
    steady_ttft_s,
    steady_tpot_s,
    service_ttft_s,
    queue_wait_s,
    ttft_s,
    tpot_s,
    ttft_definition,
    tpot_definition,
    metric_mean,
    ttft_s + later_tokens * tpot_s as request_latency_s,
    concurrency * osl / nullif(ttft_s + later_tokens * tpot_s, 0) as output_tokens_per_s
from answered
