-- version_order(v): a sort key for library versions, newest last: the release numbers
-- (four, zero-padded: 0.9 < 0.10 < 0.10.1), then the stage (a / b / rc / dev before the
-- release, post after it) and its number.  '1.3.0rc20' < '1.3.0' < '1.3.0.post1';
-- local suffixes ('+cpu') are ignored.  A version without leading digits sorts first.
create or replace macro version_order(v) as
list_concat(
    list_resize(
        list_transform(
            string_split(coalesce(nullif(regexp_extract(v, '^v?([0-9]+(\.[0-9]+)*)', 1), ''), '0'), '.'),
            lambda x: x::bigint
        ),
        4,
        0
    ),
    [
        case
            when regexp_matches(v, '^v?[0-9.]+(a|b|rc|c|dev|alpha|beta|pre)') then 0
            when regexp_matches(v, '^v?[0-9.]+\.?post') then 2
            else 1
        end,
        coalesce(try_cast(regexp_extract(v, '^v?[0-9.]*[0-9]\.?[a-z]+\.?([0-9]+)', 1) as bigint), 0)
    ]
);
