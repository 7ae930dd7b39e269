#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "reference/reference_kernels.hpp"
#include "unfused/kernels.hpp"
#include "unfused/lt_gemm.hpp"

namespace ffpa {
namespace {

constexpr int64_t kChunkBytes = int64_t{1} << 30;  // per score buffer

Elem input_elem(Dtype d) {
  return d == Dtype::bf16 ? Elem::bf16 : Elem::f16;
}
Elem bias_elem(const Problem& p) {
  return p.bias_dtype == BiasDtype::fp32 ? Elem::f32 : input_elem(p.dtype);
}
int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// One run of unfused attention with every intermediate in `e`.
struct Pipe {
  Elem e;
  const void *q, *k, *v, *dout;
  void *o, *dq, *dk, *dv, *dbias;
  float* lse;
};

const char* at(const void* p, int64_t elems, Elem e) {
  return static_cast<const char*>(p) + elems * elem_bytes(e);
}
char* at(void* p, int64_t elems, Elem e) {
  return static_cast<char*>(p) + elems * elem_bytes(e);
}

// Row-major GEMM on single matrices (batch 1), planned for exactly these pointers.
void gemm(Elem ab, Elem c, int64_t M, int64_t N, int64_t K, bool ta, bool tb, const void* A,
          int64_t lda, const void* B, int64_t ldb, void* C, int64_t ldc, float alpha, float beta,
          void* ws, cudaStream_t st) {
  GemmDesc d;
  d.ab = ab;
  d.c = c;
  d.M = M;
  d.N = N;
  d.K = K;
  d.trans_a = ta;
  d.trans_b = tb;
  d.lda = lda;
  d.ldb = ldb;
  d.ldc = ldc;
  const int ea = elem_bytes(ab), ec = elem_bytes(c);
  d.align = std::min({common_alignment(A, {lda * ea}), common_alignment(B, {ldb * ea}),
                      common_alignment(C, {ldc * ec})});
  Gemm(d, ws, kGemmWorkspaceBytes).run(A, B, C, alpha, beta, st);
}

void run_pipeline(const AttnTensors& t, Pass pass, const Pipe& P, cudaStream_t st) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const Elem e = P.e;
  const int es = elem_bytes(e);
  const int64_t D = s.D, g = s.group(), Mg = g * s.Nq, ld = round_up(s.Nkv, 8);
  const int64_t R = std::clamp<int64_t>(kChunkBytes / (ld * es), 1, Mg);
  const bool bwd = pass == Pass::bwd, drop = p.dropout > 0;
  const float scale = static_cast<float>(p.scale());
  gpu::DeviceBuffer ws(kGemmWorkspaceBytes), S(R * ld * es), Pd(drop ? R * ld * es : 0),
      dS(bwd ? R * ld * es : 0);
  const bool reduce_bias = bwd && (p.bias == BiasKind::key || p.bias == BiasKind::query_key);
  const int64_t acc_rows = p.bias == BiasKind::key ? 1 : s.Nq;
  gpu::DeviceBuffer acc(reduce_bias ? acc_rows * ld * 4 : 0);
  if (reduce_bias) FFPA_CUDA(cudaMemsetAsync(acc.get(), 0, acc.bytes(), st));

  const FfpaFwdParams f = t.fwd_params();
  RowGeometry geo{
      0, 0, ld, static_cast<int>(s.Hq), static_cast<int>(s.Nq), static_cast<int>(s.Nkv), f.causal};
  const DropoutArgs dr{static_cast<float>(p.dropout), t.dropout_seed, t.dropout_offset};

  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t hk = 0; hk < s.Hkv; ++hk) {
      const int64_t kv0 = (b * s.Hkv + hk) * s.Nkv * D;
      for (int64_t r0 = 0; r0 < Mg; r0 += R) {
        const int64_t rc = std::min(R, Mg - r0);
        const int64_t row0 = (b * s.Hkv + hk) * Mg + r0;
        geo.row0 = row0;
        geo.rows = rc;
        gemm(e, e, rc, s.Nkv, D, false, true, at(P.q, row0 * D, e), D, at(P.k, kv0, e), D, S.get(),
             ld, scale, 0.f, ws.get(), st);
        SoftmaxFwdArgs fa{};
        fa.g = geo;
        fa.elem = e;
        fa.s = S.get();
        fa.pd = drop ? Pd.get() : nullptr;
        fa.lse = P.lse;
        fa.bias = f.bias;
        fa.bias_elem = bias_elem(p);
        fa.bias_b = f.bias_batch_stride;
        fa.bias_h = f.bias_head_stride;
        fa.bias_r = f.bias_row_stride;
        fa.drop = dr;
        fa.drop_into_s = 0;
        softmax_fwd(fa, st);
        const void* probs = drop ? Pd.get() : S.get();
        gemm(e, e, rc, D, s.Nkv, false, false, probs, ld, at(P.v, kv0, e), D, at(P.o, row0 * D, e),
             D, 1.f, 0.f, ws.get(), st);
        if (!bwd) continue;
        gemm(e, e, rc, s.Nkv, D, false, true, at(P.dout, row0 * D, e), D, at(P.v, kv0, e), D,
             dS.get(), ld, 1.f, 0.f, ws.get(), st);
        SoftmaxBwdArgs ba{};
        ba.g = geo;
        ba.elem = e;
        ba.p = S.get();
        ba.ds = dS.get();
        ba.pd = Pd.get();
        ba.o = P.o;
        ba.dout = P.dout;
        ba.D = static_cast<int>(D);
        ba.drop = dr;
        ba.dbias_full = p.bias == BiasKind::full ? P.dbias : nullptr;
        ba.dbias_elem = e == Elem::f32 ? Elem::f32 : bias_elem(p);
        softmax_bwd(ba, st);
        const float beta = r0 > 0 ? 1.f : 0.f;
        gemm(e, e, rc, D, s.Nkv, false, false, dS.get(), ld, at(P.k, kv0, e), D,
             at(P.dq, row0 * D, e), D, scale, 0.f, ws.get(), st);
        gemm(e, e, s.Nkv, D, rc, true, false, dS.get(), ld, at(P.q, row0 * D, e), D,
             at(P.dk, kv0, e), D, scale, beta, ws.get(), st);
        gemm(e, e, s.Nkv, D, rc, true, false, probs, ld, at(P.dout, row0 * D, e), D,
             at(P.dv, kv0, e), D, 1.f, beta, ws.get(), st);
        if (reduce_bias)
          column_sums(dS.get(), e, rc, s.Nkv, ld, row0, p.bias == BiasKind::key ? 1 : s.Nq,
                      acc.as<float>(), ld, st);
      }
    }
  if (reduce_bias)
    copy_rows(acc.as<float>(), acc_rows, s.Nkv, ld, P.dbias,
              e == Elem::f32 ? Elem::f32 : bias_elem(p), st);
  FFPA_CUDA(cudaStreamSynchronize(st));
}

CompareStats compare_on_device(const void* out, Elem e, const void* ref, int64_t n) {
  gpu::DeviceBuffer st(sizeof(CompareStats));
  FFPA_CUDA(cudaMemset(st.get(), 0, sizeof(CompareStats)));
  compare(out, e, static_cast<const float*>(ref), n, st.as<CompareStats>(), nullptr);
  CompareStats h{};
  FFPA_CUDA(cudaMemcpy(&h, st.get(), sizeof(h), cudaMemcpyDeviceToHost));
  return h;
}

float bits_to_float(unsigned int b) {
  float f;
  static_assert(sizeof(f) == sizeof(b));
  std::memcpy(&f, &b, 4);
  return f;
}

struct Named {
  const char* name;
  const gpu::DeviceBuffer* out;  // in the tensors
  Elem elem;
  const gpu::DeviceBuffer* ref;
  int64_t n;
};

// The pass's outputs with their reference buffers (null without a reference).
std::vector<Named> outputs(const AttnTensors& t, const Reference* r, Pass pass) {
  const Problem& p = t.problem;
  const Elem e = input_elem(p.dtype);
  const auto ref = [r](const gpu::DeviceBuffer Reference::*b) { return r ? &(r->*b) : nullptr; };
  if (pass == Pass::fwd)
    return {{"o", &t.o, e, ref(&Reference::o), t.q_elems()},
            {"lse", &t.lse, Elem::f32, ref(&Reference::lse), t.lse_elems()}};
  std::vector<Named> v = {{"dq", &t.dq, e, ref(&Reference::dq), t.q_elems()},
                          {"dk", &t.dk, e, ref(&Reference::dk), t.kv_elems()},
                          {"dv", &t.dv, e, ref(&Reference::dv), t.kv_elems()}};
  if (p.bias != BiasKind::none)
    v.push_back({"dbias", &t.dbias, bias_elem(p), ref(&Reference::dbias), p.bias_elems()});
  return v;
}

}  // namespace

Reference compute_reference(const AttnTensors& t, Pass pass) {
  const Problem& p = t.problem;
  const Elem e = input_elem(p.dtype), me = bias_elem(p);
  const bool bwd = pass == Pass::bwd;
  const int64_t nq = t.q_elems(), nkv = t.kv_elems(), nl = t.lse_elems(), nb = p.bias_elems();
  Reference r;
  r.pass = pass;
  r.o = gpu::DeviceBuffer(nq * 4);
  r.lse = gpu::DeviceBuffer(nl * 4);
  if (bwd) {
    r.dq = gpu::DeviceBuffer(nq * 4);
    r.dk = gpu::DeviceBuffer(nkv * 4);
    r.dv = gpu::DeviceBuffer(nkv * 4);
    r.dbias = gpu::DeviceBuffer(nb * 4);
  }
  {
    gpu::DeviceBuffer q(nq * 4), k(nkv * 4), v(nkv * 4), dout(bwd ? nq * 4 : 0);
    convert(t.q.get(), e, q.get(), Elem::f32, nq, nullptr);
    convert(t.k.get(), e, k.get(), Elem::f32, nkv, nullptr);
    convert(t.v.get(), e, v.get(), Elem::f32, nkv, nullptr);
    if (bwd) convert(t.dout.get(), e, dout.get(), Elem::f32, nq, nullptr);
    FFPA_CUDA(cudaDeviceSynchronize());
    const Pipe f32{Elem::f32,  q.get(),    k.get(),    v.get(),       dout.get(),       r.o.get(),
                   r.dq.get(), r.dk.get(), r.dv.get(), r.dbias.get(), r.lse.as<float>()};
    run_pipeline(t, pass, f32, nullptr);
  }
  gpu::DeviceBuffer o(nq * 2), lse(nl * 4), dq(bwd ? nq * 2 : 0), dk(bwd ? nkv * 2 : 0),
      dv(bwd ? nkv * 2 : 0), dbias(bwd ? nb * elem_bytes(me) : 0);
  const Pipe low{e,        t.q.get(), t.k.get(), t.v.get(),   t.dout.get(),   o.get(),
                 dq.get(), dk.get(),  dv.get(),  dbias.get(), lse.as<float>()};
  run_pipeline(t, pass, low, nullptr);
  const std::vector<Named> lows = {{"o", &o, e, &r.o, nq},     {"lse", &lse, Elem::f32, &r.lse, nl},
                                   {"dq", &dq, e, &r.dq, nq},  {"dk", &dk, e, &r.dk, nkv},
                                   {"dv", &dv, e, &r.dv, nkv}, {"dbias", &dbias, me, &r.dbias, nb}};
  for (const Named& x : lows) {
    if (!*x.ref || !*x.out) continue;
    r.lowprec_err[x.name] =
        bits_to_float(compare_on_device(x.out->get(), x.elem, x.ref->get(), x.n).max_abs_bits);
  }
  return r;
}

std::vector<TensorCheck> check_outputs(const AttnTensors& t, const Reference& r, Pass pass) {
  std::vector<TensorCheck> checks;
  for (const Named& x : outputs(t, &r, pass)) {
    if (!*x.ref) throw RunError(std::string("reference has no ") + x.name + " (wrong pass)");
    const CompareStats s = compare_on_device(x.out->get(), x.elem, x.ref->get(), x.n);
    TensorCheck c;
    c.tensor = x.name;
    c.max_abs = bits_to_float(s.max_abs_bits);
    c.rel_rms = s.sum_r2 > 0 ? std::sqrt(s.sum_d2 / s.sum_r2) : std::sqrt(s.sum_d2);
    const auto it = r.lowprec_err.find(x.name);
    const double low = it == r.lowprec_err.end() ? 0.0 : it->second;
    c.bound = 2.0 * low + 1e-5 * bits_to_float(s.max_ref_bits);
    c.nonfinite = static_cast<int64_t>(s.nonfinite);
    c.pass = c.nonfinite == 0 && c.max_abs <= c.bound;
    checks.push_back(c);
  }
  return checks;
}

std::vector<TensorCheck> scan_outputs(const AttnTensors& t, Pass pass) {
  std::vector<TensorCheck> checks;
  for (const Named& x : outputs(t, nullptr, pass)) {
    TensorCheck c;
    c.tensor = x.name;
    c.nonfinite =
        static_cast<int64_t>(compare_on_device(x.out->get(), x.elem, nullptr, x.n).nonfinite);
    c.pass = c.nonfinite == 0;
    c.note = "not compared (--no-check): NaN/Inf scan only";
    checks.push_back(c);
  }
  return checks;
}

void write_forward_outputs(AttnTensors& t, const Reference& r) {
  convert(r.o.get(), Elem::f32, t.o.get(), input_elem(t.problem.dtype), t.q_elems(), nullptr);
  FFPA_CUDA(cudaMemcpy(t.lse.get(), r.lse.get(), r.lse.bytes(), cudaMemcpyDeviceToDevice));
  FFPA_CUDA(cudaDeviceSynchronize());
}

std::vector<double> download(const void* dev, Elem e, int64_t n) {
  gpu::DeviceBuffer tmp(n * 4);
  convert(dev, e, tmp.get(), Elem::f32, n, nullptr);
  std::vector<float> f(static_cast<size_t>(n));
  FFPA_CUDA(cudaMemcpy(f.data(), tmp.get(), n * 4, cudaMemcpyDeviceToHost));
  return {f.begin(), f.end()};
}

std::vector<float> dropout_uniforms_gpu(int64_t n, uint64_t seed, uint64_t offset) {
  gpu::DeviceBuffer d(n * 4);
  dropout_uniforms(d.as<float>(), n, seed, offset, nullptr);
  std::vector<float> h(static_cast<size_t>(n));
  FFPA_CUDA(cudaMemcpy(h.data(), d.get(), n * 4, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace ffpa
