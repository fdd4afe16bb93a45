// One tenant's changes to one aggregate, written as part of a group-commit transaction
// (persistence/group_committer). Each aggregate's repository defines its batch type; the
// committer only asks a batch to append its statements, so batches of contacts, deals and any
// later aggregate of many tenants share one transaction, one round trip and one fsync.
#pragma once
#include "domain/audit.hpp"
#include "domain/failure.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pqxx {
class transaction_base;
}

namespace crm::persistence {

class pg_conn;

// The text of one transaction being assembled: statements, quoting by the connection, and the
// server-side prepared statements it needs (prepared ahead of BEGIN on a connection that lacks
// them, and remembered once the transaction committed).
class sql_text {
public:
  sql_text(pqxx::transaction_base& tx, pg_conn& conn) : tx_(tx), conn_(conn) {}

  std::string& body() { return body_; }
  const std::string& prelude() const { return prelude_; }
  std::string quote(std::string_view s) const;
  // Makes sure `name` is prepared (with the full `PREPARE ...;` text) before the transaction.
  void need_prepared(const char* name, const char* prepare_statement);

  // BEGIN, the body, COMMIT; with the needed PREPAREs first.
  std::string transaction() const;
  bool empty() const { return body_.empty(); }

  // What has been appended so far, to drop a batch that failed half-way through appending.
  struct mark {
    std::size_t prelude, body, preparing;
  };
  mark position() const { return {prelude_.size(), body_.size(), preparing_.size()}; }
  void rewind(const mark& m) {
    prelude_.resize(m.prelude);
    body_.resize(m.body);
    preparing_.resize(m.preparing);
  }
  // After COMMIT: the connection now has what was prepared.
  void committed();

private:
  pqxx::transaction_base& tx_;
  pg_conn& conn_;
  std::string prelude_;
  std::string body_;
  std::vector<const char*> preparing_;
};

// A PostgreSQL array literal ({"a","b",NULL}), built one element at a time; quote the whole
// of text() as an SQL string.
class array_literal {
public:
  void add(std::string_view v) {
    separate();
    out_ += '"';
    for (char ch : v) {
      if (ch == '"' || ch == '\\') out_ += '\\';
      out_ += ch;
    }
    out_ += '"';
  }
  void add_optional(const std::optional<std::string>& v) {
    if (v)
      add(*v);
    else
      add_null();
  }
  void add_number(std::int64_t v) {
    separate();
    out_ += std::to_string(v);
  }
  void add_null() {
    separate();
    out_ += "NULL";
  }
  bool empty() const { return n_ == 0; }
  std::string text() const { return "{" + out_ + "}"; }

private:
  void separate() {
    if (n_++) out_ += ',';
  }
  std::string out_;
  std::size_t n_ = 0;
};

class tx_batch {
public:
  virtual ~tx_batch() = default;
  virtual std::int64_t tenant() const = 0;
  // Appends this batch's statements (each ending with ";\n") to `out.body()`.
  virtual void append_sql(sql_text& out) const = 0;

  // The audit rows of the batch's changes (docs/compliance.md), written by the committer in the
  // same transaction as the statements, whatever the aggregate.
  std::vector<domain::audit_record> audit;
};

// A batch left out of a transaction, and what its writer is told.
struct refused_batch {
  std::size_t index;
  domain::failure why;
};

// Commits the batches (of any tenants and aggregates) in one transaction, in one round trip,
// or throws (nothing of them is then stored; the connection is dropped). In a cluster each
// tenant's statements are preceded by its lease's fence (persistence/fence.hpp). A batch that
// throws while its statements are appended (a value the connection cannot quote: 500), or whose
// tenant's lease this node no longer holds (503), is left out of the transaction and put in
// `refused`: it fails alone, never its neighbours.
void commit_batches(pg_conn& c, const tx_batch* const* batches, std::size_t n,
                    std::vector<refused_batch>& refused);

} // namespace crm::persistence
