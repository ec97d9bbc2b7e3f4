-- quarry--1.0.sql: the objects of CREATE EXTENSION quarry, in schema quarry (quarry.control).
-- SQL only: no server headers, no shared library. See docs/scale-out.md.
\echo Use "CREATE EXTENSION quarry" to load this file. \quit

-- quarry.matches(column, query): the row matches Quarry's text query (docs/query-language.md)
-- in that full-text column, as column @@ 'query' on a Quarry node. postgres_fdw sends it to the
-- node holding the foreign table when the foreign server lists the extension in its
-- "extensions" option: it must then be IMMUTABLE and belong to an extension. PostgreSQL has
-- no inverted index to evaluate it with, so evaluating it here is an error, never a quiet
-- answer from PostgreSQL's own text search. Ranking: declare a column "_score real" on the
-- foreign table; the node fills it under the predicate it was sent.
CREATE FUNCTION matches(text, text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION 'quarry.matches() can only run on a Quarry node'
        USING ERRCODE = '0A000',
              DETAIL = 'PostgreSQL was about to evaluate the full-text predicate itself instead of sending it to a Quarry foreign table.',
              HINT = 'List the extension on the foreign server (ALTER SERVER s OPTIONS (ADD extensions ''quarry'')), and use quarry.matches(column, query) in WHERE on a column of a Quarry foreign table, with a constant or parameter as the query.';
END
$$;

COMMENT ON FUNCTION matches(text, text) IS
    'Quarry full-text match (column, query): runs on the Quarry node postgres_fdw sends it to';
