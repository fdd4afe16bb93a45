// Contacts as FHIR R4 Patients (domain/fhir.hpp): search matching and the Patient → contact map.
#include "domain/fhir.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

namespace {

namespace json = boost::json;
using namespace crm::domain;

contact ana() {
  contact c;
  c.id = 42;
  c.tenant_id = 7;
  c.first_name = "Ana Clara";
  c.last_name = "Souza";
  c.phone = "+5511987654321";
  c.email = "Ana@Example.com";
  c.custom_fields = R"({"gender":"F","birth_date":"1990-13-01"})";
  return c;
}

TEST(Fhir, NameSearchIsCaseInsensitiveStartsWithOfAnyPart) {
  patient_search s;
  for (auto name : {"ana", "clara", "souza", "ana clara s"}) {
    s.name = name;
    EXPECT_TRUE(patient_matches(s, ana())) << name;
  }
  for (auto name : {"na", "lara", "x"}) {
    s.name = name;
    EXPECT_FALSE(patient_matches(s, ana())) << name;
  }
}

TEST(Fhir, PhoneByDigitsEmailCaseInsensitiveAndIdentifier) {
  patient_search s;
  s.phone = "5511987654321";
  EXPECT_TRUE(patient_matches(s, ana()));
  s.phone = "551198765432";
  EXPECT_FALSE(patient_matches(s, ana()));
  patient_search e;
  e.email = "ana@example.com";
  EXPECT_TRUE(patient_matches(e, ana()));
  patient_search i;
  i.id = 42;
  EXPECT_TRUE(patient_matches(i, ana()));
  i.impossible = true;
  EXPECT_FALSE(patient_matches(i, ana()));
}

TEST(Fhir, OnlyValidGenderAndBirthDateAreRendered) {
  auto p = contact_to_patient(ana());
  EXPECT_FALSE(p.contains("gender"));    // "F" is not a FHIR code
  EXPECT_FALSE(p.contains("birthDate")); // month 13
  EXPECT_EQ(p.at("identifier").at(0).at("system"), "urn:carecrm:tenant:7:contact");
}

TEST(Fhir, APatientMapsToContactFields) {
  std::vector<issue> issues;
  auto c = patient_to_contact(json::parse(R"({"resourceType":"Patient","name":[{"given":["Bia"]},
        {"use":"official","family":"Lima","given":["Beatriz"]}],"active":false,
        "telecom":[{"system":"phone","value":"+5521999990001"},{"system":"fax","value":"1"}]})")
                                  .as_object(),
                              issues);
  EXPECT_TRUE(issues.empty());
  EXPECT_EQ(c.at("first_name"), "Beatriz");
  EXPECT_EQ(c.at("last_name"), "Lima");
  EXPECT_EQ(c.at("phone"), "+5521999990001");
  EXPECT_EQ(c.at("status"), "inactive");
  EXPECT_FALSE(c.contains("email"));
  patient_to_contact(json::parse(R"({"resourceType":"Patient"})").as_object(), issues);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].type, "missing");
}

} // namespace
