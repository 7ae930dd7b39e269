// Variant "ffpa-fwd-sm90ws": the warp-specialized Hopper forward (TMA producer, two wgmma
// consumers), compiled by NVRTC at bind().
#include "variants/ffpa_fwd_sm90ws.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "ffpa_fwd_sm90ws_layout.h"
#include "gpu/tma.hpp"
#include "tensors/tensors.hpp"
#include "variants/ffpa_variant.hpp"

namespace ffpa::fwd90ws {
using namespace ffpa_family;
namespace {

constexpr const char* kKernel = "ffpa_fwd_sm90ws_kernel";
constexpr const char* kMerge = "ffpa_fwd_sm90ws_merge_kernel";
constexpr const char* kKeep = "ffpa_fwd_sm90ws_keep_kernel";
using Keep = ffpa_layout::FwdSm90wsKeep;

Keep keep_of(const Problem& pr) {  // the keep mask's shape (kmask)
  const auto& s = pr.shape;
  return ffpa_layout::fwd_sm90ws_keep(s.B, s.Hkv, s.group() * s.Nq, s.Nkv);
}

// units: CTAs of equal work, whole clusters (tail: plan the last wave's split, else none); steps:
// key-block pairs of a unit (key blocks in the rows mode); cta_rows: query rows of a CTA; keep: the
// keep mask's shape (kmask), else null.
class Fwd90wsOp : public Op {
 public:
  Fwd90wsOp(nvrtc::Library lib, const FfpaFwdParams& p, FfpaTmaDesc tk, FfpaTmaDesc tv,
            int64_t units, bool tail, int steps, int cta_rows, int cluster, int smem, int sm_count,
            const Keep* keep)
      : lib_(std::move(lib)),
        p_(p),
        tk_(tk),
        tv_(tv),
        cta_rows_(cta_rows),
        cluster_(cluster),
        smem_(smem) {
    fn_ = lib_.kernel(kKernel);
    if (keep) {
      mask_ = gpu::DeviceBuffer(static_cast<size_t>(keep->words) * sizeof(unsigned));
      p_.keep_mask = mask_.as<unsigned>();
      keep_ = lib_.kernel(kKeep);
      keep_grid_ =
          dim3(static_cast<unsigned>(p_.B * p_.Hkv * keep->row_blocks),
               static_cast<unsigned>((keep->key_blocks + Keep::kCtaBlocks - 1) / Keep::kCtaBlocks));
    }
    FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn_),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, smem_));
    // Planned in clusters (the CTAs of one share a key stream and take one key range): the split's
    // first unit and its units are whole clusters.
    Tail t{units, 1};
    if (tail) {
      t = plan_tail(units / cluster,
                    gpu::resident(reinterpret_cast<const void*>(fn_), Config::threads(), smem_,
                                  static_cast<unsigned>(cluster), sm_count),
                    steps);
      t.from *= cluster;
    }
    tail_units_ = units - t.from;
    p_.split_from = t.from;
    p_.num_splits = t.pieces;
    if (tail_units_ > 0) {
      const size_t rows = static_cast<size_t>(tail_units_) * t.pieces * cta_rows_;
      opart_ = gpu::DeviceBuffer(rows * p_.D * sizeof(float));
      lpart_ = gpu::DeviceBuffer(rows * sizeof(float));
      p_.o_partial = opart_.as<float>();
      p_.lse_partial = lpart_.as<float>();
      merge_ = lib_.kernel(kMerge);
    }
    grid_ = launch_grid(t.from + tail_units_ * t.pieces, 1, 1);
  }

  void launch(cudaStream_t s) override {
    void* args[] = {&p_, &tk_, &tv_};
    // The forward's producers fill their rings while the keep kernel ends; its consumers wait
    // for it (grid_dependency_wait) before they read the mask.
    if (keep_) {
      void* kargs[] = {&p_};
      gpu::launch(reinterpret_cast<const void*>(keep_), keep_grid_, dim3(128), 0, s, kargs, false);
    }
    gpu::launch(reinterpret_cast<const void*>(fn_), grid_, dim3(Config::threads()),
                static_cast<size_t>(smem_), s, args, keep_ != nullptr,
                static_cast<unsigned>(cluster_));
    if (merge_)
      gpu::launch(reinterpret_cast<const void*>(merge_),
                  dim3(static_cast<unsigned>(tail_units_), static_cast<unsigned>(cta_rows_)),
                  dim3(128), 0, s, args, true);
  }
  int64_t extra_bytes() const override {
    return static_cast<int64_t>(opart_.bytes() + lpart_.bytes() + mask_.bytes());
  }
  std::string includes() const override {
    const std::string keep =
        keep_ ? "dropout keep mask (Philox) + forward chained by programmatic dependent launch "
              : "forward ";
    if (!merge_) return keep + "(TMA, warp-specialized)";
    return keep + "(TMA, warp-specialized; the last " + std::to_string(tail_units_) +
           " query blocks in " + std::to_string(p_.num_splits) +
           " key ranges each) + merge (chained by programmatic dependent launch)";
  }

 private:
  nvrtc::Library lib_;
  FfpaFwdParams p_;
  FfpaTmaDesc tk_, tv_;
  dim3 grid_;
  int cta_rows_;
  int cluster_;
  int smem_;
  int64_t tail_units_ = 0;
  gpu::DeviceBuffer opart_, lpart_, mask_;
  dim3 keep_grid_;
  cudaKernel_t fn_ = nullptr, merge_ = nullptr, keep_ = nullptr;
};

}  // namespace

constexpr Knob<Config> kKnobs[] = {
    {"slots", &Config::slots},       {"cluster", &Config::cluster},
    {"psmem", &Config::psmem},       {"seesaw", &Config::seesaw},
    {"oddpanel", &Config::oddpanel}, {"lead", &Config::lead},
    {"ahead", &Config::ahead},       {"kmask", &Config::kmask},
    {"qknext", &Config::qknext},     {"tail", &Config::tail, false},
    {"rows", &Config::rows},         {"pingpong", &Config::pingpong}};

Support problem_check(const Problem& pr) {
  const auto& s = pr.shape;
  auto n = [](int64_t v) { return std::to_string(v); };
  if (s.D < kMinD || s.D > kMaxD)
    return Support::no("D=" + n(s.D) + ": ffpa-fwd-sm90ws needs " + n(kMinD) + ".." + n(kMaxD) +
                       " (O split over two consumers, Q beside the K/V ring)");
  if (s.group() * s.Nq < 128)
    return Support::no(
        "fewer than 128 query rows per kv head (decode): the split-KV kernels fill the GPU");
  return Support::yes();
}

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

Config default_config(const Problem& pr) {
  Config c;
  const int D = static_cast<int>(pr.shape.D);
  // 128 rows a CTA, each consumer all of O, where O fits (D <= 320): at D = 320 on an H100 the
  // tuner chose it on every row without a bias, 549 TFLOPS self against 487 before
  // (docs/notes/ffpa_fwd_sm90ws.md step 13). With a bias it spills at D = 320 and is unmeasured
  // below.
  c.rows = D <= kMaxRowsD && pr.bias == BiasKind::none;
  // 16 slots (two rings of 8) fit beside Q and the two P tiles up to D = 512; 12 and 18 ran
  // 20 % slower at D = 512 (docs/notes/ffpa_fwd_sm90ws.md). Past D = 512 Q takes up to 128 KB:
  // as many as fit (10 at D = 1024).
  while (c.slots > 4 && smem_bytes(c, D) > 227 * 1024) c.slots -= 2;
  // Dropout's keep bits from the mask drawn before the forward (the Philox rounds out of the
  // consumers' softmax) where the mask takes at most 1 GiB; the tuner may try it past that.
  c.kmask = pr.dropout > 0.0 && keep_of(pr).words * int64_t{sizeof(unsigned)} <= (int64_t{1} << 30);
  // The seesaw puts both softmaxes of a pair in its critical path: with a bias or dropout drawn
  // in the softmax (long softmaxes) it ran 13-20 % slower than lock-step on the H200
  // (docs/notes/ffpa_fwd_sm90ws.md); with the keep mask it runs ahead of lock-step.
  c.seesaw = !c.rows && pr.bias == BiasKind::none && (pr.dropout == 0.0 || c.kmask);
  // cluster = 2 (K/V multicast) runs within 0-4 % of cluster = 1 on the H100 and 1.5-4 % ahead
  // on the power-limited H200's D = 512 rows (docs/notes/ffpa_fwd_sm90ws.md, step 15), and
  // serves no causal row: one CTA per query block; --tune fast and max try both.
  return c;
}

int smem_bytes(const Config& c, int D) {
  return ffpa_layout::fwd_sm90ws_layout(padded_d(D, 64), c.slots, c.rows).bytes;
}

Support check(const Config& c, int D, int smem_limit) {
  auto s = [](int v) { return std::to_string(v); };
  if (c.cluster != 1 && c.cluster != 2) return Support::no("cluster is 1 or 2");
  if (c.psmem != 0 && c.psmem != 1) return Support::no("psmem is 0 or 1");
  if (c.seesaw != 0 && c.seesaw != 1) return Support::no("seesaw is 0 or 1");
  if (c.oddpanel != 0 && c.oddpanel != 1) return Support::no("oddpanel is 0 or 1");
  if (c.lead != 0 && c.lead != 1) return Support::no("lead is 0 or 1");
  if (c.ahead != 0 && c.ahead != 1) return Support::no("ahead is 0 or 1");
  if (c.kmask != 0 && c.kmask != 1) return Support::no("kmask is 0 or 1");
  if (c.qknext != 0 && c.qknext != 1) return Support::no("qknext is 0 or 1");
  if (c.tail != 0 && c.tail != 1) return Support::no("tail is 0 or 1");
  if (c.rows != 0 && c.rows != 1) return Support::no("rows is 0 or 1");
  if (c.pingpong != 0 && c.pingpong != 1) return Support::no("pingpong is 0 or 1");
  if (c.pingpong && !c.rows)
    return Support::no("pingpong=1: only the rows mode's consumers take turns (rows=1)");
  if (c.kmask && c.ahead)
    return Support::no(
        "ahead=1 with kmask=1: the keep bits come from the mask, nothing is drawn "
        "ahead (the same kernel as ahead=0)");
  if (c.lead && !c.seesaw) return Support::no("lead=1: only the seesaw has a consumer that leads");
  // The next pair's softmax writes P while this pair's PVs read it: from registers only, and
  // its draws already lie under the PVs.
  if (c.qknext && c.seesaw)
    return Support::no("qknext=1: lock-step only (seesaw=0); the seesaw overlaps the softmaxes");
  if (c.qknext && c.psmem)
    return Support::no("qknext=1 with psmem=1: the next pair's P would overwrite sP under the PVs");
  if (c.qknext && c.ahead)
    return Support::no("qknext=1 with ahead=1: the keep bits are drawn under the PVs already");
  if (D % 8 || D < kMinD || D > kMaxD)
    return Support::no("D=" + s(D) + ": ffpa-fwd-sm90ws needs a multiple of 8 in " + s(kMinD) +
                       ".." + s(kMaxD));
  const int opanels = (padded_d(D, 64) / 64 + splits(D) - 1) / splits(D);  // of a CTA
  if (c.rows) {
    // Each consumer holds its 64 rows of the whole O and computes its own softmax: nothing
    // to offset, split or exchange.
    if (D > kMaxRowsD)
      return Support::no("rows=1: D=" + s(D) + " > " + s(kMaxRowsD) +
                         " (64 rows of the whole O in a consumer's registers: at most 5 panels)");
    const char* other = c.seesaw         ? "seesaw=1"
                        : c.lead         ? "lead=1"
                        : c.oddpanel     ? "oddpanel=1"
                        : c.psmem        ? "psmem=1"
                        : c.qknext       ? "qknext=1"
                        : c.ahead        ? "ahead=1"
                        : c.cluster != 1 ? "cluster=2"
                                         : nullptr;
    if (other)
      return Support::no(std::string("rows=1 with ") + other +
                         ": the consumers own their rows and all of O (lock-step, P from "
                         "registers, one CTA, nothing drawn ahead)");
    if (c.slots < 2 || c.slots % 2)
      return Support::no("slots=" + s(c.slots) + ": rows=1 needs an even ring of at least 2");
    // Taking turns, a consumer holds a block's V panels in flight through the other's turn.
    if (c.pingpong && c.slots < opanels)
      return Support::no("slots=" + s(c.slots) + ": pingpong=1 holds a block's " + s(opanels) +
                         " V panels in flight (a ring of at least that many slots)");
    return check_resources(smem_bytes(c, D), smem_limit, Config::threads(), 0);
  }
  // Two rings, one per consumer; in the seesaw consumer 1 keeps the wgmmas over all its V panels of
  // a key block in flight through its softmax, so its ring holds them all (checked in lock-step
  // too: one rule for every configuration).
  if (c.oddpanel == 1 && opanels % 2 == 0)
    return Support::no("oddpanel=1: D=" + s(D) + " gives a CTA an even count of O panels (" +
                       s(opanels) + "), the same kernel as oddpanel=0");
  const int panels = (opanels + c.oddpanel) / 2;  // consumer 1's
  // Leading or drawing ahead, consumer 0 holds its V panels of a block in flight too.
  const int panels0 = opanels - panels;
  if ((c.lead || c.ahead) && c.slots / 2 < panels0)
    return Support::no("slots=" + s(c.slots) + ": " + (c.lead ? "lead" : "ahead") +
                       "=1 holds consumer 0's " + s(panels0) +
                       " V panels of a block in flight (rings of at least that many slots)");
  // qknext: a consumer holds all its V panels of a pair at once.
  const int held = 2 * std::max(panels, panels0);
  if (c.qknext && c.slots / 2 < held)
    return Support::no("slots=" + s(c.slots) + ": qknext=1 holds " + s(held) +
                       " V panels of a pair in flight (rings of at least that many slots)");
  if (c.slots % 2 || c.slots / 2 < std::max(2, panels))
    return Support::no("slots=" + s(c.slots) + ": two rings of at least " + s(std::max(2, panels)) +
                       " slots each at D=" + s(D) + " (an even count)");
  // Registers are set by setmaxnreg (consumers 240, producer 24); ptxas reports any spill.
  return check_resources(smem_bytes(c, D), smem_limit, Config::threads(), 0);
}

std::vector<std::string> nvrtc_options(const Config& c, const fwd::Features& f) {
  std::vector<std::string> o = knob_defines(kKnobs, c);  // FFPA_SLOTS, FFPA_CLUSTER, ...
  const std::vector<std::string> fd = f.defines();
  o.insert(o.end(), fd.begin(), fd.end());
  o.push_back(define("FFPA_SPLIT", splits(f.D)));
  return o;
}

nvrtc::Compiled compile(const Config& c, const fwd::Features& f) {
  return nvrtc::compile("ffpa_fwd_sm90ws.cuh", nvrtc_options(c, f), "sm_90a");
}

nvrtc::Compiled compile_for(const Problem& pr, const Config& c, const gpu::DeviceInfo& dev) {
  if (Support s = needs_sm90(dev); !s.ok()) throw Unsupported(s.reason);
  if (Support s = problem_check(pr); !s.ok()) throw Unsupported(s.reason);
  const int D = static_cast<int>(pr.shape.D);
  if (Support s = check(c, D, dev.smem_per_block_optin); !s.ok()) throw Unsupported(s.reason);
  if (c.cluster > 1 && splits(D) > 1)
    throw Unsupported("cluster=" + std::to_string(c.cluster) + ": at D=" + std::to_string(D) +
                      " the CTAs of a query block read different V columns");
  if (c.ahead && pr.dropout == 0)
    throw Unsupported("ahead=1: the problem has no dropout (the same kernel as ahead=0)");
  if (c.kmask && pr.dropout == 0)
    throw Unsupported("kmask=1: the problem has no dropout (the same kernel as kmask=0)");
  if (c.kmask && keep_of(pr).key_blocks > int64_t{Keep::kCtaBlocks} * 65535)
    throw Unsupported("kmask=1: Nkv=" + std::to_string(pr.shape.Nkv) +
                      " needs more key-block groups than a grid's y dimension holds (65535)");
  if (c.cluster > 1 && pr.causal != Causal::none)
    throw Unsupported("cluster=" + std::to_string(c.cluster) +
                      ": the CTAs of a cluster share the key stream, causal blocks differ in "
                      "length");
  // The split has no effect there: a tuning point that would time tail = 0 again.
  if (c.tail && pr.causal != Causal::none)
    throw Unsupported(
        "tail=1: causal query blocks differ in work, the last wave is not split (the same "
        "kernel as tail=0)");
  nvrtc::Compiled comp = compile(c, fwd::Features::of(pr));
  refuse_spills(comp, kKernel);
  return comp;
}

std::unique_ptr<Op> bind(const Problem& pr, const Config& c, const FfpaFwdParams& params,
                         const gpu::DeviceInfo& dev) {
  nvrtc::Compiled comp = compile_for(pr, c, dev);
  // 16-byte cp.async of Q rows and TMA boxes of K/V rows, 4-byte O stores.
  if (!qkvo_aligned(params, 2))
    throw Unsupported("q/k/v need 16-byte aligned rows and strides in multiples of 8 elements");
  FfpaFwdParams p = params;
  p.o_partial = nullptr;
  p.lse_partial = nullptr;
  p.keep_mask = nullptr;
  const auto& sh = pr.shape;
  const bool bf16 = pr.dtype == Dtype::bf16;
  const int box_rows = 64 / c.cluster;  // each CTA of a cluster loads its share of a panel
  const FfpaTmaDesc tk = gpu::tma_rows_map(p.k, bf16, sh.D, sh.Nkv, sh.Hkv, sh.B, p.k_row_stride,
                                           p.k_head_stride, p.k_batch_stride, box_rows);
  const FfpaTmaDesc tv = gpu::tma_rows_map(p.v, bf16, sh.D, sh.Nkv, sh.Hkv, sh.B, p.v_row_stride,
                                           p.v_head_stride, p.v_batch_stride, box_rows);
  // Units x-fastest in a 1-D grid (the kernel's unit_of): query blocks (whole clusters) x the
  // CTAs of each, kv heads, batches.
  const int rows = ffpa_layout::fwd_sm90ws_cta_rows(c.rows);
  const int64_t blocks = (sh.group() * sh.Nq + rows - 1) / rows;
  const int64_t units = (blocks + c.cluster - 1) / c.cluster * c.cluster *
                        splits(static_cast<int>(sh.D)) * sh.Hkv * sh.B;
  const int64_t keys = c.rows ? 64 : 128;  // a step of the key loop: a block, or a pair
  const int steps = static_cast<int>((sh.Nkv + keys - 1) / keys);
  const Keep keep = keep_of(pr);
  return std::make_unique<Fwd90wsOp>(nvrtc::Library(comp.cubin), p, tk, tv, units, c.tail, steps,
                                     rows, c.cluster, smem_bytes(c, static_cast<int>(sh.D)),
                                     dev.sm_count, c.kmask ? &keep : nullptr);
}

}  // namespace ffpa::fwd90ws

namespace ffpa {
namespace {

struct Fwd90ws {
  static constexpr const char* name = "ffpa-fwd-sm90ws";
  static constexpr Pass pass = Pass::fwd;
  using Config = fwd90ws::Config;
  static constexpr auto knob_names = fwd90ws::knob_names;
  static constexpr auto default_config = fwd90ws::default_config;
  static constexpr auto check = fwd90ws::check;
  static constexpr auto compile = fwd90ws::compile_for;
  static constexpr auto problem_check = fwd90ws::problem_check;  // 72 <= D <= 1024, 128+ rows
  static constexpr auto device_check = ffpa_family::needs_sm90;
  static std::unique_ptr<Op> bind(const Problem& p, const Config& c, AttnTensors& t,
                                  const gpu::DeviceInfo& d) {
    return fwd90ws::bind(p, c, t.fwd_params(), d);
  }
};

}  // namespace

std::unique_ptr<Variant> make_ffpa_fwd_sm90ws() {
  return std::make_unique<ffpa_family::FfpaVariant<Fwd90ws>>();
}

}  // namespace ffpa
