// Variant "ffpa-bwd-sm80": the portable split-D backward (mma.sync), compiled by NVRTC at bind().
#include "variants/ffpa_bwd_sm80.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/error.hpp"
#include "ffpa_bwd_sm80_layout.h"
#include "ffpa_fwd_decode_layout.h"
#include "tensors/tensors.hpp"
#include "variants/ffpa_fwd_sm80.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::bwd {
using namespace ffpa_family;
namespace {
int blocks_per_warp(const Config& c, int D) {
  return ((D + 15) / 16 + c.warps - 1) / c.warps;
}

// Registers ptxas needs besides the accumulators (addresses, row table reads, P/dS temporaries,
// the phase-2 fragments), read off compiled configurations (D=512 default: 144 + ~110 = 253).
constexpr int kRegisterOverhead = 64;

// Which launches start early (gpu::launch): none (before sm_90), the convert kernel (it waits for
// the main kernel), or the main kernel too (it waits for the preprocess: main_waits).
enum class Chain { none, convert, all };

class BwdOp : public Op {
 public:
  // tail (not null): the last wave's key tiles split where plan_tail gains, in a plane of the
  // grid past the batches.
  BwdOp(nvrtc::Library lib, const char* main_kernel, const FfpaBwdParams& p, dim3 grid, int threads,
        int smem, int dbias, size_t dbias_bytes, int sm_count, Chain chain, gpu::DeviceBuffer delta,
        gpu::DeviceBuffer dq_accum, gpu::DeviceBuffer dbias_accum, const SplitTail* tail,
        int cluster, const StreamKeys* stream, const MainMaps* maps)
      : lib_(std::move(lib)),
        p_(p),
        grid_(grid),
        threads_(threads),
        smem_(smem),
        dbias_(dbias),
        dbias_bytes_(dbias_bytes),
        sm_count_(sm_count),
        chain_(chain),
        delta_(std::move(delta)),
        dq_accum_(std::move(dq_accum)),
        dbias_accum_(std::move(dbias_accum)) {
    pre_ = lib_.kernel("ffpa_bwd_pre_kernel");
    main_ = lib_.kernel(main_kernel);
    convert_ = lib_.kernel("ffpa_bwd_convert_kernel");
    FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(main_),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, smem_));
    if (maps) maps_ = *maps, has_maps_ = true;
    if (stream) {
      stream_ = *stream;
      grid_ = launch_grid(
          ffpa_layout::decode_blocks(
              stream->keys, stream->kb,
              gpu::resident(reinterpret_cast<const void*>(main_), threads_, smem_, 1, sm_count_)),
          1, 1);
      if (stream->writes) {
        writes_ = lib_.kernel(stream->writes);
        FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(writes_),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       stream->writes_smem));
        pds_ = gpu::DeviceBuffer(static_cast<size_t>(stream->pds_bytes));
        p_.pds = pds_.as<unsigned>();
        // One wave: the resident blocks dealt over the heads, at least one a head.
        const int64_t heads = static_cast<int64_t>(p.fwd.B) * p.fwd.Hkv;
        const int64_t resident =
            gpu::resident(reinterpret_cast<const void*>(writes_), stream->writes_threads,
                          stream->writes_smem, 1, sm_count_);
        writes_grid_ = launch_grid(std::max<int64_t>(1, resident / heads), heads, 1);
      }
    }
    if (tail) {
      // Units: clusters of key tiles x kv heads x batches; the split ones are the last head's,
      // their pieces in one plane of the grid.
      const int64_t ktiles = grid_.x / cluster, plane = ktiles * grid_.y;
      const int64_t all = plane * grid_.z;
      const Tail t = plan_tail(all,
                               gpu::resident(reinterpret_cast<const void*>(main_), threads_, smem_,
                                             static_cast<unsigned>(cluster), sm_count_),
                               tail->steps);
      const int64_t split = all - t.from;
      // The plane must fit the grid's z (65535) and hold the pieces.
      if (split > 0 && split <= ktiles && split * t.pieces <= plane && grid_.z < 65535) {
        tail_units_ = split;
        p_.split_from = ktiles - split;
        p_.num_splits = t.pieces;
        // [tiles, pieces, 2, keys, D]: each piece's dK and dV
        dkv_partial_ = gpu::DeviceBuffer(static_cast<size_t>(split) * t.pieces * 2 * tail->keys *
                                         p_.fwd.D * sizeof(float));
        p_.dkv_partial = dkv_partial_.as<float>();
        merge_ = lib_.kernel(tail->merge);
        merge_keys_ = tail->keys;
        grid_.z += 1;
      }
    }
  }

  void launch(cudaStream_t s) override {
    void* args[] = {&p_};
    void* maps_args[] = {&p_, &maps_.a, &maps_.b};
    void* writes_args[] = {&p_, &stream_.tdk, &stream_.tdv};
    if (dbias_ == 3) FFPA_CUDA(cudaMemsetAsync(p_.dbias, 0, dbias_bytes_, s));
    if (dbias_accum_) FFPA_CUDA(cudaMemsetAsync(dbias_accum_.get(), 0, dbias_accum_.bytes(), s));
    const long long rows = static_cast<long long>(p_.fwd.B) * p_.fwd.Hq * p_.fwd.Nq;
    gpu::launch(reinterpret_cast<const void*>(pre_), dim3(static_cast<unsigned>((rows + 7) / 8)),
                dim3(256), 0, s, args);
    gpu::launch(reinterpret_cast<const void*>(main_), grid_, dim3(threads_),
                static_cast<size_t>(smem_), s, has_maps_ ? maps_args : args, chain_ == Chain::all);
    // The convert waits for the second pass or the merge, which wait for the main kernel.
    if (writes_)
      gpu::launch(reinterpret_cast<const void*>(writes_), writes_grid_,
                  dim3(static_cast<unsigned>(stream_.writes_threads)),
                  static_cast<size_t>(stream_.writes_smem), s, writes_args, chain_ != Chain::none);
    if (merge_)
      gpu::launch(reinterpret_cast<const void*>(merge_),
                  dim3(static_cast<unsigned>(tail_units_), static_cast<unsigned>(merge_keys_)),
                  dim3(128), 0, s, args, chain_ != Chain::none);
    const long long pairs = rows * (p_.fwd.D / 2);
    const long long blocks = std::min<long long>((pairs + 255) / 256, 8LL * sm_count_);
    gpu::launch(reinterpret_cast<const void*>(convert_),
                dim3(static_cast<unsigned>(std::max(1LL, blocks))), dim3(256), 0, s, args,
                chain_ != Chain::none);
  }
  int64_t extra_bytes() const override {
    return static_cast<int64_t>(delta_.bytes() + dq_accum_.bytes() + dbias_accum_.bytes() +
                                dkv_partial_.bytes() + pds_.bytes());
  }
  std::string includes() const override {
    std::string s = "preprocess (delta, dQ accumulator zeroed) + ";
    s += writes_ ? "P/dS kernel (dQ fp32 atomics" : "dK/dV kernel (dQ fp32 atomics";
    if (stream_.keys)
      s += "; TMA ring, " + std::to_string(grid_.x) + " blocks share the heads' keys";
    if (writes_) s += ") + dK/dV kernel (from P and dS; TMA stores";
    s += ") + dQ convert";
    if (dbias_ == 1 || dbias_ == 2) s += " + dBias zeroing and convert";
    if (dbias_ == 3) s += " + dBias memset";
    if (merge_)
      s += " + dK/dV merge (the last " + std::to_string(tail_units_) + " key tiles in " +
           std::to_string(p_.num_splits) + " query ranges each)";
    if (chain_ != Chain::none)
      s += chain_ == Chain::all ? " (all chained by programmatic dependent launch)"
                                : " (the convert chained by programmatic dependent launch)";
    return s;
  }

 private:
  nvrtc::Library lib_;
  FfpaBwdParams p_;
  dim3 grid_;
  int threads_, smem_, dbias_;
  size_t dbias_bytes_;
  int sm_count_;
  Chain chain_;
  gpu::DeviceBuffer delta_, dq_accum_, dbias_accum_, dkv_partial_, pds_;
  dim3 writes_grid_;
  int64_t tail_units_ = 0;
  int merge_keys_ = 0;
  StreamKeys stream_;
  MainMaps maps_;
  bool has_maps_ = false;
  cudaKernel_t pre_ = nullptr, main_ = nullptr, convert_ = nullptr, merge_ = nullptr,
               writes_ = nullptr;
};

}  // namespace

constexpr Knob<Config> kKnobs[] = {{"Br", &Config::Br},
                                   {"Bc", &Config::Bc},
                                   {"warps", &Config::warps},
                                   {"Wr", &Config::Wr},
                                   {"Kd", &Config::Kd}};

const std::vector<std::string>& knob_names() {
  static const std::vector<std::string> names = ffpa_family::knob_names(kKnobs);
  return names;
}

Config Config::from_knobs(const Knobs& k) {
  return read_knobs(kKnobs, k);
}

Knobs Config::knobs() const {
  return knobs_of(kKnobs, *this);
}

Features Features::of(const Problem& pr) {
  Features f;
  f.D = static_cast<int>(pr.shape.D);
  f.bf16 = pr.dtype == Dtype::bf16;
  f.causal = causal_code(pr);
  f.bias = bias_code(pr);
  f.dbias = pr.bias == BiasKind::key         ? 1
            : pr.bias == BiasKind::query_key ? 2
            : pr.bias == BiasKind::full      ? 3
                                             : 0;
  f.dropout = pr.dropout > 0;
  return f;
}

std::vector<std::string> Features::defines() const {
  return define_all({{"FFPA_D", D},
                     {"FFPA_BF16", bf16},
                     {"FFPA_CAUSAL", causal},
                     {"FFPA_BIAS", bias},
                     {"FFPA_DBIAS", dbias},
                     {"FFPA_DROPOUT", dropout}});
}

Config default_config(const Problem& pr) {
  Config
      c;  // Br=64, Bc=32, 8 warps (4 x 1 per phase-1 half), Kd=64: dK+dV = 128 registers at D=512
  const int64_t D = pr.shape.D;
  if (D <= 128) {
    c.warps = 4;  // D/16 column blocks: 8 warps would leave half of them idle in phase 2
    c.Wr = 2;
  } else if (D > 512) {
    c.Br = 32;  // resident Q and dO: 2 x 32 x 1024 x 2 bytes
    c.Bc = 16;  // dK + dV: 8 blocks x 16 = 128 registers
    c.Wr = 2;
  }
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::bwd_sm80_layout(padded_d(D, c.Kd), c.Br, c.Bc).bytes;
}

int accumulator_registers(const Config& c, int D) {
  const int g = c.warps / 2, wc = g / c.Wr;
  const int slice = (c.Br / c.Wr) * (c.Bc / wc) / 32;  // S or dP of the warp
  return blocks_per_warp(c, D) * (c.Bc / 16) * 16 + slice;
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (c.Br <= 0 || c.Bc <= 0 || c.warps <= 0 || c.Wr <= 0 || c.Kd <= 0)
    return Support::no("knobs must be positive");
  if (c.threads() > 1024) return Support::no(s(c.threads()) + " threads exceed 1024");
  if (c.warps % 2 || (c.warps / 2) % c.Wr)
    return Support::no("warps must be even and warps/2 a multiple of Wr");
  const int wc = c.warps / 2 / c.Wr;
  if (c.Br % (16 * c.Wr)) return Support::no("Br=" + s(c.Br) + " is not a multiple of 16*Wr");
  if (c.Bc % 16) return Support::no("Bc must be a multiple of 16");
  if (c.Bc % wc || (c.Bc / wc) % 8)
    return Support::no("Bc/(warps/2/Wr) must be a multiple of 8 (phase-1 key columns of a warp)");
  if (c.Kd % 64) return Support::no("Kd must be a multiple of 64 (swizzled 64-column tiles)");
  if (padded_d(D, c.Kd) / c.Kd > 16) return Support::no("more than 16 D chunks (raise Kd)");
  if ((c.Br / c.Wr / 16) * (c.Bc / wc / 8) * 4 > 64)
    return Support::no("phase-1 slice of a warp too large for the dropout keep bits (64)");
  return check_resources(smem_bytes(c, D), smem_limit, c.threads(),
                         accumulator_registers(c, D) + kRegisterOverhead);
}

std::vector<std::string> nvrtc_options(const Config& c, const Features& f) {
  // FFPA_BR, FFPA_BC, FFPA_WARPS, FFPA_WR, FFPA_KD
  std::vector<std::string> o = knob_defines(kKnobs, c);
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  return o;
}

nvrtc::Compiled compile(const Config& c, const Features& f, const std::string& arch) {
  return nvrtc::compile("ffpa_bwd.cuh", nvrtc_options(c, f), arch);
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = check(c, static_cast<int>(pr.shape.D), dev.smem_per_block_optin); !s.ok())
    throw Unsupported(s.reason);
  nvrtc::Compiled comp = compile(c, Features::of(pr), fwd::target_arch(dev));
  refuse_spills(comp, "ffpa_bwd_kernel");
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaBwdParams& params,
                         const gpu::DeviceInfo& dev) {
  // dBias is computed whenever there is a bias: AttnTensors allocates it for every masked
  // backward, and compile_for() (the cubin a precompile warmed) assumes so.
  if ((pr.bias != BiasKind::none) != (params.dbias != nullptr))
    throw RunError("ffpa-bwd: dbias must be given exactly when the problem has a bias");
  const nvrtc::Compiled comp = compile_for(pr, c, dev);
  return make_op(pr, comp, "ffpa_bwd_kernel", c.Bc, c.threads(),
                 smem_bytes(c, static_cast<int>(pr.shape.D)), params, dev);
}

void check_aligned(const FfpaBwdParams& params) {
  // 16-byte cp.async / vector loads of q, k, v, o, dO rows; 4-byte stores of dq, dk, dv pairs.
  if (!qkvo_aligned(params.fwd, 8) ||
      !aligned(params.dout, {params.do_batch_stride, params.do_head_stride, params.do_row_stride},
               8) ||
      !aligned(params.dq, {params.dq_batch_stride, params.dq_head_stride, params.dq_row_stride},
               2) ||
      !aligned(params.dk, {params.dk_batch_stride, params.dk_head_stride, params.dk_row_stride},
               2) ||
      !aligned(params.dv, {params.dv_batch_stride, params.dv_head_stride, params.dv_row_stride}, 2))
    throw Unsupported(
        "q/k/v/o/dO need 16-byte aligned rows and strides in multiples of 8 elements, dq/dk/dv "
        "4-byte aligned pairs");
}

std::unique_ptr<Op> make_op(const Problem& pr, const nvrtc::Compiled& comp, const char* main_kernel,
                            int Bc, int threads, int smem, const FfpaBwdParams& params,
                            const gpu::DeviceInfo& dev, int cluster, int64_t dq_floats,
                            bool main_waits, const SplitTail* tail, const StreamKeys* stream,
                            const MainMaps* maps) {
  check_aligned(params);
  const Features ft = Features::of(pr);

  const auto& sh = pr.shape;
  const int64_t gx = (sh.Nkv + int64_t{Bc} * cluster - 1) / (int64_t{Bc} * cluster) * cluster;
  const int64_t rows = sh.B * sh.Hq * sh.Nq;
  const dim3 grid = launch_grid(gx, sh.Hkv, sh.B);
  launch_grid((rows + 7) / 8, 1, 1);  // the preprocess grid
  FfpaBwdParams p = params;
  gpu::DeviceBuffer delta(static_cast<size_t>(rows) * sizeof(float));
  gpu::DeviceBuffer dq_accum(static_cast<size_t>(dq_floats ? dq_floats : rows * sh.D) *
                             sizeof(float));
  gpu::DeviceBuffer dbias_accum;
  if (ft.dbias == 1 || ft.dbias == 2)
    dbias_accum = gpu::DeviceBuffer(static_cast<size_t>(ft.dbias == 1 ? sh.Nkv : sh.Nq * sh.Nkv) *
                                    sizeof(float));
  p.delta = delta.as<float>();
  p.dq_accum = dq_accum.as<float>();
  p.dbias_accum = dbias_accum ? dbias_accum.as<float>() : nullptr;
  const size_t dbias_bytes =
      ft.dbias == 3 ? static_cast<size_t>(pr.bias_elems()) * (ft.bias == 1 ? 4 : 2) : 0;
  // Programmatic dependent launch needs sm_90 (the cubins are compiled for the device's arch).
  const Chain chain = dev.sm_major < 9 ? Chain::none : main_waits ? Chain::all : Chain::convert;
  return std::make_unique<BwdOp>(nvrtc::Library(comp.cubin), main_kernel, p, grid, threads, smem,
                                 ft.dbias, dbias_bytes, dev.sm_count, chain, std::move(delta),
                                 std::move(dq_accum), std::move(dbias_accum), tail, cluster, stream,
                                 maps);
}

}  // namespace ffpa::bwd

namespace ffpa {
namespace {

struct Bwd {
  static constexpr const char* name = "ffpa-bwd-sm80";
  static constexpr Pass pass = Pass::bwd;
  using Config = bwd::Config;
  static constexpr auto knob_names = bwd::knob_names;
  static constexpr auto default_config = bwd::default_config;
  static constexpr auto check = bwd::check;
  static constexpr auto compile = bwd::compile_for;
  static constexpr auto problem_check = ffpa_family::any_problem;
  static constexpr auto device_check = ffpa_family::needs_sm80;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return bwd::bind(p, c, t.bwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_bwd_sm80() {
  return std::make_unique<ffpa_family::FfpaVariant<Bwd>>();
}

}  // namespace ffpa
