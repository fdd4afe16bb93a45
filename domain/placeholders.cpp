#include "domain/placeholders.hpp"

#include "domain/validation.hpp"

namespace crm::domain {
namespace {

// Calls f(name) for each {{name}}, and text(piece) for the text between them.
template <class Text, class Name>
void scan(std::string_view text, Text on_text, Name on_name) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto open = text.find("{{", pos);
    if (open == std::string_view::npos) break;
    auto close = text.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    on_text(text.substr(pos, open - pos));
    on_name(trim(text.substr(open + 2, close - open - 2)));
    pos = close + 2;
  }
  on_text(text.substr(pos));
}

} // namespace

std::string
fill_placeholders(std::string_view text,
                  const std::function<std::optional<std::string>(std::string_view)>& value) {
  std::string out;
  out.reserve(text.size() + 32);
  scan(
      text, [&](std::string_view piece) { out.append(piece); },
      [&](std::string_view name) {
        if (auto v = value(name)) out += *v;
      });
  return out;
}

std::vector<std::string> placeholder_names(std::string_view text) {
  std::vector<std::string> out;
  scan(
      text, [](std::string_view) {}, [&](std::string_view name) { out.emplace_back(name); });
  return out;
}

} // namespace crm::domain
