-- Who at the clinic owns a contact (contract §11, docs/design.md "The owner of a contact"): a
-- user of the tenant, checked by the contacts actor (no foreign key: a refused row must never
-- fail the group commit's transaction that other tenants' writes share). Users are never
-- deleted.
ALTER TABLE contacts ADD COLUMN owner_id bigint;
