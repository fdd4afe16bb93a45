-- Sensitive custom-field values are bound to their contact and field (issue 31): each is sealed
-- with the tenant's data key under the purpose "contact.custom_field.<contact id>.<field>", so a
-- sealed value copied into another contact or field by hand does not open there. The values
-- sealed before this migration (bound to the tenant only) are opened and sealed again, bound, in
-- the transaction that applies it (persistence::apply_migrations), which needs --secret-keys
-- when a tenant has a data key.
COMMENT ON COLUMN contacts.custom_fields IS
  'values of sensitive fields are {"$sealed": ...}, bound to their contact and field';
