-- TTFT and TPOT of every serving case: aggregated in-flight batching at the client
-- concurrency (docs/serving.md).  The C requests of a rank arrive together and are prefilled
-- in groups of step_requests (one step of the token budget each, chunks steps per group);
-- a request of group j waits for the groups before it.  A request then decodes with the
-- others; the prefill steps of the groups after its own stall it (no mixed steps) or are
-- shared with its decodes (mixed steps: one token per such step).  With MTP a decode step
-- verifies 1 + k tokens and yields 1 + a + a^2 + ... + a^k of them on average.
with

steps as (
    select *
    from int_serving_steps
),

times as (
    select
        model,
        deployment,
        workload,
        sol_s,
        time_s
    from serving_step_times
),

timed as (
    select
        s.*,
        p.time_s as prefill_step_s,
        p.sol_s as prefill_step_sol_s,
        d.time_s as decode_step_s,
        d.sol_s as decode_step_sol_s,
        -- mean group index of a request: groups 1 .. g-1 of step_requests, the last of the rest
        (
            s.step_requests * (s.prefill_groups - 1) * s.prefill_groups / 2
            + (s.rank_requests - s.step_requests * (s.prefill_groups - 1)) * s.prefill_groups
        ) / s.rank_requests as mean_group,
        -- accepted tokens per decode step: 1 + sum_{i=1..k} a^i
        case
            when s.draft_tokens = 0 or s.acceptance_rate = 0 then 1.0
            when s.acceptance_rate = 1 then 1.0 + s.draft_tokens
            else (1 - s.acceptance_rate ^ (s.draft_tokens + 1)) / (1 - s.acceptance_rate)
        end as tokens_per_decode_step
    from steps as s
    inner join times as p on p.model = s.model and p.deployment = s.deployment and p.workload = s.prefill_workload
    inner join times as d on d.model = s.model and d.deployment = s.deployment and d.workload = s.decode_workload
),

scheduled as (
    select
        *,
        chunks * prefill_step_s * mean_group as ttft_s,
        -- prefill steps after a request's own group, on average
        chunks * (prefill_groups - mean_group) as stall_steps,
        osl - 1 as later_tokens
    from timed
),

decoded as (
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
            else (stall_steps * prefill_step_s + later_tokens / tokens_per_decode_step * decode_step_s) / later_tokens
        end as tpot_s
    from scheduled
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
    rank_requests,
    chunk,
    chunks,
    step_requests,
    prefill_groups,
    mean_group,
    prefill_workload,
    decode_workload,
    prefill_step_s,
    prefill_step_sol_s,
    decode_step_s,
    decode_step_sol_s,
    tokens_per_decode_step,
    stall_steps,
    ttft_s,
    tpot_s,
    ttft_s + later_tokens * tpot_s as request_latency_s,
    concurrency * osl / nullif(ttft_s + later_tokens * tpot_s, 0) as output_tokens_per_s
from decoded
