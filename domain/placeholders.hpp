// Texts with {{placeholders}} that carecrm fills in before a message leaves: an appointment's
// reminder (docs/appointments.md) and a canned response (docs/channels.md "Canned responses").
// One grammar for both: `{{name}}`, spaces inside the braces allowed.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// `text` with each {{name}} replaced by value(name); a name without a value becomes empty. An
// unclosed "{{" stays as it is.
std::string
fill_placeholders(std::string_view text,
                  const std::function<std::optional<std::string>(std::string_view)>& value);

// The names `text` uses, in order (trimmed, repeats kept).
std::vector<std::string> placeholder_names(std::string_view text);

} // namespace crm::domain
