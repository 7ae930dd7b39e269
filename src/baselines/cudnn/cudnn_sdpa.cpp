// cuDNN fused SDPA through the cudnn-frontend graph API. cuDNN decides what it supports: every
// graph is validated and built in bind(), and a refusal becomes Unsupported with cuDNN's reason.
// Built graphs are cached per process by graph_key(); tensors are bound by uid at launch, so one
// graph serves every bind of the same problem.
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "baselines/cudnn/cudnn_sdpa.hpp"
#include "core/error.hpp"
#include "gpu/cuda.hpp"
#include "tensors/tensors.hpp"

// With NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING the frontend resolves every cuDNN entry point through
// this handle, which the embedding program owns.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace ffpa::cudnn {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kBias,
  kSeed,
  kOffset,
  kDO,
  kDQ,
  kDK,
  kDV,
  kDBias
};

// One way of expressing a problem to cuDNN: the direct one first, the equivalent ones only when
// cuDNN refuses it (or, for the key bias backward, gets it wrong).
struct Formulation {
  bool dbias = false;     // also compute dBias (backward with a bias)
  bool band = false;      // bottom-right causal as a top-left band with right bound Nkv - Nq
  bool expand_q = false;  // key bias declared [1,1,Nq,Nkv] with a zero row stride
};

// Seed and offset are device int64 scalars; each gets its own 16-byte slot.
constexpr size_t kRngSlot = 16;

std::vector<int64_t> contiguous(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) s[i - 1] = s[i] * dims[i];
  return s;
}

constexpr const char* kKeyDbias = "cuDNN 9.19's [1,1,1,Nkv] dBias fails the reference check";

std::string describe(const Formulation& a, bool want_dbias, const std::string& dbias_reason) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : "; ") + x; };
  if (a.band) add("bottom-right causal as a top-left band (right bound Nkv-Nq)");
  if (a.expand_q) add("key bias declared [1,1,Nq,Nkv] with row stride 0");
  if (want_dbias && !a.dbias) add("no dBias: " + dbias_reason);
  return s;
}

struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;  // null when cuDNN refused every attempt
  int64_t workspace = 0;
  bool dbias = false;
  std::string note;     // how the problem was expressed, when not directly
  std::string refused;  // cuDNN's reasons, when graph is null
};

std::string message(fe::error_t e) {
  return e.get_message();
}

// Validates and builds a graph; returns cuDNN's reason on refusal, empty on success.
std::string finish(fe::graph::Graph& g, cudnnHandle_t h, int64_t& workspace) {
  fe::error_t e = g.validate();
  if (e.is_good()) e = g.build_operation_graph(h);
  if (e.is_good()) e = g.create_execution_plans({fe::HeurMode_t::A});
  if (e.is_good()) e = g.check_support();
  if (e.is_good()) e = g.build_plans();
  if (e.is_good()) e = g.get_workspace_size(workspace);
  if (e.is_good()) return {};
  // cuDNN appends the failing engine configs as JSON on further lines; the first line is the
  // reason.
  std::string m = message(e);
  m = m.substr(0, m.find('\n'));
  while (!m.empty() && (m.back() == '_' || m.back() == ' ')) m.pop_back();
  return m.empty() ? "cuDNN refused the graph (no reason given)" : m;
}

// Builds one attempt; returns cuDNN's reason on refusal, empty on success.
std::string try_build(const Problem& p, Pass pass, const Formulation& a, cudnnHandle_t h,
                      Entry& out) {
  const Shape& s = p.shape;
  const auto io = p.dtype == Dtype::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, Uid uid, const std::vector<int64_t>& dims,
                    std::vector<int64_t> strides = {}) {
    if (strides.empty()) strides = contiguous(dims);
    return g->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(
            strides));
  };
  const std::vector<int64_t> qd{s.B, s.Hq, s.Nq, s.D}, kvd{s.B, s.Hkv, s.Nkv, s.D},
      sd{s.B, s.Hq, s.Nq, 1};
  const TensorPtr q = tensor("Q", kQ, qd), k = tensor("K", kK, kvd), v = tensor("V", kV, kvd);

  TensorPtr bias, seed, offset;
  const auto bd = bias_dims(p);
  const std::vector<int64_t> bias_native(bd.begin(), bd.end());
  const auto bias_type = p.bias_dtype == BiasDtype::fp32 ? fe::DataType_t::FLOAT : io;
  if (p.bias != BiasKind::none) {
    std::vector<int64_t> dims = bias_native, strides = contiguous(bias_native);
    if (a.expand_q) {
      dims[2] = s.Nq;
      strides[2] = 0;
    }
    bias = tensor("Bias", kBias, dims, strides);
    bias->set_data_type(bias_type);
  }
  if (p.dropout > 0) {
    seed = tensor("Seed", kSeed, {1, 1, 1, 1});
    offset = tensor("Offset", kOffset, {1, 1, 1, 1});
    seed->set_data_type(fe::DataType_t::INT64);
    offset->set_data_type(fe::DataType_t::INT64);
  }
  auto diagonal = [&](auto& o) {
    // Square bottom-right is the same mask as top-left, the alignment cuDNN's backward skips
    // fully masked tiles for (with BOTTOM_RIGHT it ran no faster than without a mask).
    if (p.causal == Causal::top_left || (p.causal == Causal::bottom_right && s.Nq == s.Nkv)) {
      o.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    } else if (p.causal == Causal::bottom_right && a.band) {
      o.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(static_cast<int>(s.Nkv - s.Nq));
    } else if (p.causal == Causal::bottom_right) {
      o.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT)
          .set_diagonal_band_right_bound(0);
    }
  };
  const float scale = static_cast<float>(p.scale());
  const float drop = static_cast<float>(p.dropout);

  if (pass == Pass::fwd) {
    fe::graph::SDPA_attributes o;
    o.set_name("sdpa").set_generate_stats(true).set_attn_scale(scale);
    diagonal(o);
    if (bias) o.set_bias(bias);
    if (seed) o.set_dropout(drop, seed, offset);
    auto [out, stats] = g->sdpa(q, k, v, o);
    out->set_output(true).set_uid(kO).set_dim(qd).set_stride(contiguous(qd));
    // Natural-log LSE [B,Hq,Nq] in fp32, our convention (stats_use_log2 stays off).
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(sd)
        .set_stride(contiguous(sd));
  } else {
    const TensorPtr o_in = tensor("O", kO, qd), dout = tensor("dO", kDO, qd),
                    stats = tensor("Stats", kStats, sd);
    stats->set_data_type(fe::DataType_t::FLOAT);
    fe::graph::SDPA_backward_attributes o;
    o.set_name("sdpa_backward").set_attn_scale(scale);
    diagonal(o);
    if (bias) {
      o.set_bias(bias);
      if (a.dbias) {
        const TensorPtr db = tensor("dBias", kDBias, bias_native);
        db->set_data_type(bias_type).set_output(true);
        o.set_dbias(db);
      }
    }
    if (seed) o.set_dropout(drop, seed, offset);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o_in, dout, stats, o);
    dq->set_output(true).set_uid(kDQ).set_dim(qd).set_stride(contiguous(qd));
    dk->set_output(true).set_uid(kDK).set_dim(kvd).set_stride(contiguous(kvd));
    dv->set_output(true).set_uid(kDV).set_dim(kvd).set_stride(contiguous(kvd));
  }

  int64_t ws = 0;
  if (std::string why = finish(*g, h, ws); !why.empty()) return why;
  out.graph = std::move(g);
  out.workspace = ws;
  out.dbias = a.dbias && bias;
  return {};
}

// The direct formulation first, then the equivalent ones.
std::vector<Formulation> attempts(const Problem& p, Pass pass, bool want_dbias) {
  std::vector<bool> dbias{want_dbias}, band{false}, expand{false};
  if (want_dbias) dbias.push_back(false);
  if (pass == Pass::bwd && p.bias == BiasKind::key) dbias = {false};
  if (p.causal == Causal::bottom_right && p.shape.Nkv > p.shape.Nq) band.push_back(true);
  if (p.bias == BiasKind::key && p.shape.Nq > 1) {
    // cuDNN 9.19's backward builds with a [1,1,1,Nkv] bias but computes wrong gradients from it
    // (gpu_cudnn caught it); the [1,1,Nq,Nkv] declaration with row stride 0 (what PyTorch
    // passes) is read correctly. Its dBias reduced to [1,1,1,Nkv] is wrong in both forms, and a
    // second graph summing a [1,1,Nq,Nkv] dBias finds no engine: the key bias gets no dBias.
    expand = pass == Pass::bwd ? std::vector<bool>{true} : std::vector<bool>{false, true};
  }
  std::vector<Formulation> out;
  for (bool d : dbias)
    for (bool b : band)
      for (bool x : expand) out.push_back({d, b, x});
  return out;
}

Entry build(const Problem& p, Pass pass, bool want_dbias, cudnnHandle_t h) {
  Entry e;
  std::vector<std::string> reasons;
  std::string dbias_reason = pass == Pass::bwd && p.bias == BiasKind::key ? kKeyDbias : "";
  for (const Formulation& a : attempts(p, pass, want_dbias)) {
    const std::string why = try_build(p, pass, a, h, e);
    if (why.empty()) {
      e.note = describe(a, want_dbias, dbias_reason);
      return e;
    }
    if (a.dbias && dbias_reason.empty()) dbias_reason = "cuDNN: " + why;
    bool seen = false;
    for (const auto& r : reasons) seen = seen || r == why;
    if (!seen) reasons.push_back(why);
  }
  for (const auto& r : reasons) e.refused += (e.refused.empty() ? "" : " | ") + r;
  return e;
}

// One handle per process, created on first use and never destroyed: tearing it down at exit
// would race the CUDA context's own teardown.
cudnnHandle_t handle() {
  static std::mutex m;
  static cudnnHandle_t h = nullptr;
  std::lock_guard<std::mutex> lock(m);
  if (!h) {
    if (!load_error().empty()) throw RunError("cuDNN: " + load_error());
    const cudnnStatus_t st = fe::detail::create_handle(&h);
    if (st != CUDNN_STATUS_SUCCESS) {
      h = nullptr;
      throw RunError(std::string("cudnnCreate failed: ") + fe::detail::get_error_string(st));
    }
  }
  return h;
}

std::mutex g_cache_mutex;
std::map<std::string, std::shared_ptr<const Entry>> g_cache;

std::shared_ptr<const Entry> cached(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto it = g_cache.find(key);
  return it == g_cache.end() ? nullptr : it->second;
}

std::shared_ptr<const Entry> get_or_build(const Problem& p, Pass pass, bool want_dbias) {
  const std::string key = graph_key(p, pass, want_dbias);
  if (auto e = cached(key)) return e;
  const cudnnHandle_t h = handle();
  std::shared_ptr<const Entry> e;
  try {
    e = std::make_shared<const Entry>(build(p, pass, want_dbias, h));
  } catch (const std::exception& ex) {
    throw RunError(std::string("cuDNN graph build failed: ") + ex.what());
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_cache.emplace(key, e).first->second;
}

class CudnnOp : public Op {
 public:
  CudnnOp(std::shared_ptr<const Entry> e, Pass pass, AttnTensors& t) : e_(std::move(e)) {
    ws_ = gpu::DeviceBuffer(static_cast<size_t>(e_->workspace));
    const Problem& p = t.problem;
    auto bind = [&](Uid uid, const gpu::DeviceBuffer& b) { pack_[uid] = b.get(); };
    bind(kQ, t.q);
    bind(kK, t.k);
    bind(kV, t.v);
    bind(kO, t.o);
    bind(kStats, t.lse);
    if (p.bias != BiasKind::none) bind(kBias, t.bias);
    if (p.dropout > 0) {
      rng_ = gpu::DeviceBuffer(2 * kRngSlot);
      const int64_t vals[2] = {static_cast<int64_t>(t.dropout_seed),
                               static_cast<int64_t>(t.dropout_offset)};
      FFPA_CUDA(cudaMemcpy(rng_.get(), &vals[0], sizeof(int64_t), cudaMemcpyHostToDevice));
      FFPA_CUDA(cudaMemcpy(rng_.as<char>() + kRngSlot, &vals[1], sizeof(int64_t),
                           cudaMemcpyHostToDevice));
      pack_[kSeed] = rng_.get();
      pack_[kOffset] = rng_.as<char>() + kRngSlot;
    }
    if (pass == Pass::fwd) {
      includes_ = "O + LSE";
    } else {
      bind(kDO, t.dout);
      bind(kDQ, t.dq);
      bind(kDK, t.dk);
      bind(kDV, t.dv);
      if (e_->dbias) bind(kDBias, t.dbias);
      includes_ = e_->dbias ? "dQ, dK, dV, dBias" : "dQ, dK, dV";
    }
    if (!e_->note.empty()) includes_ += " (" + e_->note + ")";
    // cuDNN draws dropout from its own Philox stream, not the one of ANCHORS.md.
    if (p.dropout > 0) {
      const char* why = "cuDNN's dropout RNG stream differs from the reference's";
      for (const char* out : pass == Pass::fwd
                                 ? std::vector<const char*>{"o"}
                                 : std::vector<const char*>{"dq", "dk", "dv", "dbias"})
        unchecked_.push_back({out, why, true});
    }
    if (pass == Pass::bwd && p.bias != BiasKind::none && !e_->dbias)
      unchecked_.push_back({"dbias", e_->note, false});
    for (const auto& [uid, ptr] : pack_)
      if (!ptr) throw RunError("cuDNN: tensor uid " + std::to_string(uid) + " is not allocated");
  }

  void launch(cudaStream_t s) override {
    const cudnnHandle_t h = handle();
    const cudnnStatus_t st = fe::detail::set_stream(h, s);
    if (st != CUDNN_STATUS_SUCCESS)
      throw RunError(std::string("cudnnSetStream failed: ") + fe::detail::get_error_string(st));
    fe::error_t e = e_->graph->execute(h, pack_, ws_.get());
    if (e.is_bad()) throw RunError("cuDNN execute failed: " + message(e));
  }
  int64_t extra_bytes() const override { return static_cast<int64_t>(ws_.bytes() + rng_.bytes()); }
  std::string includes() const override { return includes_; }
  std::vector<Unchecked> unchecked() const override { return unchecked_; }

 private:
  std::shared_ptr<const Entry> e_;
  gpu::DeviceBuffer ws_, rng_;
  std::unordered_map<int64_t, void*> pack_;
  std::string includes_;
  std::vector<Unchecked> unchecked_;
};

bool wants_dbias(const Problem& p, Pass pass) {
  return pass == Pass::bwd && p.bias != BiasKind::none;
}

class CudnnBaseline : public Baseline {
 public:
  BaselineId id() const override { return BaselineId::cudnn; }

  // Only what is certain without asking cuDNN; everything else is cuDNN's call in bind().
  Support supports(const Problem&, Pass) const override {
    if (!load_error().empty()) return Support::no("cuDNN not loadable: " + load_error());
    if (!gpu::available()) return Support::no("no GPU");
    return Support::yes();
  }

  int64_t extra_bytes(const Problem& p, Pass pass) const override {
    const int64_t rng = p.dropout > 0 ? static_cast<int64_t>(2 * kRngSlot) : 0;
    if (auto e = cached(graph_key(p, pass, wants_dbias(p, pass))))
      return e->graph ? e->workspace + rng : 0;
    // Before the graph is built: the backward's fp32 dQ accumulator and row statistics.
    if (pass == Pass::fwd) return rng;
    const Shape& s = p.shape;
    return s.B * s.Hq * s.Nq * (s.D + 2) * 4 + rng;
  }

  std::unique_ptr<Op> bind(const Problem& p, Pass pass, AttnTensors& t) override {
    const bool want_dbias = wants_dbias(p, pass) && static_cast<bool>(t.dbias);
    auto e = get_or_build(p, pass, want_dbias);
    if (!e->graph) throw Unsupported("cuDNN: " + e->refused);
    return std::make_unique<CudnnOp>(std::move(e), pass, t);
  }

  std::string version() const override {
    if (!load_error().empty()) return {};
    return version_string(fe::detail::get_backend_version());
  }
};

}  // namespace

std::string load_error() {
  // Loaded once; the frontend caches resolved symbols, so the handle must be set before any call.
  static const std::string err = [] {
    // The frontend dlopens a cudart of its own choosing (12 or 13, whichever it finds first):
    // point it at the runtime this program links, so streams and devices are one runtime's.
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
      setenv("CUDNN_FRONTEND_CUDART_LIB_NAME",
             ("libcudart.so." + std::to_string(rt / 1000)).c_str(), 0);
    dlerror();
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      return std::string("dlopen libcudnn.so.9: ") + (why ? why : "unknown error");
    }
    cudnn_frontend::cudnn_dlhandle = h;
    return std::string();
  }();
  return err;
}

std::string version_string(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
         std::to_string(v % 100);
}

std::array<int64_t, 4> bias_dims(const Problem& p) {
  const Shape& s = p.shape;
  switch (p.bias) {
    case BiasKind::none:
      return {0, 0, 0, 0};
    case BiasKind::key:
      return {1, 1, 1, s.Nkv};
    case BiasKind::query_key:
      return {1, 1, s.Nq, s.Nkv};
    case BiasKind::full:
      return {s.B, s.Hq, s.Nq, s.Nkv};
  }
  return {0, 0, 0, 0};
}

std::string graph_key(const Problem& p, Pass pass, bool with_dbias) {
  const Shape& s = p.shape;
  std::ostringstream k;
  k << to_string(pass) << ' ' << to_string(p.dtype) << " B" << s.B << " Hq" << s.Hq << " Hkv"
    << s.Hkv << " Nq" << s.Nq << " Nkv" << s.Nkv << " D" << s.D << ' ' << to_string(p.causal);
  if (p.bias != BiasKind::none)
    k << " bias=" << to_string(p.bias) << '/' << to_string(p.bias_dtype)
      << (with_dbias && pass == Pass::bwd ? "+dbias" : "");
  if (p.dropout > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<float>(p.dropout));
    k << " dropout=" << buf;
  }
  return k.str();
}

}  // namespace ffpa::cudnn

namespace ffpa {
std::unique_ptr<Baseline> make_cudnn_baseline() {
  return std::make_unique<cudnn::CudnnBaseline>();
}
}  // namespace ffpa
