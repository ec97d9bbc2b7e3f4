SELECT 1.50, -0.50, 1e3, pg_typeof(1.5), 0.1 + 0.2, CASE WHEN true THEN 1.5 ELSE 2 END;
CREATE TABLE fz_num (id int PRIMARY KEY, k varchar(4), p numeric(12,2), q numeric);
INSERT INTO fz_num VALUES (1, 'a', 12.505, 12.50), (2, 'a', 'NaN', '1e-3'), (3, 'b', -0.01, 'Infinity');
SELECT k, sum(p), avg(p), min(p), max(q), sum(q) FROM fz_num GROUP BY k ORDER BY k;
SELECT id FROM fz_num WHERE p > 1.2 AND q <> 0.001 ORDER BY p DESC NULLS LAST LIMIT 2;
SELECT '{int4,text,float8}'::regtype[], ARRAY[23,25]::oid[]::regtype[];
SET bytea_output = 'escape'; SELECT '\x0aff'::bytea; RESET bytea_output;
