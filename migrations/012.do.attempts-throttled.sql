-- Chat deliveries (issue 13; DESIGN decisions "chat deliveries"): a Bot API 429 is recorded as an
-- attempt row (the console shows it: status 429, its retry_after) but is not one of the six
-- attempts: the notification is rescheduled at retry_after with its count unchanged. Such a row is
-- `throttled`, and like a `duplicate` one it stands outside the key (notification_id, attempt): it
-- carries the number of the attempt it would have been (attempts + 1), which the next real attempt
-- then takes. src/delivery/throttle.ts writes it; claim.ts and complete.ts name the key with the
-- same predicate.

ALTER TABLE attempts ADD COLUMN throttled boolean NOT NULL DEFAULT false;

DROP INDEX attempts_notification_attempt;
CREATE UNIQUE INDEX attempts_notification_attempt ON attempts (notification_id, attempt)
  WHERE NOT duplicate AND NOT throttled;
