-- Events found by their metadata (issue 40 item 5): the console's search box takes a metadata value
-- ("INV-2026-0091", under whatever key) and GET /v1/events takes exact key/value pairs
-- (metadata[invoice]=INV-2026-0091). Both start from the values (src/events/list.ts
-- eventFilterClauses): one GIN index over each event's metadata values as a text array, so a
-- search reads the few events holding that value instead of walking every event of the account;
-- the key/value containment (e.metadata @> …) is checked on those rows.
--
-- Partial: only events that carry metadata are in it (NULL: most events; ingest of those pays
-- nothing). A query must say `metadata IS NOT NULL` for the planner to use it.
--
-- The function is IMMUTABLE (an index expression must be): it reads only its argument, and
-- jsonb_each_text and array_agg are immutable. Values sorted and deduplicated: the array of a
-- given object is always the same.
CREATE FUNCTION tronwatch_metadata_values(m jsonb) RETURNS text[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT coalesce(array_agg(DISTINCT v.value ORDER BY v.value), '{}'::text[])
          FROM jsonb_each_text(m) AS v $$;

CREATE INDEX events_metadata_values ON events USING gin (tronwatch_metadata_values(metadata))
  WHERE metadata IS NOT NULL;
