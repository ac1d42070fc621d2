// log.h: leveled logging to stderr ("strata <host>:<pid> rank R LEVEL message"), level from the
// config registry (STRATA_LOG_LEVEL = error|warn|info|debug|trace).
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

namespace strata::log {

enum class Level : int { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };

Level currentLevel();
void write(Level level, const std::string& message);

template <typename... Args>
void at(Level level, fmt::format_string<Args...> f, Args&&... args) {
  if (static_cast<int>(level) <= static_cast<int>(currentLevel()))
    write(level, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) { at(Level::Error, f, std::forward<Args>(args)...); }
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) { at(Level::Warn, f, std::forward<Args>(args)...); }
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) { at(Level::Info, f, std::forward<Args>(args)...); }
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) { at(Level::Debug, f, std::forward<Args>(args)...); }

}  // namespace strata::log
