-- An outbound message is marked before its provider is called, and the mark is cleared with the
-- attempt's outcome (docs/channels.md "A send whose outcome is unknown"). A mark found when the
-- channel actor loads means carecrm stopped, or lost the outcome, in between: the provider may
-- have taken the message. What happens then depends on whether a copy can be told apart
-- (domain::after_unknown_send), so no message is silently sent twice or silently dropped.
ALTER TABLE messages ADD COLUMN send_started_at timestamptz;
