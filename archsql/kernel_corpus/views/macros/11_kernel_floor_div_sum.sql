-- kernel_floor_div_sum(n, r): sum over j = 1 .. n of floor(j / r) — the compressed cache
-- entries visible, summed over positions, when every r tokens fold into one entry (an
-- entry covering positions t*r + 1 .. (t + 1)*r is complete once position j >= (t + 1)*r,
-- so the query at position j sees floor(j / r) entries).  Closed form, q = n // r:
--     r*q*(q - 1)/2 + q*(n - q*r + 1)
-- (positions t*r .. t*r + r - 1 contribute t each for t < q, the last n - q*r + 1 contribute q).
-- 0 for n <= 0.
create or replace macro kernel_floor_div_sum(n, r) as
case
    when n <= 0 then 0
    else r * (n // r) * (n // r - 1) // 2 + (n // r) * (n - (n // r) * r + 1)
end;
