// json_fields.cc: checked JSON member access with JSON paths, and parsing with line:column
// syntax errors and duplicate-key detection (see json_fields.h).
#include "topology/json_fields.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in format.h before fmt 11)

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace strata::topology::jsonf {

namespace {

const char* typeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "a number";
    default: return "a binary value";
  }
}

// 1-based line and column of byte offset `pos` (nlohmann reports the count of bytes read).
std::pair<size_t, size_t> lineColumn(const std::string& text, size_t pos) {
  pos = std::min(pos, text.size());
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i + 1 < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  }
  return {line, pos > lineStart ? pos - lineStart : 1};
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line L,
// column C: " prefix (we say where ourselves).
std::string syntaxDetail(const std::string& what) {
  size_t at = what.find("parse error");
  if (at == std::string::npos) return what;
  size_t colon = what.find(": ", at);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// Tracks the JSON path during parsing to report duplicate keys, which nlohmann would silently
// collapse to the last one.
class DuplicateKeys {
 public:
  bool operator()(int /*depth*/, Json::parse_event_t ev, Json& parsed) {
    using E = Json::parse_event_t;
    switch (ev) {
      case E::object_start: frames_.push_back({true, {}, "", 0}); break;
      case E::array_start: frames_.push_back({false, {}, "", 0}); break;
      case E::key: {
        Frame& f = frames_.back();
        f.key = parsed.is_string() ? parsed.get<std::string>() : std::string();
        if (!f.keys.insert(f.key).second && error_.empty())
          error_ = fmt::format("{}: duplicate key \"{}\"", parentPath(), f.key);
        break;
      }
      case E::object_end:
      case E::array_end:
        frames_.pop_back();
        elementDone();
        break;
      case E::value: elementDone(); break;
    }
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };
  void elementDone() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  // The path of the innermost open object (the frames above it say how it was reached).
  std::string parentPath() const {
    std::string p;
    for (size_t i = 0; i + 1 < frames_.size(); ++i)
      p = frames_[i].object ? member(p, frames_[i].key) : element(p, frames_[i].index);
    return p.empty() ? "top level" : p;
  }
  std::vector<Frame> frames_;
  std::string error_;
};

Status typeError(const std::string& path, const char* expected, const Json& v) {
  return errorAt(path, fmt::format("expected {}, got {}", expected, describe(v)));
}

}  // namespace

Status parse(const std::string& text, const std::string& name, Json* out) {
  DuplicateKeys dup;
  try {
    *out = Json::parse(text, std::ref(dup), /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    auto [line, col] = lineColumn(text, e.byte);
    return invalidArgument("{}:{}:{}: syntax error: {}", name, line, col, syntaxDetail(e.what()));
  } catch (const std::exception& e) {
    return invalidArgument("{}: {}", name, e.what());
  }
  if (!dup.error().empty()) return invalidArgument("{}: {}", name, dup.error());
  return OkStatus();
}

std::string member(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string element(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

std::string describe(const Json& v) {
  std::string text;
  if (v.is_object()) {
    text = "{...}";
  } else if (v.is_array()) {
    text = "[...]";
  } else {
    text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
  }
  return fmt::format("{} ({})", text, typeName(v));
}

Status errorAt(const std::string& path, const std::string& message) {
  return invalidArgument("{}: {}", path.empty() ? "top level" : path, message);
}

Status expectObject(const Json& v, const std::string& path) {
  return v.is_object() ? OkStatus() : typeError(path, "an object", v);
}

Status expectArray(const Json& v, const std::string& path) {
  return v.is_array() ? OkStatus() : typeError(path, "an array", v);
}

Status checkKeys(const Json& obj, const std::string& path, std::initializer_list<std::string_view> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    return errorAt(path, fmt::format("unknown key \"{}\" (expected one of: {})", it.key(), fmt::join(allowed, ", ")));
  }
  return OkStatus();
}

Status require(const Json& obj, const std::string& path, const std::string& key) {
  return obj.contains(key) ? OkStatus() : errorAt(path, fmt::format("missing \"{}\"", key));
}

Status optInt(const Json& obj, const std::string& path, const std::string& key, int* out, int min, int max) {
  auto it = obj.find(key);
  if (it == obj.end()) return OkStatus();
  const std::string p = member(path, key);
  if (!it->is_number_integer()) return typeError(p, "an integer", *it);
  bool inRange;
  if (it->is_number_unsigned()) {  // nlohmann stores every non-negative integer as unsigned
    const uint64_t u = it->get<uint64_t>();
    inRange = u <= static_cast<uint64_t>(std::max(max, 0)) && (min <= 0 || u >= static_cast<uint64_t>(min));
  } else {
    const int64_t s = it->get<int64_t>();
    inRange = s >= min && s <= max;
  }
  if (!inRange) {
    std::string range = max == INT_MAX ? fmt::format(">= {}", min) : fmt::format("{} .. {}", min, max);
    return errorAt(p, fmt::format("{} is out of range (expected {})", it->dump(), range));
  }
  *out = static_cast<int>(it->get<int64_t>());
  return OkStatus();
}

Status optNumber(const Json& obj, const std::string& path, const std::string& key, double* out, double min,
                 bool minExclusive) {
  auto it = obj.find(key);
  if (it == obj.end()) return OkStatus();
  const std::string p = member(path, key);
  if (!it->is_number()) return typeError(p, "a number", *it);
  const double v = it->get<double>();
  if (minExclusive ? !(v > min) : !(v >= min))
    return errorAt(p, fmt::format("{} is out of range (expected {} {})", it->dump(), minExclusive ? ">" : ">=", min));
  *out = v;
  return OkStatus();
}

Status optString(const Json& obj, const std::string& path, const std::string& key, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return OkStatus();
  if (!it->is_string()) return typeError(member(path, key), "a string", *it);
  *out = it->get<std::string>();
  return OkStatus();
}

Status optBool(const Json& obj, const std::string& path, const std::string& key, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return OkStatus();
  if (!it->is_boolean()) return typeError(member(path, key), "true or false", *it);
  *out = it->get<bool>();
  return OkStatus();
}

}  // namespace strata::topology::jsonf
