-- Identifiers compare as bytes (COLLATE "C"), whatever the database's default collation.
--
-- Every hot statement finds rows by an identifier: the events page descends the account index
-- (account_id) and looks up each event's notification (event_id), the ingester inserts into the
-- unique indexes on events.id and notifications.event_id, the delivery worker updates
-- notifications by id, the API finds keys by key_hash. Under a linguistic collation (en_US.UTF-8,
-- the default of many PostgreSQL installations and of the official container image) each of those
-- index comparisons goes through the collation library; under "C" it is a memcmp. Identifiers are
-- ASCII ids, hex and base58, so equality is the same and only speed changes (measured on the
-- events page, pgbench, 1,000,000 events: en-US ICU 4,300–4,400 pages/s, "C" 5,200–6,200; under
-- the C.UTF-8 default of this project's machines the gain is small, +1–9%).
--
-- Ordering changes only where it does not matter: no statement orders by these columns except
-- key rotation's keyset walk over watches.id, which only needs some total order.
-- Free text (emails, names, URLs, error texts) keeps the database's collation.

ALTER TABLE chain_cursor  ALTER COLUMN network          TYPE text COLLATE "C",
                          ALTER COLUMN block_id         TYPE text COLLATE "C";
ALTER TABLE chain_head    ALTER COLUMN network          TYPE text COLLATE "C";

ALTER TABLE accounts      ALTER COLUMN id               TYPE text COLLATE "C",
                          ALTER COLUMN telegram_chat_id TYPE text COLLATE "C";
ALTER TABLE api_keys      ALTER COLUMN id               TYPE text COLLATE "C",
                          ALTER COLUMN account_id       TYPE text COLLATE "C",
                          ALTER COLUMN key_hash         TYPE text COLLATE "C",
                          ALTER COLUMN network          TYPE text COLLATE "C";
ALTER TABLE watches       ALTER COLUMN id               TYPE text COLLATE "C",
                          ALTER COLUMN account_id       TYPE text COLLATE "C",
                          ALTER COLUMN network          TYPE text COLLATE "C",
                          ALTER COLUMN address          TYPE text COLLATE "C",
                          ALTER COLUMN address_hex      TYPE text COLLATE "C",
                          ALTER COLUMN secret_key_id    TYPE text COLLATE "C";
ALTER TABLE events        ALTER COLUMN id               TYPE text COLLATE "C",
                          ALTER COLUMN account_id       TYPE text COLLATE "C",
                          ALTER COLUMN watch_id         TYPE text COLLATE "C",
                          ALTER COLUMN network          TYPE text COLLATE "C",
                          ALTER COLUMN tx_id            TYPE text COLLATE "C",
                          ALTER COLUMN from_address     TYPE text COLLATE "C",
                          ALTER COLUMN to_address       TYPE text COLLATE "C",
                          ALTER COLUMN contract         TYPE text COLLATE "C";
ALTER TABLE notifications ALTER COLUMN id               TYPE text COLLATE "C",
                          ALTER COLUMN event_id         TYPE text COLLATE "C",
                          ALTER COLUMN account_id       TYPE text COLLATE "C",
                          ALTER COLUMN watch_id         TYPE text COLLATE "C",
                          ALTER COLUMN lease_token      TYPE text COLLATE "C";
ALTER TABLE attempts      ALTER COLUMN notification_id  TYPE text COLLATE "C";

-- Changing a column's type drops its planner statistics, and autovacuum would not gather them
-- again until enough rows change: until then the events page is planned blind (measured on
-- 1,000,000 events: a sort of every event of the account, ~2 s per page instead of ~0.5 ms).
-- So each table that had statistics is analyzed again. A table never analyzed (reltuples < 0:
-- a fresh installation) is left so: analyzed while empty, the planner would take it for empty
-- until autovacuum's next analyze (measured: ingest at a quarter of its speed meanwhile).
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['chain_cursor', 'chain_head', 'accounts', 'api_keys', 'watches',
                           'events', 'notifications', 'attempts'] LOOP
    IF (SELECT c.reltuples >= 0 FROM pg_class c WHERE c.oid = t::regclass) THEN
      EXECUTE format('ANALYZE %I', t);
    END IF;
  END LOOP;
END
$$;
