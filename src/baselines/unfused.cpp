// Layout trick: with contiguous [B,H,N,D] tensors the g = Hq/Hkv query heads of one KV head are
// g*Nq consecutive rows, so every GEMM is one strided batch over the B*Hkv KV heads with
// M = g*Nq: GQA needs no expanded K/V, and dK/dV sum over the group inside the GEMM's K loop.
#include "baselines/unfused.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <optional>

#include "tensors/tensors.hpp"
#include "unfused/kernels.hpp"
#include "unfused/lt_gemm.hpp"

namespace ffpa {
namespace {

Elem input_elem(Dtype d) {
  return d == Dtype::bf16 ? Elem::bf16 : Elem::f16;
}
Elem bias_elem(const Problem& p) {
  return p.bias_dtype == BiasDtype::fp32 ? Elem::f32 : input_elem(p.dtype);
}

// Score rows are padded to a multiple of 8 elements so each starts 16-byte aligned.
int64_t score_ld(const Problem& p) {
  return (p.shape.Nkv + 7) / 8 * 8;
}
int64_t rows(const Problem& p) {
  return p.shape.B * p.shape.Hq * p.shape.Nq;
}
bool reduces_bias(const Problem& p) {
  return p.bias == BiasKind::key || p.bias == BiasKind::query_key;
}

class UnfusedOp : public Op {
 public:
  UnfusedOp(const Problem& p, Pass pass, AttnTensors& t) : p_(p), pass_(pass), t_(t) {
    const Shape& s = p.shape;
    const Elem e = input_elem(p.dtype);
    const int64_t es = elem_bytes(e), ld = score_ld(p), n = rows(p) * ld * es;
    const bool bwd = pass == Pass::bwd, drop = p.dropout > 0;
    ws_ = gpu::DeviceBuffer(kGemmWorkspaceBytes);
    s_ = gpu::DeviceBuffer(n);
    if (bwd) {
      ds_ = gpu::DeviceBuffer(n);
      if (drop) pd_ = gpu::DeviceBuffer(n);
      o_ = gpu::DeviceBuffer(t.q_elems() * es);
      lse_ = gpu::DeviceBuffer(rows(p) * 4);
      if (reduces_bias(p)) acc_ = gpu::DeviceBuffer(acc_elems(p) * 4);
    }
    const FfpaFwdParams f = t.fwd_params();
    geo_ = RowGeometry{0,
                       rows(p),
                       ld,
                       static_cast<int>(s.Hq),
                       static_cast<int>(s.Nq),
                       static_cast<int>(s.Nkv),
                       f.causal};
    drop_ = DropoutArgs{static_cast<float>(p.dropout), t.dropout_seed, t.dropout_offset};
    const int64_t Mg = s.group() * s.Nq, D = s.D, G = s.B * s.Hkv;
    // S = scale * Q K^T, and dP = dO V^T: [Mg, Nkv] per KV head.
    qk_ = plan(Mg, s.Nkv, D, G, false, true, t.q.get(), D, Mg * D, t.k.get(), D, s.Nkv * D,
               s_.get(), ld, Mg * ld);
    // O = P V, and dQ = scale * dS K: [Mg, D].
    // (Candidate algorithms are timed at bind: in the backward they write the own O, never the
    // forward results the tensors hold for other implementations.)
    pv_ = plan(Mg, D, s.Nkv, G, false, false, s_.get(), ld, Mg * ld, t.v.get(), D, s.Nkv * D,
               bwd ? o_.get() : t.o.get(), D, Mg * D);
    if (bwd) {
      // dV = Pd^T dO and dK = scale * dS^T Q: [Nkv, D], summed over the group's Mg rows.
      tn_ = plan(s.Nkv, D, Mg, G, true, false, s_.get(), ld, Mg * ld, t.q.get(), D, Mg * D,
                 t.dk.get(), D, s.Nkv * D);
      forward(s_.get(), lse_.as<float>(), drop ? pd_.get() : nullptr, o_.get(), false, nullptr);
      FFPA_CUDA(cudaDeviceSynchronize());
    }
  }

  void launch(cudaStream_t st) override {
    if (pass_ == Pass::fwd) {
      forward(s_.get(), t_.lse.as<float>(), nullptr, t_.o.get(), true, st);
    } else {
      backward(st);
    }
  }

  int64_t extra_bytes() const override { return unfused_extra_bytes(p_, pass_); }

  std::string includes() const override {
    if (pass_ == Pass::fwd)
      return "S=QK^T GEMM + softmax pass (bias, causal, dropout, LSE) + O=PV GEMM";
    return "dP=dO V^T GEMM + dS pass (delta, dropout replay) + dV, dQ, dK GEMMs" +
           std::string(reduces_bias(p_) ? " + dbias reduction" : "") +
           "; P comes from a forward run at bind time (untimed, as autograd saves it)";
  }

  static int64_t acc_elems(const Problem& p) {
    return (p.bias == BiasKind::key ? 1 : p.shape.Nq) * score_ld(p);
  }

 private:
  std::unique_ptr<Gemm> plan(int64_t M, int64_t N, int64_t K, int64_t batch, bool ta, bool tb,
                             const void* A, int64_t lda, int64_t sa, const void* B, int64_t ldb,
                             int64_t sb, void* C, int64_t ldc, int64_t sc) {
    GemmDesc d;
    d.ab = d.c = input_elem(p_.dtype);
    d.M = M;
    d.N = N;
    d.K = K;
    d.batch = batch;
    d.trans_a = ta;
    d.trans_b = tb;
    d.lda = lda;
    d.ldb = ldb;
    d.ldc = ldc;
    d.stride_a = sa;
    d.stride_b = sb;
    d.stride_c = sc;
    // Every buffer this plan later runs on shares these strides; the pointers are all
    // cudaMalloc'd (256-byte aligned).
    d.align =
        std::min({common_alignment(A, {lda * 2, sa * 2}), common_alignment(B, {ldb * 2, sb * 2}),
                  common_alignment(C, {ldc * 2, sc * 2})});
    const GemmTuneArgs tune{A, B, C, 1.f, 0.f};
    return std::make_unique<Gemm>(d, ws_.get(), kGemmWorkspaceBytes, &tune);
  }

  // S -> softmax -> O. into_s: dropout applied to S itself (forward); pd: dropped copy (bind).
  void forward(void* s, float* lse, void* pd, void* o, bool into_s, cudaStream_t st) {
    const float scale = static_cast<float>(p_.scale());
    qk_->run(t_.q.get(), t_.k.get(), s, scale, 0.f, st);
    const FfpaFwdParams f = t_.fwd_params();
    SoftmaxFwdArgs a{};
    a.g = geo_;
    a.elem = input_elem(p_.dtype);
    a.s = s;
    a.pd = pd;
    a.lse = lse;
    a.bias = f.bias;
    a.bias_elem = bias_elem(p_);
    a.bias_b = f.bias_batch_stride;
    a.bias_h = f.bias_head_stride;
    a.bias_r = f.bias_row_stride;
    a.drop = drop_;
    a.drop_into_s = into_s ? 1 : 0;
    softmax_fwd(a, st);
    pv_->run(pd ? pd : s, t_.v.get(), o, 1.f, 0.f, st);
  }

  void backward(cudaStream_t st) {
    const Shape& s = p_.shape;
    const Elem e = input_elem(p_.dtype);
    const float scale = static_cast<float>(p_.scale());
    qk_->run(t_.dout.get(), t_.v.get(), ds_.get(), 1.f, 0.f, st);
    SoftmaxBwdArgs a{};
    a.g = geo_;
    a.elem = e;
    a.p = s_.get();
    a.ds = ds_.get();
    a.pd = pd_.get();
    a.o = o_.get();
    a.dout = t_.dout.get();
    a.D = static_cast<int>(s.D);
    a.drop = drop_;
    a.dbias_full = p_.bias == BiasKind::full ? t_.dbias.get() : nullptr;
    a.dbias_elem = bias_elem(p_);
    softmax_bwd(a, st);
    tn_->run(pd_ ? pd_.get() : s_.get(), t_.dout.get(), t_.dv.get(), 1.f, 0.f, st);
    pv_->run(ds_.get(), t_.k.get(), t_.dq.get(), scale, 0.f, st);
    tn_->run(ds_.get(), t_.q.get(), t_.dk.get(), scale, 0.f, st);
    if (!reduces_bias(p_)) return;
    const int64_t ld = geo_.ld;
    FFPA_CUDA(cudaMemsetAsync(acc_.get(), 0, acc_.bytes(), st));
    if (p_.bias == BiasKind::key) {
      column_sums(ds_.get(), e, rows(p_), s.Nkv, ld, 0, 1, acc_.as<float>(), ld, st);
      copy_rows(acc_.as<float>(), 1, s.Nkv, ld, t_.dbias.get(), bias_elem(p_), st);
    } else {  // [B*Hq, Nq*ld] column sums add the heads
      const int64_t w = s.Nq * ld;
      column_sums(ds_.get(), e, s.B * s.Hq, w, w, 0, 1, acc_.as<float>(), w, st);
      copy_rows(acc_.as<float>(), s.Nq, s.Nkv, ld, t_.dbias.get(), bias_elem(p_), st);
    }
  }

  Problem p_;
  Pass pass_;
  AttnTensors& t_;
  RowGeometry geo_{};
  DropoutArgs drop_{};
  gpu::DeviceBuffer ws_, s_, ds_, pd_, o_, lse_, acc_;
  std::unique_ptr<Gemm> qk_, pv_, tn_;
};

class UnfusedBaseline : public Baseline {
 public:
  BaselineId id() const override { return BaselineId::unfused; }
  Support supports(const Problem& p, Pass) const override {
    if (p.shape.Nkv > INT_MAX / 2 || p.shape.D > INT_MAX)
      return Support::no("sequence length beyond 32-bit kernel indices");
    if (rows(p) > INT_MAX) return Support::no("more than 2^31 query rows");
    if (rows(p) > (int64_t{1} << 50) / score_ld(p))
      return Support::no("score matrix of more than 2^50 elements");
    if (p.dropout >= 1) return Support::no("dropout probability must be below 1");
    return Support::yes();
  }
  int64_t extra_bytes(const Problem& p, Pass pass) const override {
    return unfused_extra_bytes(p, pass);
  }
  std::unique_ptr<Op> bind(const Problem& p, Pass pass, AttnTensors& t) override {
    return std::make_unique<UnfusedOp>(p, pass, t);
  }
};

}  // namespace

std::unique_ptr<Baseline> make_unfused_baseline() {
  return std::make_unique<UnfusedBaseline>();
}

int64_t unfused_extra_bytes(const Problem& p, Pass pass) {
  // In 128 bits, clamped: the plan computes it for shapes the baseline refuses too.
  using Wide = __int128;
  const Wide es = dtype_bytes(p.dtype);
  const Wide scores = Wide(rows(p)) * score_ld(p) * es;
  Wide total = Wide(kGemmWorkspaceBytes) + scores;  // S (P in place)
  if (pass == Pass::bwd) {
    total += scores;                                                      // dP, dS in place
    if (p.dropout > 0) total += scores;                                   // dropped P
    total += Wide(p.shape.B) * p.shape.Hq * p.shape.Nq * p.shape.D * es;  // O of the forward
    total += Wide(rows(p)) * 4;                                           // its LSE
    if (reduces_bias(p)) total += Wide(UnfusedOp::acc_elems(p)) * 4;
  }
  return static_cast<int64_t>(std::min<Wide>(total, std::numeric_limits<int64_t>::max()));
}

}  // namespace ffpa
