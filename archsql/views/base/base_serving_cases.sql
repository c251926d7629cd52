-- Serving questions (parameter table serving_cases): a model on a deployment served by a
-- framework version at a client concurrency, isl / osl tokens per request; aggregated, or
-- disaggregated (xPyD) when a prefill deployment is given: x prefill instances of it and y
-- decode instances of `deployment`.
select
    serving_case,
    model,
    deployment,
    framework,
    coalesce(version, '*') as version,
    isl,
    osl,
    concurrency,
    coalesce(acceptance_rate, 0) as acceptance_rate,
    prefill_deployment is not null as disaggregated,
    coalesce(prefill_deployment, deployment) as prefill_deployment,
    case when prefill_deployment is null then 1 else coalesce(prefill_instances, 1) end as prefill_instances,
    case when prefill_deployment is null then 1 else coalesce(decode_instances, 1) end as decode_instances,
    kv_link_bytes_per_s,
    kv_link_latency_s
from serving_cases
