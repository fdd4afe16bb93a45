// A tenant's committed contacts and companies, readable from the I/O threads without a hop to
// the contacts actor (docs/design.md "Reads on the I/O thread"). The contacts actor is the only
// writer: it applies each committed batch (and a load) under the exclusive lock, before the
// writes are answered, so a reader under the shared lock sees every acknowledged write and never
// half a batch. The actor reads its own records without the lock (no one else writes them).
//
// A reader gets nothing (and takes the actor's path) while the view is not current: before the
// load, during a reload, after the actor stopped, and while the tenant has sensitive custom
// fields (their values are opened or masked per role, and each opening is audited, by the
// actor). Read by actors::get_contact and actors::list_contacts on the calling (asio) thread.
#pragma once
#include "domain/contact.hpp"
#include "domain/contact_store.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace crm::actors {

struct contacts_records {
  domain::contact_store store;
  std::map<std::int64_t, domain::company> companies;
};

class contacts_view {
public:
  // What a read shows of the records: whole contacts (custom fields included: only while no
  // field is sensitive), or only what carries no custom field (list items).
  enum class shows : std::uint8_t { custom_fields, no_custom_fields };

  // Runs `read(records)` under the shared lock and returns true when the view is current.
  template <class Read>
  bool read(Read&& read, shows what = shows::custom_fields) const {
    std::shared_lock lock(mutex_);
    if (!current_ || (what == shows::custom_fields && !plain_)) return false;
    read(records_);
    return true;
  }

  // The owning actor's side.
  const contacts_records& records() const { return records_; }
  template <class Change>
  void write(Change&& change) {
    std::unique_lock lock(mutex_);
    change(records_);
  }
  // Each incarnation of the contacts actor claims the view when it starts; only the newest one
  // may make it current or not (an older one may be destroyed after its successor loaded).
  std::uint64_t claim() {
    std::unique_lock lock(mutex_);
    current_ = false;
    return ++owner_;
  }
  void set_current(std::uint64_t owner, bool current) {
    std::unique_lock lock(mutex_);
    if (owner == owner_) current_ = current;
  }
  void set_plain(bool plain) {
    std::unique_lock lock(mutex_);
    plain_ = plain;
  }

private:
  mutable std::shared_mutex mutex_;
  contacts_records records_;
  bool current_ = false;    // loaded by the running incarnation of the actor
  std::uint64_t owner_ = 0; // that incarnation
  bool plain_ = true;       // no sensitive contact fields defined
};

} // namespace crm::actors
