-- Serving questions (parameter table serving_cases): a model on a deployment served by a
-- framework version at a client concurrency, isl / osl tokens per request.
select
    serving_case,
    model,
    deployment,
    framework,
    coalesce(version, '*') as version,
    isl,
    osl,
    concurrency,
    coalesce(acceptance_rate, 0) as acceptance_rate
from serving_cases
