-- Calendars, services and appointments (contract §10, docs/appointments.md). No calendar is ever
-- double-booked: the schedule actor of the tenant checks every booking against memory, and the
-- exclusion constraint below refuses any two appointments that hold overlapping time on one
-- calendar, whichever node or process wrote them. An appointment holds [starts_at,
-- blocked_until): its time plus the service's buffer, set when it is booked or moved.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE calendars (
  id                bigserial PRIMARY KEY,
  tenant_id         bigint NOT NULL REFERENCES tenants (id),
  name              text NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('practitioner', 'room', 'equipment')),
  user_id           bigint,
  time_zone         text NOT NULL,
  working_hours     jsonb NOT NULL,
  slot_step_minutes integer NOT NULL CHECK (slot_step_minutes BETWEEN 5 AND 240),
  is_active         boolean NOT NULL DEFAULT true,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);
CREATE INDEX calendars_tenant_idx ON calendars (tenant_id, id);

CREATE TABLE calendar_closures (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  calendar_id bigint NOT NULL REFERENCES calendars (id) ON DELETE CASCADE,
  starts_at   timestamptz NOT NULL,
  ends_at     timestamptz NOT NULL,
  reason      text NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL,
  CHECK (ends_at > starts_at)
);
CREATE INDEX calendar_closures_tenant_idx ON calendar_closures (tenant_id, id);

-- price_cents with currency (both or neither); reminders: [{"before_minutes", "channel_id",
-- "text"}].
CREATE TABLE services (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants (id),
  name             text NOT NULL,
  duration_minutes integer NOT NULL CHECK (duration_minutes BETWEEN 5 AND 720),
  buffer_minutes   integer NOT NULL DEFAULT 0 CHECK (buffer_minutes BETWEEN 0 AND 240),
  calendar_ids     bigint[] NOT NULL DEFAULT '{}',
  price_cents      bigint,
  currency         text,
  reminders        jsonb NOT NULL DEFAULT '[]',
  is_active        boolean NOT NULL DEFAULT true,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  CHECK (price_cents IS NULL OR currency IS NOT NULL)
);
CREATE INDEX services_tenant_idx ON services (tenant_id, id);

CREATE TABLE appointments (
  id            bigserial PRIMARY KEY,
  tenant_id     bigint NOT NULL REFERENCES tenants (id),
  contact_id    bigint NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
  service_id    bigint NOT NULL REFERENCES services (id),
  calendar_id   bigint NOT NULL REFERENCES calendars (id),
  starts_at     timestamptz NOT NULL,
  ends_at       timestamptz NOT NULL,
  blocked_until timestamptz NOT NULL,
  status        text NOT NULL CHECK (status IN ('booked', 'confirmed', 'arrived', 'completed',
                                                'cancelled', 'no_show')),
  notes         text NOT NULL DEFAULT '',
  source        text NOT NULL CHECK (source IN ('staff', 'patient_reply', 'ai', 'api')),
  cancel_reason text,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  CHECK (ends_at > starts_at AND blocked_until >= ends_at),
  CONSTRAINT appointments_no_double_booking EXCLUDE USING gist (
    calendar_id WITH =, tstzrange(starts_at, blocked_until) WITH &&)
    WHERE (status IN ('booked', 'confirmed', 'arrived', 'completed'))
);
CREATE INDEX appointments_tenant_idx ON appointments (tenant_id, id);
CREATE INDEX appointments_contact_idx ON appointments (contact_id);
