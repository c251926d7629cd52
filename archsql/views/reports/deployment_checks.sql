-- Deployments that break the layout rules, one row per problem, with the fix: the deployment
-- rows of parameter_checks (whose base views leave these deployments out of every answer).
select
    name as deployment,
    rule,
    problem,
    fix
from parameter_checks
where entity = 'deployment'
