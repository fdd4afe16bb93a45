-- The assistant's passages are single sentences now (docs/ai.md#retrieval): each keeps the
-- heading it stands under (or a question/answer pair's question) as its title, which the index
-- searches with the text but an answer does not quote. Passages cut before have none.
ALTER TABLE ai_passages ADD COLUMN title text NOT NULL DEFAULT '';
