// The tuning cache: the best configuration found per (machine, build, variant, problem class), so
// that a run without --tune uses what an earlier --tune found. A JSON file, by default
// $XDG_CACHE_HOME/ffpa-bench/tuning.json, else ~/.cache/ffpa-bench/tuning.json (cache_root()).
//
// Problems are grouped into classes: Nq, Nkv and B*Hq are rounded up to powers of two (Nq = 1,
// decode, is its own class); everything else that changes which configuration wins is exact.
// Entries of another kernel-source hash or driver stay in the file (switching back finds them) but
// are never returned: find() misses and stale() says why.
//
// A file whose content cannot be used (not JSON, unknown schema, malformed entries) is not fatal:
// load() starts empty with a warning, and save() first moves the file aside to <path>.bad, so
// nothing the user had is lost and a bad cache never stops a benchmark. A path that cannot be read
// at all (a directory, no permission) is an InputError: it would not take the results either.
// The runner saves after every search, so a sweep that is stopped keeps what it found.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "gpu/cuda.hpp"

namespace ffpa {

// Schema 2 renamed the entry key's "mask" to "bias"; files of schema 1
// (kTuningCacheSchemaMaskKey) are still read, and written back as schema 2.
constexpr int kTuningCacheSchema = 2;
constexpr int kTuningCacheSchemaMaskKey = kTuningCacheSchema - 1;

struct CacheKey {
  // Machine and build: entries differing here are stale, not merely another problem.
  std::string gpu;    // device name
  std::string arch;   // "sm_90"
  int driver = 0;     // cudaDriverGetVersion
  std::string build;  // kernel_source_hash(), 16 hex digits
  // Problem class.
  std::string variant;
  Pass pass = Pass::fwd;
  Dtype dtype = Dtype::bf16;
  int64_t D = 0;
  Causal causal = Causal::none;
  BiasKind bias = BiasKind::none;
  bool dropout = false;
  int64_t gqa = 1;  // Hq / Hkv
  int64_t bh = 1;   // bucket of B * Hq: the number of independent heads fills the GPU or not
  int64_t nq = 1;   // bucket of Nq
  int64_t nkv = 1;  // bucket of Nkv

  bool operator==(const CacheKey&) const;
  bool operator!=(const CacheKey& o) const { return !(*this == o); }
  // Same problem class on the same GPU, whatever the build and driver.
  bool same_problem(const CacheKey&) const;
};

// 1 -> 1, otherwise the next power of two >= n.
int64_t size_bucket(int64_t n);
CacheKey make_cache_key(const gpu::DeviceInfo&, const std::string& variant, const Problem&, Pass);
std::string to_string(const CacheKey&);  // one line, for logs

struct CacheEntry {
  Knobs knobs;
  double ms = 0;          // median of the winning configuration when it was stored
  std::string stored_at;  // ISO 8601 UTC
};

class TuningCache {
 public:
  using Entry = CacheEntry;

  // Never throws for the file's content (see above); a missing file is an empty cache. Throws
  // InputError(path, "/", reason) when the path cannot be read.
  static TuningCache load(const std::string& path);

  std::optional<Entry> find(const CacheKey&) const;
  // The configurations stored for this problem class and build on any GPU of key's arch and any
  // driver: what --compile-only, which has no real device to match, compiles for a later run.
  std::vector<Knobs> for_arch(const CacheKey&) const;
  // Entries for the same problem class and GPU that find() ignores, one line each with the reason
  // (another kernel-source hash or driver): for -v diagnostics.
  std::vector<std::string> stale(const CacheKey&) const;
  // Adds or replaces the entry of this key.
  void store(const CacheKey&, const Knobs&, double ms);
  // Does nothing unless store() was called since the last save. Under the cache's FileLock
  // (<path>.lock; the directory is created if missing): merges the entries another process saved
  // since load() (ours win for equal keys), writes a temporary file, fsyncs and renames it over the
  // cache. Returns a note when the file on disk was unusable and was moved aside to <path>.bad,
  // else empty. Throws RunError on a file-system failure.
  std::string save();
  // Merges the cache files `inputs` into the file `target` under target's FileLock, keeping the
  // fastest entry (lowest ms) per key; returns how many entries were added or replaced. An input,
  // or an existing target, that cannot be read or is not usable whole is an InputError naming it,
  // and nothing is written.
  static int merge_files(const std::string& target, const std::vector<std::string>& inputs);

  const std::string& path() const { return path_; }
  // Why the file was (partly) ignored at load; empty when it was fine or absent.
  const std::string& warning() const { return warning_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Item {
    CacheKey key;
    Entry entry;
  };
  std::string path_;
  std::string warning_;
  bool move_aside_ = false;  // the file on disk was unusable: keep it as <path>.bad on save
  bool dirty_ = false;       // nothing stored: save() leaves the disk alone
  std::vector<Item> entries_;
};

// cache_root()/tuning.json.
std::string default_tuning_cache_path();

}  // namespace ffpa
