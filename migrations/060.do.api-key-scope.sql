-- Scoped API keys (issue 31 item 3): a key is `full` (every /v1 operation its account may do) or
-- `read` (GET only; over MCP, the read-only tools). Existing keys keep full access.
ALTER TABLE api_keys
  ADD COLUMN scope text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'read'));
