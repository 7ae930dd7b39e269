#include "tuning/cache.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/build_info.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/file_lock.hpp"
#include "core/files.hpp"
#include "core/json_strict.hpp"
#include "core/paths.hpp"

namespace ffpa {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// A malformed entry; caught in load(), never escapes.
struct BadEntry : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

const json& field(const json& e, const char* name, const std::string& at) {
  if (!e.contains(name)) throw BadEntry(json_pointer(at, name) + ": missing");
  return e[name];
}
std::string get_string(const json& e, const char* name, const std::string& at) {
  const json& v = field(e, name, at);
  if (!v.is_string()) throw BadEntry(json_pointer(at, name) + ": expected a string");
  return v.get<std::string>();
}
int64_t get_int(const json& e, const char* name, const std::string& at) {
  const json& v = field(e, name, at);
  if (!v.is_number_integer()) throw BadEntry(json_pointer(at, name) + ": expected an integer");
  return v.get<int64_t>();
}
template <class E>
E get_enum(const json& e, const char* name, const std::string& at,
           std::optional<E> (*parse)(const std::string&)) {
  const auto v = parse(get_string(e, name, at));
  if (!v) throw BadEntry(json_pointer(at, name) + ": unknown value");
  return *v;
}

json key_json(const CacheKey& k) {
  return json{{"gpu", k.gpu},
              {"arch", k.arch},
              {"driver", k.driver},
              {"build", k.build},
              {"variant", k.variant},
              {"pass", to_string(k.pass)},
              {"dtype", to_string(k.dtype)},
              {"D", k.D},
              {"causal", to_string(k.causal)},
              {"bias", to_string(k.bias)},
              {"dropout", k.dropout},
              {"gqa", k.gqa},
              {"bh", k.bh},
              {"nq", k.nq},
              {"nkv", k.nkv}};
}

// `schema` is the file's: kTuningCacheSchemaMaskKey named the key's bias field "mask".
CacheKey key_from(const json& e, const std::string& at, int schema) {
  CacheKey k;
  k.gpu = get_string(e, "gpu", at);
  k.arch = get_string(e, "arch", at);
  k.driver = static_cast<int>(get_int(e, "driver", at));
  k.build = get_string(e, "build", at);
  k.variant = get_string(e, "variant", at);
  k.pass = get_enum<Pass>(e, "pass", at, parse_pass);
  k.dtype = get_enum<Dtype>(e, "dtype", at, parse_dtype);
  k.D = get_int(e, "D", at);
  k.causal = get_enum<Causal>(e, "causal", at, parse_causal);
  k.bias = get_enum<BiasKind>(e, schema == kTuningCacheSchemaMaskKey ? "mask" : "bias", at,
                              parse_bias_kind);
  const json& d = field(e, "dropout", at);
  if (!d.is_boolean()) throw BadEntry(json_pointer(at, "dropout") + ": expected true or false");
  k.dropout = d.get<bool>();
  k.gqa = get_int(e, "gqa", at);
  k.bh = get_int(e, "bh", at);
  k.nq = get_int(e, "nq", at);
  k.nkv = get_int(e, "nkv", at);
  return k;
}

CacheEntry entry_from(const json& e, const std::string& at) {
  CacheEntry out;
  const json& knobs = field(e, "knobs", at);
  if (!knobs.is_object() || knobs.empty())
    throw BadEntry(json_pointer(at, "knobs") + ": expected an object knob -> integer");
  for (const auto& [name, v] : knobs.items()) {
    if (!v.is_number_integer())
      throw BadEntry(json_pointer(json_pointer(at, "knobs"), name) + ": expected an integer");
    out.knobs.emplace_back(name, v.get<int64_t>());
  }
  const json& ms = field(e, "ms", at);
  if (!ms.is_number() || !(ms.get<double>() > 0))
    throw BadEntry(json_pointer(at, "ms") + ": expected a positive number");
  out.ms = ms.get<double>();
  if (e.contains("stored_at") && e["stored_at"].is_string())
    out.stored_at = e["stored_at"].get<std::string>();
  return out;
}

// The usable entries of a cache file's text. Throws BadEntry for a file that is unusable as a
// whole; bad entries are skipped, counted in `bad` and the first one described in `first_bad`.
template <class Item>
std::vector<Item> parse_entries(const std::string& text, int& bad, std::string& first_bad) {
  json root;
  try {
    root = parse_json_strict(text, "tuning cache");
  } catch (const InputError& e) {
    // The reader every input file goes through: a duplicate key is an error here too.
    throw BadEntry("not valid JSON (" + shown(e.path()) + ": " + e.reason() + ")");
  }
  if (!root.is_object()) throw BadEntry("not a JSON object");
  // The previous schema is read too (users' caches survive); save() writes the current one.
  if (!root.contains("schema") ||
      (root["schema"] != kTuningCacheSchema && root["schema"] != kTuningCacheSchemaMaskKey))
    throw BadEntry("schema is not " + std::to_string(kTuningCacheSchema) + " (or " +
                   std::to_string(kTuningCacheSchemaMaskKey) + ")");
  const int schema = root["schema"].get<int>();
  if (!root.contains("entries") || !root["entries"].is_array())
    throw BadEntry("/entries: expected a list");
  std::vector<Item> out;
  const json& entries = root["entries"];
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string at = json_pointer("/entries", i);
    try {
      if (!entries[i].is_object()) throw BadEntry(at + ": expected an object");
      out.push_back({key_from(entries[i], at, schema), entry_from(entries[i], at)});
    } catch (const BadEntry& e) {
      if (bad++ == 0) first_bad = e.what();
    }
  }
  return out;
}

// Replaces the cache file with these entries: temporary file, fsync, rename.
template <class Item>
void write_entries(const fs::path& path, const std::vector<Item>& items) {
  json entries = json::array();
  for (const Item& it : items) {
    json e = key_json(it.key);
    json knobs = json::object();
    for (const auto& [name, v] : it.entry.knobs) knobs[name] = v;
    e["knobs"] = std::move(knobs);
    e["ms"] = it.entry.ms;
    e["stored_at"] = it.entry.stored_at;
    entries.push_back(std::move(e));
  }
  const json root{{"schema", kTuningCacheSchema}, {"entries", std::move(entries)}};
  write_file_atomic(path, root.dump(1) + "\n");
}

// Every entry of a cache file that merge reads or writes into: unlike load(), which starts empty
// and keeps a bad file aside, merge refuses a file it cannot use whole, so that nothing is lost.
template <class Item>
std::vector<Item> all_entries(const std::string& path) {
  int bad = 0;
  std::string first_bad;
  std::vector<Item> out;
  try {
    out = parse_entries<Item>(read_input_file(path, kMaxConfigBytes), bad, first_bad);
  } catch (const BadEntry& e) {
    throw InputError(path, "/", std::string("unusable tuning cache: ") + e.what());
  }
  if (bad > 0)
    throw InputError(path, "/",
                     std::to_string(bad) + " malformed tuning-cache entries (" + first_bad + ")");
  return out;
}

}  // namespace

bool CacheKey::same_problem(const CacheKey& o) const {
  return gpu == o.gpu && arch == o.arch && variant == o.variant && pass == o.pass &&
         dtype == o.dtype && D == o.D && causal == o.causal && bias == o.bias &&
         dropout == o.dropout && gqa == o.gqa && bh == o.bh && nq == o.nq && nkv == o.nkv;
}

bool CacheKey::operator==(const CacheKey& o) const {
  return same_problem(o) && driver == o.driver && build == o.build;
}

int64_t size_bucket(int64_t n) {
  int64_t b = 1;
  while (b < n) b <<= 1;
  return b;
}

CacheKey make_cache_key(const gpu::DeviceInfo& dev, const std::string& variant, const Problem& p,
                        Pass pass) {
  CacheKey k;
  k.gpu = dev.name;
  k.arch = dev.arch();
  k.driver = dev.driver_version;
  k.build = hex16(kernel_source_hash());
  k.variant = variant;
  k.pass = pass;
  k.dtype = p.dtype;
  k.D = p.shape.D;
  k.causal = p.causal;
  k.bias = p.bias;
  k.dropout = p.dropout > 0;
  k.gqa = p.shape.Hkv > 0 ? p.shape.group() : 1;
  k.bh = size_bucket(p.shape.B * p.shape.Hq);
  k.nq = size_bucket(p.shape.Nq);
  k.nkv = size_bucket(p.shape.Nkv);
  return k;
}

std::string to_string(const CacheKey& k) {
  return k.variant + " " + to_string(k.pass) + " " + to_string(k.dtype) +
         " D=" + std::to_string(k.D) + " causal=" + to_string(k.causal) +
         " bias=" + to_string(k.bias) + " dropout=" + (k.dropout ? "on" : "off") +
         " gqa=" + std::to_string(k.gqa) + " B*Hq<=" + std::to_string(k.bh) +
         " Nq<=" + std::to_string(k.nq) + " Nkv<=" + std::to_string(k.nkv) + " on " + k.gpu + " (" +
         k.arch + ", driver " + std::to_string(k.driver) + ", build " + k.build + ")";
}

TuningCache TuningCache::load(const std::string& path) {
  TuningCache c;
  c.path_ = path;
  std::error_code ec;
  if (!fs::exists(path, ec) && !ec) return c;
  // A directory or a file we may not read is not a corrupt cache: InputError, never replaced.
  const std::string text = read_input_file(path, kMaxConfigBytes);
  int bad = 0;
  std::string first_bad;
  try {
    c.entries_ = parse_entries<Item>(text, bad, first_bad);
  } catch (const BadEntry& e) {
    c.warning_ = path + ": unusable tuning cache (" + e.what() + "); starting empty; a save " +
                 "moves the file to " + path + ".bad first";
    c.move_aside_ = true;
    return c;
  }
  if (bad > 0) {
    c.warning_ = path + ": " + std::to_string(bad) + " malformed tuning-cache entries ignored (" +
                 first_bad + "); a save moves the file to " + path + ".bad first";
    c.move_aside_ = true;
  }
  return c;
}

std::optional<CacheEntry> TuningCache::find(const CacheKey& key) const {
  for (const Item& it : entries_)
    if (it.key == key) return it.entry;
  return std::nullopt;
}

std::vector<Knobs> TuningCache::for_arch(const CacheKey& key) const {
  std::vector<Knobs> out;
  for (const Item& it : entries_) {
    CacheKey k = it.key;
    k.gpu = key.gpu;
    k.driver = key.driver;
    if (k == key && std::find(out.begin(), out.end(), it.entry.knobs) == out.end())
      out.push_back(it.entry.knobs);
  }
  return out;
}

std::vector<std::string> TuningCache::stale(const CacheKey& key) const {
  std::vector<std::string> out;
  for (const Item& it : entries_) {
    if (!it.key.same_problem(key) || it.key == key) continue;
    std::string why;
    if (it.key.build != key.build)
      why =
          "kernel sources changed (entry build " + it.key.build + ", this build " + key.build + ")";
    if (it.key.driver != key.driver)
      why += std::string(why.empty() ? "" : "; ") + "driver changed (entry " +
             std::to_string(it.key.driver) + ", now " + std::to_string(key.driver) + ")";
    out.push_back("ignored cached [" + to_string(it.entry.knobs) + "]: " + why);
  }
  return out;
}

void TuningCache::store(const CacheKey& key, const Knobs& knobs, double ms) {
  dirty_ = true;
  for (Item& it : entries_)
    if (it.key == key) {
      it.entry = {knobs, ms, utc_now()};
      return;
    }
  entries_.push_back({key, {knobs, ms, utc_now()}});
}

std::string TuningCache::save() {
  if (!dirty_) return {};
  const fs::path p(path_);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RunError("cannot create " + dir.string() + ": " + ec.message());

  const FileLock lock(path_);
  std::string note;
  std::vector<Item> all = entries_;
  auto move_aside = [&](const std::string& why) {
    fs::rename(p, path_ + ".bad", ec);
    if (ec) throw RunError("cannot move " + path_ + " aside to " + path_ + ".bad: " + ec.message());
    note = path_ + ": " + why + "; kept as " + path_ + ".bad";
  };
  if (fs::exists(p, ec)) {
    if (move_aside_) {
      move_aside("unusable when loaded");
    } else {
      // Keep what other processes stored since load(); ours win for equal keys.
      int bad = 0;
      std::string first_bad;
      std::vector<Item> theirs;
      try {
        theirs = parse_entries<Item>(read_input_file(p, kMaxConfigBytes), bad, first_bad);
      } catch (const InputError& e) {
        throw RunError(std::string("cannot merge the tuning cache: ") + e.what());
      } catch (const BadEntry& e) {
        move_aside(std::string("became unusable since it was loaded (") + e.what() + ")");
      }
      if (bad > 0)
        move_aside(std::to_string(bad) + " malformed entries appeared since it was loaded (" +
                   first_bad + ")");
      for (Item& other : theirs) {
        bool ours = false;
        for (const Item& it : entries_) ours = ours || it.key == other.key;
        if (!ours) all.push_back(std::move(other));
      }
    }
  }

  write_entries(p, all);
  entries_ = std::move(all);
  move_aside_ = dirty_ = false;
  return note;
}

int TuningCache::merge_files(const std::string& target, const std::vector<std::string>& inputs) {
  std::vector<Item> theirs;
  for (const std::string& f : inputs)
    for (Item& it : all_entries<Item>(f)) theirs.push_back(std::move(it));
  const fs::path p(target);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RunError("cannot create " + dir.string() + ": " + ec.message());

  // The same lock as save(): a run saving into the target meanwhile keeps its entries.
  const FileLock lock(target);
  std::vector<Item> all;
  if (fs::exists(p, ec)) all = all_entries<Item>(target);
  int changed = 0;
  for (Item& it : theirs) {
    const auto same =
        std::find_if(all.begin(), all.end(), [&](const Item& a) { return a.key == it.key; });
    if (same == all.end()) {
      all.push_back(std::move(it));
      ++changed;
    } else if (it.entry.ms < same->entry.ms) {
      same->entry = std::move(it.entry);
      ++changed;
    }
  }
  if (changed > 0) write_entries(p, all);
  return changed;
}

std::string default_tuning_cache_path() {
  const std::string root = cache_root();
  return root.empty() ? "tuning.json" : (fs::path(root) / "tuning.json").string();
}

}  // namespace ffpa
