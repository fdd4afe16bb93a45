-- Sensitive custom fields (docs/compliance.md "Sensitive fields"): their values are stored
-- sealed inside the record's custom_fields ({"$sealed": "sb1:..."}).
ALTER TABLE custom_fields ADD COLUMN sensitive boolean NOT NULL DEFAULT false;
