// JSON reading shared by every input file (case matrices, tuning grids, tuning cache): syntax
// errors become InputError at "line L, column C", duplicate keys (which nlohmann would silently
// resolve, last one wins) an InputError at their JSON pointer.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ffpa {

// Parses keeping each object's key order. Throws InputError(where, pointer, reason).
nlohmann::ordered_json parse_json_strict(const std::string& text, const std::string& where);

// "/a/b" for parent "/a" and key "b", escaped per RFC 6901; the root is "".
std::string json_pointer(const std::string& parent, const std::string& key);
std::string json_pointer(const std::string& parent, size_t index);
// The root pointer "" reads badly in messages: "/" stands for it.
inline std::string shown(const std::string& pointer) {
  return pointer.empty() ? "/" : pointer;
}

}  // namespace ffpa
