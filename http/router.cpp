#include "http/router.hpp"

#include <algorithm>

#include <stdexcept>

namespace crm::http {

namespace {
struct segment_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
} // namespace

struct router::node {
  // Transparent hashing: a lookup by string_view allocates nothing.
  std::unordered_map<std::string, std::unique_ptr<node>, segment_hash, std::equal_to<>> literals;
  std::unique_ptr<node> param;
  std::string param_name;
  std::array<const route*, verb_count> by_method{};
};

router::router() : root_(std::make_unique<node>()) {}
router::~router() = default;
router::router(router&&) noexcept = default;
router& router::operator=(router&&) noexcept = default;

namespace {

template <class F>
void for_each_segment(std::string_view path, F f) {
  std::size_t i = 0;
  if (!path.empty() && path[0] == '/') i = 1;
  while (i <= path.size()) {
    auto slash = path.find('/', i);
    auto seg = path.substr(i, slash == std::string_view::npos ? std::string_view::npos : slash - i);
    if (!f(seg)) return;
    if (slash == std::string_view::npos) return;
    i = slash + 1;
  }
}

} // namespace

void router::add(route r) {
  largest_body_limit_ = std::max(largest_body_limit_, r.body_limit);
  switch (r.auth) {
  case access::bearer: r.limit = rate_class::user; break;
  case access::operator_token:
  case access::operator_metrics:
  case access::operator_page: r.limit = rate_class::none; break;
  case access::open:
    r.limit = r.path.rfind("/api/v1/auth/", 0) == 0         ? rate_class::login
              : r.path.find("webhook") != std::string::npos ? rate_class::webhook
                                                            : rate_class::address;
    break;
  }
  node* n = root_.get();
  for_each_segment(r.path, [&](std::string_view seg) {
    if (seg.size() >= 2 && seg.front() == '{' && seg.back() == '}') {
      auto name = std::string(seg.substr(1, seg.size() - 2));
      if (!n->param) {
        n->param = std::make_unique<node>();
        n->param_name = name;
      } else if (n->param_name != name) {
        throw std::logic_error("conflicting parameter names at " + r.path);
      }
      n = n->param.get();
    } else {
      auto& next = n->literals[std::string(seg)];
      if (!next) next = std::make_unique<node>();
      n = next.get();
    }
    return true;
  });
  auto m = static_cast<std::size_t>(r.method);
  if (n->by_method[m]) throw std::logic_error("duplicate route " + r.path);
  r.index = routes_.size();
  routes_.push_back(std::make_unique<route>(std::move(r)));
  n->by_method[m] = routes_.back().get();
}

router::match_result router::match(verb method, std::string_view path) const {
  match_result out;
  const node* n = root_.get();
  for_each_segment(path, [&](std::string_view seg) {
    // Literals win over parameters: `/users/me` before `/users/{id}`.
    if (auto it = n->literals.find(seg); it != n->literals.end()) {
      n = it->second.get();
      return true;
    }
    if (n->param && !seg.empty()) {
      out.params.emplace_back(n->param_name, std::string(seg));
      n = n->param.get();
      return true;
    }
    n = nullptr;
    return false;
  });
  if (!n) {
    out.params.clear();
    return out;
  }
  if (auto r = n->by_method[static_cast<std::size_t>(method)]) {
    out.result = outcome::found;
    out.matched = r;
    return out;
  }
  for (std::size_t m = 0; m < verb_count; ++m) {
    if (!n->by_method[m]) continue;
    if (!out.allow.empty()) out.allow += ", ";
    out.allow += to_string(static_cast<verb>(m));
  }
  out.params.clear();
  out.result = out.allow.empty() ? outcome::not_found : outcome::method_not_allowed;
  return out;
}

} // namespace crm::http
