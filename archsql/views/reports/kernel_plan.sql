-- The measurement plan of every model × deployment × workload: the distinct kernel
-- signatures one device runs in a step (kernel_signatures deduplicated), with the launches
-- per step and the ops that hit each, so one GPU measures what the deployment would run.
with

-- the signature fields are every column of kernel_signatures but the op's own identity
signatures as (
    select * exclude (op, role, members)
    from kernel_signatures
),

grouped as (
    select
        * exclude (uid, launches),
        sum(launches) as launches,
        count(*) as ops,
        list(uid order by uid) as uids
    from signatures
    group by all
)

select *
from grouped
