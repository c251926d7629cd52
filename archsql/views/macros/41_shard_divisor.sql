-- shard_divisor(parts, segments, degree): how many times smaller one device's share of a split
-- tensor axis is than the axis (shard_local): parts / ceil(parts / degree) for an axis cut into
-- whole pieces (the fit rule), the segments' total over their local total for a fused axis,
-- the degree for an even split (parts and segments null).  Per-device quantities are global
-- quantities divided by the product of the divisors of the groups that split them.
create or replace macro shard_divisor(parts, segments, degree) as
case
    when segments is not null
        then list_sum(list_transform(segments, lambda x: x.size)) / shard_local(null, null, segments, degree)
    when parts is not null then parts / ((parts + degree - 1) // degree)
    else degree
end;
