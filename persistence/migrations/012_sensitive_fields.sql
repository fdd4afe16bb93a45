-- Sensitive custom fields (docs/compliance.md "Sensitive fields"): their values are stored
-- sealed inside the record's custom_fields ({"$sealed": "sb1:..."}).
ALTER TABLE custom_fields ADD COLUMN sensitive boolean NOT NULL DEFAULT false;

-- Each tenant's data key, sealing its sensitive values: 32 random bytes, stored sealed by the
-- configured keys (carecrm secrets rotate moves it; what it sealed stays as it is). Made with the
-- tenant's first sensitive field.
CREATE TABLE tenant_data_keys (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL UNIQUE REFERENCES tenants (id),
  data_key    text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
