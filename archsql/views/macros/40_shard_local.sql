-- shard_local(size, parts, segments, degree): the length one device holds of a tensor axis of
-- `size` elements split over a group of `degree` devices (base_layouts.parts / .segments), by
-- the fit rule: the axis is cut into `parts` whole pieces (heads, rows, experts) and the
-- fullest device holds ceil(parts / degree) of them — 4 KV heads on 8 devices: 1 head each,
-- every head twice.  A fused axis (segments: [{size, parts}], e.g. Mamba2's in_proj = z | x |
-- B | C | dt) holds ceil(parts / degree) pieces of every segment.  parts and segments null:
-- an even split by construction (requests over dp), size / degree.
create or replace macro shard_local(size, parts, segments, degree) as
case
    when segments is not null then list_sum(
        list_transform(segments, lambda x: (x.size // x.parts) * ((x.parts + degree - 1) // degree))
    )
    when parts is not null then (size // parts) * ((parts + degree - 1) // degree)
    else size / degree
end;
