-- One row per attempt of a notification: (notification_id, attempt) is unique (DESIGN invariant
-- 3, habit 8 "every attempt is a row").
--
-- Before this migration a worker whose lease had been taken over recorded its attempt under the
-- number it was made as, and so did the claim that took over, so a notification may hold two rows
-- numbered N. Both are real requests (the receiver may have seen both), and this table is the
-- audit log of what was sent: deleting either would hide a send, and renumbering would give a row
-- a number it was never sent as (and one the notification's counter never counted: it counted
-- only the attempt that moved it). So every row stays as it was recorded; the first one recorded
-- under a number (lowest id) keeps its place in the key, and each later one is marked
-- `duplicate`, outside the key. From this migration on the recorder (src/delivery/complete.ts)
-- gives every attempt its own number and writes `duplicate` only for an outcome whose number
-- another outcome already holds (a worker of an older version still finishing during an upgrade).

ALTER TABLE attempts ADD COLUMN duplicate boolean NOT NULL DEFAULT false;

UPDATE attempts AS a
   SET duplicate = true
  FROM (SELECT id, row_number() OVER (PARTITION BY notification_id, attempt ORDER BY id) AS k
          FROM attempts) AS d
 WHERE a.id = d.id AND d.k > 1;

-- The key. ON CONFLICT (notification_id, attempt) WHERE NOT duplicate names it. A partial index
-- cannot serve every lookup by notification_id (it leaves duplicates out), so attempts_notification
-- stays.
CREATE UNIQUE INDEX attempts_notification_attempt ON attempts (notification_id, attempt)
  WHERE NOT duplicate;
