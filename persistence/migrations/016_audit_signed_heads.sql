-- Each chain's head, and each anchor retention leaves, is signed with a key held outside the
-- database (issue 31, docs/compliance.md "Tamper evidence"): a keyed hash (secret_keys::hash,
-- purpose "audit.head" / "audit.pruned", bound to the tenant) of "<seq>:<hash>", under the
-- configured --secret-keys. Rewinding a chain (removing its newest blocks and setting its head
-- back) now needs that key. The heads and anchors stored before this migration are signed in
-- the transaction that applies it (persistence::apply_migrations), once: applying it again
-- fails on the columns it adds.
ALTER TABLE audit_heads ADD COLUMN signature text;
ALTER TABLE audit_pruned ADD COLUMN signature text;
