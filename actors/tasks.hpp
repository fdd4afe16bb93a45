// Tasks (contract §11, docs/tasks.md), owned by the tenant's tasks actor: their only writer,
// answering reads from memory, and the one that fires task.overdue once an open task passes its
// due time (once per due time, across restarts). Answers are the JSON the API returns.
#pragma once
#include "actors/callback.hpp"
#include "domain/task.hpp"

#include <string>

namespace crm::actors {

class runtime;

void list_tasks(runtime& rt, std::int64_t tenant, domain::task_query q, int page, int per_page,
                callback<std::string> reply);
// 404 for no tenant's task, 403 for another tenant's.
void get_task(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
// `t` as read from the request (or a workflow step, with its run and step); the creator is `by`.
void create_task(runtime& rt, std::int64_t tenant, domain::task t, domain::requester by,
                 callback<std::string> reply);
// The assignee, the creator or a manager (else 403).
void update_task(runtime& rt, std::int64_t tenant, std::int64_t id, domain::task_patch p,
                 domain::requester by, callback<std::string> reply);
// The creator or a manager (else 403).
void delete_task(runtime& rt, std::int64_t tenant, std::int64_t id, domain::requester by,
                 callback<domain::done> reply);
// The contact was deleted or erased, and its tasks with it (told by the contacts actor).
void forget_contact_tasks(runtime& rt, std::int64_t tenant, std::int64_t contact);
// A contact merged into another (contract §11): its tasks are the survivor's now.
void move_contact_tasks(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into);
// The deal was deleted: its tasks stay, unlinked (told by the deals actor).
void forget_deal_tasks(runtime& rt, std::int64_t tenant, std::int64_t deal);

} // namespace crm::actors
