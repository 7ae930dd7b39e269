#include "core/json_strict.hpp"

#include <algorithm>
#include <new>
#include <set>
#include <vector>

#include "core/error.hpp"

namespace ffpa {
namespace {

// "line L, column C" of a byte offset.
std::string line_column(const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace

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
    // e.byte is 1-based and points at the character that stopped the parser.
    throw InputError(where, line_column(text, e.byte == 0 ? 0 : e.byte - 1),
                     std::string("invalid JSON: ") + e.what());
  } catch (const std::bad_alloc&) {
    // Under a memory limit a file that was read may still not fit once parsed.
    throw InputError(where, "/", "does not fit in the memory available once parsed");
  } catch (const json::out_of_range& e) {
    // A number too large for a double ("1e400"): the message quotes it, so find it.
    const std::string msg = e.what();
    const size_t open_q = msg.find("parsing '"), close_q = msg.rfind('\'');
    size_t at = std::string::npos;
    if (open_q != std::string::npos && close_q > open_q + 9)
      at = text.find(msg.substr(open_q + 9, close_q - open_q - 9));
    throw InputError(where, at == std::string::npos ? "/" : line_column(text, at),
                     "invalid JSON: " + msg);
  }
}

}  // namespace ffpa
