// Counters dump: components register a source; TETHER_STATS=exit prints every source's
// lines through the log at exit. Reading counters costs nothing until a dump is asked for.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tether::stats {

// `describe` returns the component's counters as text, one "name value" per line.
void register_source(std::string_view component, std::function<std::string()> describe);
// Every registered source's text, each line prefixed by its component.
[[nodiscard]] std::string dump_all();

}  // namespace tether::stats
