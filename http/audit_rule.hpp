// How a route is audited (http/audit.hpp explains the modes; http/audit.cpp holds the table).
#pragma once
#include <cstdint>
#include <string>

namespace crm::http {

enum class audit_mode : std::uint8_t { none, read, list, change_in_tx, change, security };

struct audit_rule {
  audit_mode mode = audit_mode::none;
  std::string resource;        // what the route touches: contact, deal, user, session, ...
  std::string action;          // read, list, create, update, delete, export, login, ...
  std::string id_param = "id"; // the path parameter naming the record ("" for none)
  std::string list_key;        // list: the array of the body whose objects carry the ids
  std::string nested;          // list: the member of each object that carries the id
  // The member naming the record when the path does not (id_param ""): read: of the answer;
  // list: of each listed object (instead of "id"). An appointment names its patient so.
  std::string answer_id;
  // list: the query holds a credential (a calendar feed's token) and is not recorded.
  bool secret_query = false;
};

} // namespace crm::http
