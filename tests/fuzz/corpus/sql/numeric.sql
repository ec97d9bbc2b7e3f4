SELECT '12.50'::numeric(5,2) + 1, '1e3'::numeric / 3, round('-2.5'::numeric, 0), trunc(n::numeric / 7, 2), 'NaN'::numeric % 2, ceil('1.1'::numeric), sum(n::numeric) FROM t GROUP BY tag
