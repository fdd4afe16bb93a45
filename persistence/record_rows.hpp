// Column lists and row readers of the records that more than their own repository reads: the
// contact's timeline (persistence/timeline_repo.cpp) reads notes, tasks, appointments,
// consents, messages and deals by id and renders each as its own resource. Defined beside the
// repository that writes them. Includes pqxx: only for persistence/*.cpp.
#pragma once
#include "domain/consent.hpp"
#include "domain/deal.hpp"
#include "domain/note.hpp"
#include "domain/schedule.hpp"
#include "domain/task.hpp"

#include <boost/json/object.hpp>
#include <pqxx/row>

namespace crm::persistence::rows {

extern const char* const note_columns; // note_repo.cpp
domain::note to_note(const pqxx::row& r);

extern const char* const task_columns; // task_repo.cpp
domain::task to_task(const pqxx::row& r);

extern const char* const appointment_columns; // schedule_repo.cpp
domain::appointment to_appointment(const pqxx::row& r);

extern const char* const consent_columns; // channel_repo.cpp
domain::consent to_consent(const pqxx::row& r);

// Over `messages m` (the attachments are read from the message's id).
extern const char* const message_columns; // channel_repo.cpp
boost::json::object message_json(const pqxx::row& r);

extern const char* const deal_columns; // deal_repo.cpp
domain::deal to_deal(const pqxx::row& r);
// Over `deal_history h`: a row of GET /deals/{id}/history.
extern const char* const deal_history_columns; // deal_repo.cpp
boost::json::object deal_history_json(const pqxx::row& r);

} // namespace crm::persistence::rows
