-- kernel_link_bytes(op_kind, message_bytes, group_size, nodes): bytes each rank of a
-- collective must send (and receive) over its scale-up link at least, for ranks inside one
-- node: message_bytes·(group_size - 1)/group_size.  A ring all-reduce sends twice that,
-- an in-switch (NVLS) reduction about that, so the bound holds for every algorithm.  Null
-- for other op kinds and for collectives that span nodes (their bound is the NIC).
create or replace macro kernel_link_bytes(op_kind, message_bytes, group_size, nodes) as
case
    when op_kind in ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all') and coalesce(nodes, 1) = 1
        then message_bytes::double * (group_size - 1) / group_size
end;
