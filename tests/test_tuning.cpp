// Tuning grids (format, validation, enumeration), the search's finals and the tuning cache (keys,
// invalidation, files).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>

#include <nlohmann/json.hpp>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/file_lock.hpp"
#include "gpu/nvrtc.hpp"
#include "support.hpp"
#include "tuning/cache.hpp"
#include "tuning/finals.hpp"
#include "tuning/grid.hpp"

using namespace ffpa;
namespace fs = std::filesystem;

namespace {

const char* kGrid = R"({
  "variant": "v1",
  "comment": "test grid",
  "knobs": {"Br": [64, 128], "Bc": [32, 64, 128], "stages": [1, 2]},
  "fast": {"Br": [64], "Bc": [64, 128]}
})";

// The JSON pointer of the InputError that parsing `text` throws ("" when it does not throw).
std::string error_path(const std::string& text) {
  try {
    parse_grid(text, "g.json");
  } catch (const InputError& e) {
    CHECK(e.where() == "g.json");
    return e.path();
  }
  return "";
}

Problem problem(int64_t nq, int64_t nkv) {
  Problem p;
  p.shape = {1, 32, 8, nq, nkv, 512};
  p.dtype = Dtype::bf16;
  p.causal = Causal::bottom_right;
  p.bias = BiasKind::key;
  return p;
}

gpu::DeviceInfo device() {
  gpu::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.sm_major = 9;
  d.sm_minor = 0;
  d.driver_version = 13000;
  return d;
}

CacheKey key_of(int64_t nq) {
  return make_cache_key(device(), "v1", problem(nq, 8192), Pass::fwd);
}

// One save of one entry, as a run saves after a search.
void save_one(const std::string& path, int64_t nq, int64_t br, double ms) {
  TuningCache c = TuningCache::load(path);
  c.store(key_of(nq), {{"Br", br}}, ms);
  c.save();
}

}  // namespace

TEST_CASE("grid: parse keeps the file's knob order", "[tuning]") {
  const Grid g = parse_grid(kGrid, "g.json");
  CHECK(g.variant == "v1");
  CHECK(g.comment == "test grid");
  CHECK(g.knob_names() == std::vector<std::string>{"Br", "Bc", "stages"});
  CHECK(g.knobs[1].values == std::vector<int64_t>{32, 64, 128});
  CHECK(g.knobs[1].fast == std::vector<int64_t>{64, 128});
  CHECK(g.knobs[2].fast == std::vector<int64_t>{1, 2});  // not narrowed by "fast"
}

TEST_CASE("grid: enumeration per mode", "[tuning]") {
  const Grid g = parse_grid(kGrid, "g.json");
  CHECK(grid_points(g, TuneMode::none).empty());
  CHECK(grid_size(g, TuneMode::none) == 0);

  const auto max = grid_points(g, TuneMode::max);
  REQUIRE(max.size() == 12);
  CHECK(grid_size(g, TuneMode::max) == 12);
  CHECK(to_string(max.front()) == "Br=64,Bc=32,stages=1");
  CHECK(to_string(max[1]) == "Br=64,Bc=32,stages=2");  // last knob fastest
  CHECK(to_string(max.back()) == "Br=128,Bc=128,stages=2");
  for (size_t i = 0; i < max.size(); ++i)
    for (size_t j = i + 1; j < max.size(); ++j) CHECK(max[i] != max[j]);

  const auto fast = grid_points(g, TuneMode::fast);
  REQUIRE(fast.size() == 4);
  CHECK(grid_size(g, TuneMode::fast) == 4);
  CHECK(to_string(fast[0]) == "Br=64,Bc=64,stages=1");
  CHECK(to_string(fast[3]) == "Br=64,Bc=128,stages=2");
}

TEST_CASE("grid: a single-valued grid has one point", "[tuning]") {
  const Grid g = parse_grid(R"({"variant":"v","knobs":{"Br":[64]},"fast":{}})", "g.json");
  CHECK(grid_points(g, TuneMode::max) == std::vector<Knobs>{{{"Br", 64}}});
  CHECK(grid_points(g, TuneMode::fast) == std::vector<Knobs>{{{"Br", 64}}});
}

TEST_CASE("grid: validation errors name the JSON path", "[tuning]") {
  CHECK(error_path(kGrid).empty());
  CHECK(error_path("{") == "line 1, column 2");
  CHECK(error_path("[1]") == "/");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]},"fast":{},"max":{}})") == "/max");
  CHECK(error_path(R"({"knobs":{"Br":[64]},"fast":{}})") == "/variant");
  CHECK(error_path(R"({"variant":7,"knobs":{"Br":[64]},"fast":{}})") == "/variant");
  CHECK(error_path(R"({"variant":"","knobs":{"Br":[64]},"fast":{}})") == "/variant");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]},"fast":{},"comment":1})") == "/comment");
  CHECK(error_path(R"({"variant":"v","fast":{}})") == "/knobs");
  CHECK(error_path(R"({"variant":"v","knobs":[64],"fast":{}})") == "/knobs");
  CHECK(error_path(R"({"variant":"v","knobs":{},"fast":{}})") == "/knobs");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":64},"fast":{}})") == "/knobs/Br");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[]},"fast":{}})") == "/knobs/Br");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64,"x"]},"fast":{}})") == "/knobs/Br/1");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64,1.5]},"fast":{}})") == "/knobs/Br/1");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64,true]},"fast":{}})") == "/knobs/Br/1");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64,32,64]},"fast":{}})") == "/knobs/Br/2");
  CHECK(error_path(R"({"variant":"v","knobs":{"B r":[64]},"fast":{}})") == "/knobs/B r");
  CHECK(error_path(R"({"variant":"v","knobs":{"a/b":[64]},"fast":{}})") == "/knobs/a~1b");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]},"knobs":{"Bc":[1]},"fast":{}})") ==
        "/knobs");  // duplicate key
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64],"Br":[32]},"fast":{}})") == "/knobs/Br");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]}})") == "/fast");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]},"fast":[]})") == "/fast");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]},"fast":{"Bc":[64]}})") == "/fast/Bc");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64]},"fast":{"Br":[]}})") == "/fast/Br");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64,128]},"fast":{"Br":[128,32]}})") ==
        "/fast/Br/1");
  CHECK(error_path(R"({"variant":"v","knobs":{"Br":[64,128]},"fast":{"Br":[64,64]}})") ==
        "/fast/Br/1");
}

TEST_CASE("grid: oversized grids are refused", "[tuning]") {
  std::string knobs;
  for (int k = 0; k < 6; ++k)  // 10^6 points
    knobs += std::string(k ? "," : "") + "\"k" + std::to_string(k) + "\":[0,1,2,3,4,5,6,7,8,9]";
  CHECK(error_path(R"({"variant":"v","knobs":{)" + knobs + R"(},"fast":{}})") == "/knobs");
}

TEST_CASE("grid: files, variant name and knob drift", "[tuning]") {
  test::TempDir dir;
  test::write_file(dir.path() / "v1.json", kGrid);
  test::write_file(dir.path() / "v2.json", kGrid);  // says "v1"

  const Grid g = load_variant_grid("v1", dir.path().string());
  CHECK(g.file == (dir.path() / "v1.json").string());
  CHECK(load_grid((dir.path() / "v1.json").string()).variant == "v1");

  try {
    load_variant_grid("v2", dir.path().string());
    FAIL("no error for a grid naming another variant");
  } catch (const InputError& e) {
    CHECK(e.path() == "/variant");
  }
  try {
    load_variant_grid("v3", dir.path().string());
    FAIL("no error for a missing grid");
  } catch (const InputError& e) {
    CHECK(e.where() == (dir.path() / "v3.json").string());
  }

  CHECK(check_grid_matches(g, {"Br", "Bc", "stages"}).ok());
  const Support renamed = check_grid_matches(g, {"Br", "Bc", "num_stages"});
  CHECK_FALSE(renamed.ok());
  CHECK(renamed.reason.find("num_stages") != std::string::npos);
  CHECK_FALSE(check_grid_matches(g, {"Bc", "Br", "stages"}).ok());  // order matters
  CHECK_FALSE(check_grid_matches(g, {"Br", "Bc"}).ok());
}

TEST_CASE("grid: the repository's grid files are valid", "[tuning]") {
  const fs::path dir = test::source_dir() / "configs" / "grids";
  int n = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".json") continue;
    INFO(f.path().string());
    const Grid g = load_variant_grid(f.path().stem().string(), dir.string());
    CHECK(grid_size(g, TuneMode::fast) <= grid_size(g, TuneMode::max));
    ++n;
  }
  SUCCEED(std::to_string(n) + " grid files");
}

TEST_CASE("cache key: size buckets", "[tuning]") {
  CHECK(size_bucket(1) == 1);
  CHECK(size_bucket(2) == 2);
  CHECK(size_bucket(3) == 4);
  CHECK(size_bucket(1024) == 1024);
  CHECK(size_bucket(1025) == 2048);
  CHECK(size_bucket(8191) == 8192);
  CHECK(size_bucket(8192) == 8192);
}

TEST_CASE("cache key: fields and equality", "[tuning]") {
  const auto dev = device();
  const CacheKey k = make_cache_key(dev, "v1", problem(8192, 8192), Pass::fwd);
  CHECK(k.gpu == "NVIDIA H200");
  CHECK(k.arch == "sm_90");
  CHECK(k.driver == 13000);
  CHECK(k.build.size() == 16);
  CHECK(k.D == 512);
  CHECK(k.gqa == 4);
  CHECK(k.bh == 32);
  CHECK(k.causal == Causal::bottom_right);
  CHECK(k.bias == BiasKind::key);
  CHECK_FALSE(k.dropout);

  // Same bucket: equal.
  CHECK(make_cache_key(dev, "v1", problem(8191, 8191), Pass::fwd) == k);
  Problem seeded = problem(8192, 8192);
  seeded.seed = 42;
  seeded.bias_scale = 1.0;
  CHECK(make_cache_key(dev, "v1", seeded, Pass::fwd) == k);

  // Decode is its own class.
  const CacheKey decode = make_cache_key(dev, "v1", problem(1, 8192), Pass::fwd);
  CHECK(decode.nq == 1);
  CHECK(make_cache_key(dev, "v1", problem(2, 8192), Pass::fwd) != decode);

  // Each field separates.
  CHECK(make_cache_key(dev, "v1", problem(8192, 16384), Pass::fwd) != k);
  CHECK(make_cache_key(dev, "v1", problem(16384, 8192), Pass::fwd) != k);
  CHECK(make_cache_key(dev, "v2", problem(8192, 8192), Pass::fwd) != k);
  CHECK(make_cache_key(dev, "v1", problem(8192, 8192), Pass::bwd) != k);
  auto differs = [&](auto change) {
    Problem p = problem(8192, 8192);
    change(p);
    return make_cache_key(dev, "v1", p, Pass::fwd) != k;
  };
  CHECK(differs([](Problem& p) { p.dtype = Dtype::fp16; }));
  CHECK(differs([](Problem& p) { p.shape.D = 320; }));
  CHECK(differs([](Problem& p) { p.causal = Causal::none; }));
  CHECK(differs([](Problem& p) { p.bias = BiasKind::none; }));
  CHECK(differs([](Problem& p) { p.dropout = 0.1; }));
  CHECK(differs([](Problem& p) { p.shape.Hkv = 32; }));
  CHECK(differs([](Problem& p) { p.shape.B = 4; }));
  Problem p1 = problem(8192, 8192), p2 = p1;
  p1.dropout = 0.1;
  p2.dropout = 0.2;
  CHECK(make_cache_key(dev, "v1", p1, Pass::fwd) == make_cache_key(dev, "v1", p2, Pass::fwd));

  gpu::DeviceInfo other = dev;
  other.name = "NVIDIA H100 80GB HBM3";
  CHECK(make_cache_key(other, "v1", problem(8192, 8192), Pass::fwd) != k);
}

TEST_CASE("cache: store, find, replace", "[tuning]") {
  test::TempDir dir;
  TuningCache c = TuningCache::load((dir.path() / "t.json").string());
  CHECK(c.warning().empty());
  CHECK(c.size() == 0);
  const CacheKey k = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  CHECK_FALSE(c.find(k));
  c.store(k, {{"Br", 64}, {"Bc", 32}}, 2.5);
  REQUIRE(c.find(k));
  CHECK(c.find(k)->knobs == Knobs{{"Br", 64}, {"Bc", 32}});
  CHECK(c.find(k)->ms == 2.5);
  c.store(k, {{"Br", 128}, {"Bc", 32}}, 2.0);
  CHECK(c.size() == 1);
  CHECK(c.find(k)->knobs == Knobs{{"Br", 128}, {"Bc", 32}});
}

TEST_CASE("cache: entries of another build or driver are ignored and reported", "[tuning]") {
  TuningCache c;
  const CacheKey k = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  CacheKey old_build = k;
  old_build.build = "00000000deadbeef";
  CacheKey old_driver = k;
  old_driver.driver = 12040;
  c.store(old_build, {{"Br", 64}}, 1.0);
  CHECK_FALSE(c.find(k));
  auto why = c.stale(k);
  REQUIRE(why.size() == 1);
  CHECK(why[0].find("kernel sources changed") != std::string::npos);
  CHECK(why[0].find("Br=64") != std::string::npos);

  c.store(old_driver, {{"Br", 128}}, 1.0);
  CHECK_FALSE(c.find(k));
  why = c.stale(k);
  REQUIRE(why.size() == 2);
  CHECK(why[1].find("driver changed") != std::string::npos);

  // Another problem class is not stale, just different.
  CHECK(c.stale(make_cache_key(device(), "v2", problem(8192, 8192), Pass::fwd)).empty());

  c.store(k, {{"Br", 32}}, 1.0);
  CHECK(c.find(k)->knobs == Knobs{{"Br", 32}});
  CHECK(c.stale(k).size() == 2);
}

TEST_CASE("cache: save and load round trip", "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "sub" / "dir" / "t.json").string();
  const CacheKey a = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  const CacheKey b = make_cache_key(device(), "v1", problem(1, 4096), Pass::bwd);
  {
    TuningCache c = TuningCache::load(path);
    c.save();  // nothing stored: no file
    CHECK_FALSE(fs::exists(path));
    c.store(a, {{"stages", 2}, {"Br", 64}}, 3.25);  // knob order is not alphabetical
    c.store(b, {{"Bc", 128}}, 0.125);
    c.save();
  }
  CHECK(fs::exists(path));
  // No temporary left behind; the lock file stays (core/file_lock.hpp says why).
  for (const auto& f : fs::directory_iterator(fs::path(path).parent_path()))
    CHECK((f.path().filename() == "t.json" || f.path().filename() == "t.json.lock"));

  const TuningCache c = TuningCache::load(path);
  CHECK(c.warning().empty());
  CHECK(c.size() == 2);
  REQUIRE(c.find(a));
  CHECK(c.find(a)->knobs == Knobs{{"stages", 2}, {"Br", 64}});
  CHECK(c.find(a)->ms == 3.25);
  CHECK_FALSE(c.find(a)->stored_at.empty());
  REQUIRE(c.find(b));
  CHECK(c.find(b)->knobs == Knobs{{"Bc", 128}});
}

TEST_CASE("cache: entries of the previous schema (key field \"mask\") are read and upgraded",
          "[tuning]") {
  REQUIRE(kTuningCacheSchema == 2);
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const CacheKey a = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  const CacheKey b = make_cache_key(device(), "v1", problem(1, 4096), Pass::bwd);
  REQUIRE(a.bias == BiasKind::key);
  {
    TuningCache c = TuningCache::load(path);
    c.store(a, {{"Br", 64}}, 1.5);
    c.save();
  }
  nlohmann::json doc = nlohmann::json::parse(test::read_file(path));
  CHECK(doc["schema"] == kTuningCacheSchema);
  REQUIRE(doc["entries"][0]["bias"] == "key");
  CHECK_FALSE(doc["entries"][0].contains("mask"));
  // The same entry as schema 1 wrote it.
  doc["schema"] = kTuningCacheSchemaMaskKey;
  doc["entries"][0]["mask"] = doc["entries"][0]["bias"];
  doc["entries"][0].erase("bias");
  const std::string old_text = doc.dump(1);
  test::write_file(path, old_text);
  {
    TuningCache c = TuningCache::load(path);
    CHECK(c.warning().empty());
    CHECK(c.size() == 1);
    REQUIRE(c.find(a));
    CHECK(c.find(a)->knobs == Knobs{{"Br", 64}});
    CHECK(c.find(a)->ms == 1.5);
    c.store(b, {{"Bc", 128}}, 0.5);
    c.save();
  }
  CHECK_FALSE(fs::exists(path + ".bad"));  // nothing was set aside
  // Written back in the current schema, the old entry kept.
  const nlohmann::json now = nlohmann::json::parse(test::read_file(path));
  CHECK(now["schema"] == kTuningCacheSchema);
  REQUIRE(now["entries"].size() == 2);
  for (const auto& e : now["entries"]) {
    CHECK(e.contains("bias"));
    CHECK_FALSE(e.contains("mask"));
  }
  const TuningCache c = TuningCache::load(path);
  CHECK(c.warning().empty());
  CHECK(c.find(a));
  CHECK(c.find(b));

  // Each schema has its own spelling: "bias" under schema 1 is a malformed entry.
  doc = nlohmann::json::parse(old_text);
  doc["entries"][0]["bias"] = doc["entries"][0]["mask"];
  doc["entries"][0].erase("mask");
  test::write_file(path, doc.dump(1));
  const TuningCache mixed = TuningCache::load(path);
  CHECK(mixed.warning().find("/entries/0/mask: missing") != std::string::npos);
  CHECK_FALSE(mixed.find(a));
}

TEST_CASE("cache: save keeps entries another process stored", "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const CacheKey a = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  const CacheKey b = make_cache_key(device(), "v2", problem(8192, 8192), Pass::fwd);
  TuningCache first = TuningCache::load(path);
  TuningCache second = TuningCache::load(path);
  first.store(a, {{"Br", 64}}, 1.0);
  first.save();
  second.store(b, {{"Br", 128}}, 1.0);
  second.store(a, {{"Br", 32}}, 0.5);
  second.save();
  const TuningCache c = TuningCache::load(path);
  CHECK(c.size() == 2);
  CHECK(c.find(a)->knobs == Knobs{{"Br", 32}});  // the later save wins for the same key
  CHECK(c.find(b));
}

TEST_CASE("cache: a corrupt file warns, starts empty and is kept aside", "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const CacheKey a = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  for (const std::string text :
       {std::string("{\"schema\": 1, \"entries\": [ {"), std::string("[]"),
        std::string("{\"schema\": 99, \"entries\": []}"), std::string("{\"schema\": 1}"),
        std::string(""), std::string("{\"schema\": 1, \"entries\": [], \"entries\": []}")}) {
    INFO(text);
    test::write_file(path, text);
    fs::remove(path + ".bad");
    TuningCache c = TuningCache::load(path);
    CHECK_FALSE(c.warning().empty());
    CHECK(c.size() == 0);
    c.store(a, {{"Br", 64}}, 1.0);
    c.save();
    CHECK(test::read_file(path + ".bad") == text);
    const TuningCache again = TuningCache::load(path);
    CHECK(again.warning().empty());
    CHECK(again.find(a));
  }
}

TEST_CASE("cache: concurrent savers keep each other's entries", "[tuning]") {
  // Each child stores and saves one entry per round, as a tuning sweep saves after every search;
  // without the lock, a read-merge-rename of one would drop what another renamed meanwhile.
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  constexpr int kChildren = 4, kRounds = 8;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      TuningCache cache = TuningCache::load(path);
      for (int r = 0; r < kRounds; ++r) {
        cache.store(
            make_cache_key(device(), "v" + std::to_string(c), problem(1 << r, 8192), Pass::fwd),
            {{"Br", 64}}, 1.0);
        cache.save();
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  const TuningCache all = TuningCache::load(path);
  CHECK(all.warning().empty());
  CHECK(all.size() == size_t{kChildren} * kRounds);
}

TEST_CASE("cache: a path that cannot be read is an error, never replaced", "[tuning]") {
  test::TempDir dir;
  const fs::path sub = dir.path() / "dir.json";
  fs::create_directories(sub);
  const InputError e = test::thrown([&] { TuningCache::load(sub.string()); });
  CHECK(e.where() == sub.string());
  CHECK(e.reason() == "is a directory, not a file");
  CHECK(fs::is_directory(sub));
}

TEST_CASE("cache: a file that became corrupt after load is kept aside, not overwritten",
          "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const CacheKey a = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  TuningCache c = TuningCache::load(path);
  c.store(a, {{"Br", 64}}, 1.0);
  CHECK(c.save().empty());
  test::write_file(path, "{ garbage");
  c.store(a, {{"Br", 128}}, 0.5);
  const std::string note = c.save();
  CHECK(note.find("kept as " + path + ".bad") != std::string::npos);
  CHECK(test::read_file(path + ".bad") == "{ garbage");
  CHECK(TuningCache::load(path).find(a)->knobs == Knobs{{"Br", 128}});
}

TEST_CASE("cache: --compile-only's stand-in device finds what its arch stored", "[tuning]") {
  TuningCache c = TuningCache::load("unused.json");
  c.store(make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd), {{"Br", 64}}, 1.0);
  gpu::DeviceInfo stand_in = gpu::known_device("sm_90a");
  REQUIRE(stand_in.driver_version == 0);
  const CacheKey key = make_cache_key(stand_in, "v1", problem(8192, 8192), Pass::fwd);
  CHECK_FALSE(c.find(key));
  CHECK(c.for_arch(key) == std::vector<Knobs>{{{"Br", 64}}});
  CHECK(c.for_arch(make_cache_key(stand_in, "v1", problem(1, 8192), Pass::fwd)).empty());
  CHECK(c.for_arch(make_cache_key(gpu::known_device("sm_80"), "v1", problem(8192, 8192), Pass::fwd))
            .empty());
}

TEST_CASE("cache: malformed entries are skipped, the good ones kept", "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const CacheKey a = make_cache_key(device(), "v1", problem(8192, 8192), Pass::fwd);
  {
    TuningCache c = TuningCache::load(path);
    c.store(a, {{"Br", 64}}, 1.0);
    c.save();
  }
  std::string text = test::read_file(path);
  const auto at = text.rfind(']');
  text.insert(at, R"(, {"gpu": "x"}, 7)");
  test::write_file(path, text);
  const TuningCache c = TuningCache::load(path);
  CHECK(c.warning().find("2 malformed") != std::string::npos);
  CHECK(c.warning().find("/entries/1/arch") != std::string::npos);
  CHECK(c.find(a));
}

TEST_CASE("cache: both caches follow XDG_CACHE_HOME (relative from the cwd), then HOME",
          "[tuning]") {
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";

  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  CHECK(default_tuning_cache_path() == "/x/cache/ffpa-bench/tuning.json");
  CHECK(nvrtc::cache_dir() == "/x/cache/ffpa-bench/cubins");
  setenv("XDG_CACHE_HOME", ".cache", 1);
  setenv("HOME", "/home/u", 1);
  const fs::path cwd = fs::current_path();
  CHECK(default_tuning_cache_path() == (cwd / ".cache/ffpa-bench/tuning.json").string());
  CHECK(nvrtc::cache_dir() == (cwd / ".cache/ffpa-bench/cubins").string());
  unsetenv("XDG_CACHE_HOME");
  CHECK(default_tuning_cache_path() == "/home/u/.cache/ffpa-bench/tuning.json");
  CHECK(nvrtc::cache_dir() == "/home/u/.cache/ffpa-bench/cubins");

  if (old_xdg) setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (old_home)
    setenv("HOME", saved_home.c_str(), 1);
  else
    unsetenv("HOME");
}

TEST_CASE("cache: a save waits for the lock and keeps what its holder wrote", "[tuning]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.json").string();
  const std::string other = (dir.path() / "other.json").string();
  std::future<void> saved;
  {
    const FileLock held(path);
    saved = std::async(std::launch::async, [&] { save_one(path, 512, 64, 3.0); });
    CHECK(saved.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    CHECK_FALSE(fs::exists(path));
    // The holder writes an entry meanwhile; the waiting save must merge with it, not replace it.
    save_one(other, 1024, 16, 1.0);
    fs::copy_file(other, path);
  }
  saved.get();
  const TuningCache c = TuningCache::load(path);
  CHECK(c.find(key_of(512)));
  CHECK(c.find(key_of(1024)));
  CHECK(fs::exists(path + ".lock"));
}

TEST_CASE("cache: merging caches keeps the fastest entry per key", "[tuning][merge]") {
  test::TempDir dir;
  const std::string a = (dir.path() / "a.json").string(), b = (dir.path() / "b.json").string(),
                    out = (dir.path() / "out" / "t.json").string();
  save_one(a, 1024, 64, 2.0);
  save_one(a, 2048, 64, 3.0);
  save_one(b, 2048, 128, 2.5);  // faster than a's
  save_one(b, 4096, 32, 9.0);
  save_one(out, 1024, 16, 1.5);                       // the target's own, faster than a's
  CHECK(TuningCache::merge_files(out, {a, b}) == 3);  // 2048 from a, then b's faster; 4096
  const TuningCache m = TuningCache::load(out);
  CHECK(m.size() == 3);
  CHECK(m.find(key_of(1024))->ms == 1.5);
  CHECK(m.find(key_of(2048))->knobs == Knobs{{"Br", 128}});
  CHECK(m.find(key_of(4096))->ms == 9.0);
  CHECK(TuningCache::merge_files(out, {a, b}) == 0);
  CHECK(TuningCache::merge_files((dir.path() / "new" / "t.json").string(), {a}) == 2);

  const std::string before = test::read_file(out);
  const std::string bad = (dir.path() / "bad.json").string();
  const std::string missing = (dir.path() / "nope.json").string();
  test::write_file(bad, "{not json");
  for (const std::string& in : {bad, missing}) {
    const InputError e = test::thrown([&] { TuningCache::merge_files(out, {a, in}); });
    CHECK(e.where() == in);
    CHECK(test::read_file(out) == before);  // nothing written
  }
  // A target with a malformed entry is refused, not replaced: merging would drop it.
  test::write_file(bad, before.substr(0, before.find("\"ms\"")) + "\"ms\": -1}]}");
  CHECK(test::thrown([&] { TuningCache::merge_files(bad, {a}); }).where() == bad);
}

TEST_CASE("finals: who qualifies, in which order they run, who wins", "[tuning]") {
  // Untimed trials (0) never qualify; ties keep the first pass's order.
  CHECK(finalists({0.5, 0, 0.4, 0.6, 0.4}, 3) == std::vector<size_t>{2, 4, 0});
  CHECK(finalists({0.5, 0.7}, 3) == std::vector<size_t>{0, 1});
  CHECK(finalists({0, 0}, 3).empty());
  CHECK(final_order(3, 2) == std::vector<size_t>{0, 1, 2, 2, 1, 0});
  CHECK(final_order(2, 3) == std::vector<size_t>{0, 1, 1, 0, 0, 1});
  CHECK(final_order(1, 2).empty());
  CHECK(final_winner({{5.0, 5.2}, {5.1, 5.0}, {5.2, 5.3}}) == 1);
  CHECK(final_winner({{5.0, 5.0}, {5.0, 5.0}}) == 0);
  // One that failed in the finals has no times and loses.
  CHECK(final_winner({{}, {6.0, 6.1}}) == 1);
}

TEST_CASE("finals: a clock that drops during the search does not crown the first trial",
          "[tuning]") {
  // A GPU that comes to the row cool runs the first trial at a high clock, then holds at its power
  // limit (the H200 of 2026-12-07 ran a row's first trial 12-14 % faster than a second later).
  auto slowdown = [](int step) { return step == 0 ? 1.0 : 1.12; };
  const std::vector<double> kernel_ms = {5.0, 4.8, 4.9, 5.3};  // the second is the fastest
  std::vector<double> first;
  int step = 0;
  for (double ms : kernel_ms) first.push_back(ms * slowdown(step++));
  REQUIRE(std::min_element(first.begin(), first.end()) == first.begin());  // the trap
  const std::vector<size_t> entrants = finalists(first, kFinalists);
  REQUIRE(entrants.size() == 3);
  std::vector<std::vector<double>> rounds(entrants.size());
  for (size_t e : final_order(entrants.size(), kFinalRounds))
    rounds[e].push_back(kernel_ms[entrants[e]] * slowdown(step++));
  CHECK(entrants[final_winner(rounds)] == 1);
}
