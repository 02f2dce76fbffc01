-- The console's search (issue 19 item 5): one event by its transaction id or by an address on
-- either side of the transfer, within an account, newest first. The event id is the primary key.
-- Each index ends with created_at so a search page is read in its order (src/events/list.ts);
-- an address search reads both sides (a BitmapOr of the last two) and sorts what it found.
CREATE INDEX events_account_tx ON events (account_id, tx_id, created_at);
CREATE INDEX events_account_from ON events (account_id, from_address, created_at);
CREATE INDEX events_account_to ON events (account_id, to_address, created_at);
