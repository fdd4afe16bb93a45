-- The assistant moves and cancels appointments too (docs/ai.md "Booking"): what an offer kept
-- for a conversation is for (times to book, times to move the patient's next appointment to,
-- or that appointment alone, to cancel), and the appointment it moves or cancels.
ALTER TABLE ai_booking_offers
  ADD COLUMN kind text NOT NULL DEFAULT 'book' CHECK (kind IN ('book', 'move', 'cancel')),
  ADD COLUMN appointment_id bigint;
