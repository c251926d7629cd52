-- Routed expert nodes: the experts of a layer (their copies' whole parts), top_k (a token's
-- share of the copies: parts × active_count / count, base_instances) and the group the copies
-- are spread over.  Read by the per-device weight reads (experts touched) and the expert
-- all-to-all (ranks reached).
select
    l.model,
    l.phase,
    l.uid,
    l."group",
    any_value(l.parts) as experts,
    any_value(l.parts * i.active_count / i.count) as top_k
from base_layouts as l
inner join base_instances as i on i.model = l.model and i.uid = l.uid
where l.tensor = 'copies' and l.placement = 'S'
group by l.model, l.phase, l.uid, l."group"
