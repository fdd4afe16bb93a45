// Consent decisions (domain/consent.hpp): the most recent record that applies decides;
// marketing and data sharing need a grant, care messages and AI processing a withdrawal.
#include "domain/consent.hpp"

#include <gtest/gtest.h>

namespace {

using crm::domain::consent;
using crm::domain::consent_purpose;
using crm::domain::consent_refusal;
using crm::domain::is_stop_request;

consent record(std::int64_t id, consent_purpose p, bool granted,
               std::optional<std::int64_t> channel = std::nullopt) {
  consent c;
  c.id = id;
  c.purpose = p;
  c.granted = granted;
  c.channel_id = channel;
  return c;
}

TEST(Consent, WithoutRecordsCareIsAllowedAndMarketingIsNot) {
  std::vector<consent> none;
  EXPECT_FALSE(consent_refusal(none, consent_purpose::treatment_communication, 1));
  EXPECT_FALSE(consent_refusal(none, consent_purpose::appointment_reminders, 1));
  EXPECT_FALSE(consent_refusal(none, consent_purpose::ai_processing, 1));
  auto m = consent_refusal(none, consent_purpose::marketing, 1);
  ASSERT_TRUE(m);
  EXPECT_NE(m->find("marketing consent"), std::string::npos) << *m;
  EXPECT_TRUE(consent_refusal(none, consent_purpose::data_sharing, 1));
}

TEST(Consent, TheMostRecentRecordThatAppliesDecides) {
  std::vector<consent> h = {record(1, consent_purpose::marketing, true),
                            record(2, consent_purpose::marketing, false, 7)};
  EXPECT_FALSE(consent_refusal(h, consent_purpose::marketing, 3)); // any: granted
  EXPECT_TRUE(consent_refusal(h, consent_purpose::marketing, 7));  // channel 7: withdrawn
  h.push_back(record(3, consent_purpose::marketing, true));        // granted again for any
  EXPECT_FALSE(consent_refusal(h, consent_purpose::marketing, 7));
  h.push_back(record(4, consent_purpose::ai_processing, false));
  auto ai = consent_refusal(h, consent_purpose::ai_processing, 7);
  ASSERT_TRUE(ai);
  EXPECT_NE(ai->find("withdrew ai_processing"), std::string::npos) << *ai;
  // Another purpose's records never decide.
  EXPECT_FALSE(consent_refusal(h, consent_purpose::treatment_communication, 7));
}

TEST(Consent, StopRequestsAreWholeMessages) {
  for (auto s : {"STOP", "stop", " Stop. ", "PARAR", "pare", "Sair", "UNSUBSCRIBE", "cancelar"})
    EXPECT_TRUE(is_stop_request(s)) << s;
  for (auto s : {"", "don't stop", "stop sending marketing please", "stopped", "parar de fumar"})
    EXPECT_FALSE(is_stop_request(s)) << s;
}

} // namespace
