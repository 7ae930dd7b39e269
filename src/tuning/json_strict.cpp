#include "tuning/json_strict.hpp"

#include <set>
#include <vector>

#include "core/error.hpp"

namespace ffpa {

std::string json_pointer(const std::string& parent, const std::string& key) {
  std::string out = parent + "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string json_pointer(const std::string& parent, size_t index) {
  return parent + "/" + std::to_string(index);
}

nlohmann::ordered_json parse_json_strict(const std::string& text, const std::string& where) {
  using json = nlohmann::ordered_json;
  // The parser callback sees keys, not where they are: track the open containers.
  struct Open {
    bool array;
    std::string pointer;
    size_t index = 0;            // arrays: index of the next element
    std::string key;             // objects: the last key seen
    std::set<std::string> keys;  // objects: keys seen so far
  };
  std::vector<Open> open;
  auto child = [&]() -> std::string {
    if (open.empty()) return "";
    const Open& o = open.back();
    return o.array ? json_pointer(o.pointer, o.index) : json_pointer(o.pointer, o.key);
  };
  auto element_done = [&]() {
    if (!open.empty() && open.back().array) ++open.back().index;
  };
  auto cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        open.push_back({ev == json::parse_event_t::array_start, child(), 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Open& o = open.back();
        o.key = parsed.get<std::string>();
        if (!o.keys.insert(o.key).second)
          throw InputError(where, json_pointer(o.pointer, o.key), "duplicate key");
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open.pop_back();
        element_done();
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string reason = e.what();
    if (const auto p = reason.find("] "); p != std::string::npos) reason = reason.substr(p + 2);
    throw InputError(where, "/", "not valid JSON: " + reason);
  }
}

}  // namespace ffpa
