-- Who gets watch alert e-mails (issue 19 item 2: "e-mail the account's members who opted in"):
-- each console user's own choice, switched from the Members page (PUT /console/api/members/me/alerts).
--
-- Existing owners and admins were the recipients before this column: they stay opted in, so
-- nothing changes for current accounts; developers and viewers start off. New users get the same
-- rule from src/accounts/users.ts createUser (owner/admin on, developer/viewer off); the column's
-- default (off) only covers rows written some other way, so nobody is mailed without a decision.
-- A role change keeps the member's choice.
ALTER TABLE console_users ADD COLUMN alert_emails boolean NOT NULL DEFAULT false;
UPDATE console_users SET alert_emails = true WHERE role IN ('owner', 'admin');
