-- Knowledge documents sent as HTML or PDF (docs/ai.md "Knowledge"): kept as the text extracted
-- from them, with their kind.
ALTER TABLE ai_documents DROP CONSTRAINT ai_documents_kind_check;
ALTER TABLE ai_documents ADD CONSTRAINT ai_documents_kind_check
  CHECK (kind IN ('text', 'qa', 'html', 'pdf'));
