// json_fields.h: checked access to the members of a parsed JSON document (nlohmann/json) for
// files strata reads: every value is addressed by its JSON path ("nodes[2].gpus[0].memory_GiB"),
// a wrong type or range, an unknown key or a duplicate key becomes a Status naming that path, and
// syntax errors name line:column. Nothing throws.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <initializer_list>
#include <string>
#include <string_view>

#include "transport/status.h"

namespace strata::topology::jsonf {

using Json = nlohmann::json;

/// Parses `text`; syntax errors read "<name>:<line>:<column>: syntax error: ...", duplicate keys
/// "<name>: <path>: duplicate key \"k\"".
Status parse(const std::string& text, const std::string& name, Json* out);

/// "path.key" ("key" at the top level) and "path[i]".
std::string member(const std::string& path, const std::string& key);
std::string element(const std::string& path, size_t i);

/// A value for messages: `"80G" (a string)`, `[...] (an array)`.
std::string describe(const Json& v);

/// "<path>: <message>" ("top level: ..." for the root).
Status errorAt(const std::string& path, const std::string& message);

Status expectObject(const Json& v, const std::string& path);
Status expectArray(const Json& v, const std::string& path);
/// Fails on the first key of `obj` not in `allowed`, listing the allowed ones.
Status checkKeys(const Json& obj, const std::string& path, std::initializer_list<std::string_view> allowed);
/// Fails when `key` is absent.
Status require(const Json& obj, const std::string& path, const std::string& key);

// Optional members: when `key` is absent, `*out` keeps its value. Present values must have the
// type and lie in the range.
Status optInt(const Json& obj, const std::string& path, const std::string& key, int* out, int min = INT_MIN,
              int max = INT_MAX);
Status optNumber(const Json& obj, const std::string& path, const std::string& key, double* out, double min,
                 bool minExclusive = false);
Status optString(const Json& obj, const std::string& path, const std::string& key, std::string* out);
Status optBool(const Json& obj, const std::string& path, const std::string& key, bool* out);

}  // namespace strata::topology::jsonf
