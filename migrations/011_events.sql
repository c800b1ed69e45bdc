-- Events (contract section 10) and their delivery to the teams' webhook
-- endpoints; the demo sources (section 9).

-- The sources POST /v2/link/connect/demo connects. A source an import put in
-- the catalogue first keeps its name and logo.
INSERT INTO sources (slug, name, logo) VALUES
  ('apple_health_kit', 'Apple HealthKit', 'https://storage.example.com/providers/apple_health_kit.png'),
  ('fitbit', 'Fitbit', 'https://storage.example.com/providers/fitbit.png'),
  ('freestyle_libre', 'Freestyle Libre', 'https://storage.example.com/providers/freestyle_libre.png'),
  ('oura', 'Oura', 'https://storage.example.com/providers/oura.png')
ON CONFLICT (slug) DO NOTHING;

-- One row per change of a user or a connection, written in the statement of
-- the change itself (src/writes/team-state.ts): a change that commits has its
-- event, one that rolls back has none. `body` is the envelope as sent. No
-- foreign keys, like users (docs/decisions/users-without-foreign-keys.md);
-- the purge deletes a user's events with the user.
CREATE TABLE events (
  event_id   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  team_id    uuid NOT NULL,
  user_id    uuid NOT NULL,
  event_type text NOT NULL,
  body       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_user ON events (user_id);
CREATE INDEX events_created ON events (created_at);

-- One row per event and endpoint it is sent to (the fan-out, in the same
-- statement as the event): its state and its attempts so far. While an
-- attempt runs, next_attempt_at is the end of its lease: a dispatcher that
-- dies mid-attempt leaves the message to be claimed again then.
CREATE TABLE webhook_messages (
  event_id         uuid NOT NULL REFERENCES events ON DELETE CASCADE,
  endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
  created_at       timestamptz NOT NULL,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts         int NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  last_attempt_at  timestamptz,
  last_status_code int,
  PRIMARY KEY (event_id, endpoint_id)
);
-- The messages route, oldest first; the same for the messages not delivered (status filter, recover).
CREATE INDEX webhook_messages_list ON webhook_messages (endpoint_id, created_at, event_id);
CREATE INDEX webhook_messages_undelivered ON webhook_messages (endpoint_id, created_at, event_id) WHERE status <> 'delivered';
-- Claims: an endpoint's pending messages, the earliest due first.
CREATE INDEX webhook_messages_due ON webhook_messages (endpoint_id, next_attempt_at) WHERE status = 'pending';

-- What the delivery keeps per endpoint: since when every attempt has failed
-- (WEBHOOK_DISABLE_AFTER), and the messages claimed in the current second
-- (rate_limit, shared by every instance).
ALTER TABLE webhook_endpoints
  ADD COLUMN failing_since timestamptz,
  ADD COLUMN rate_window timestamptz,
  ADD COLUMN rate_used int NOT NULL DEFAULT 0;

-- Wakes the dispatchers (LISTEN hds_webhook_messages) as the messages'
-- statement commits: the payload names the endpoints, or is empty when they
-- are too many for one notification (the dispatchers then look at all).
CREATE FUNCTION webhook_messages_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  endpoints text;
BEGIN
  SELECT string_agg(DISTINCT endpoint_id::text, ',') INTO endpoints FROM inserted;
  IF endpoints IS NOT NULL THEN
    PERFORM pg_notify('hds_webhook_messages', CASE WHEN length(endpoints) <= 7000 THEN endpoints ELSE '' END);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER webhook_messages_notify AFTER INSERT ON webhook_messages
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION webhook_messages_notify();
