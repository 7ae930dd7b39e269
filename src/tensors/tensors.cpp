#include "tensors/tensors.hpp"

#include <cmath>
#include <limits>

#include "philox.cuh"
#include "tensors/fill.hpp"

namespace ffpa {
namespace {

// Salts of the per-tensor seeds: changing one changes every benchmark input.
enum Salt : unsigned long long { kQ = 1, kK, kV, kBias, kDout, kDropout };

Elem input_elem(Dtype d) {
  return d == Dtype::bf16 ? Elem::bf16 : Elem::f16;
}

}  // namespace

AttnTensors::AttnTensors(const Problem& p, Pass pass) : problem(p) {
  const Elem e = input_elem(p.dtype);
  const size_t es = static_cast<size_t>(elem_bytes(e));
  const Elem be = p.bias_dtype == BiasDtype::fp32 ? Elem::f32 : e;
  const size_t qb = static_cast<size_t>(q_elems()) * es, kvb = static_cast<size_t>(kv_elems()) * es;
  const size_t lb = static_cast<size_t>(lse_elems()) * 4;
  const size_t bb = static_cast<size_t>(p.bias_elems()) * static_cast<size_t>(elem_bytes(be));
  q = gpu::DeviceBuffer(qb);
  k = gpu::DeviceBuffer(kvb);
  v = gpu::DeviceBuffer(kvb);
  bias = gpu::DeviceBuffer(bb);
  o = gpu::DeviceBuffer(qb);
  lse = gpu::DeviceBuffer(lb);
  if (pass == Pass::bwd) {
    dout = gpu::DeviceBuffer(qb);
    dq = gpu::DeviceBuffer(qb);
    dk = gpu::DeviceBuffer(kvb);
    dv = gpu::DeviceBuffer(kvb);
    dbias = gpu::DeviceBuffer(bb);
  }
  const unsigned long long s = p.seed;
  fill_randn(q.get(), e, q_elems(), mix_seed(s, kQ), 1.f, nullptr);
  fill_randn(k.get(), e, kv_elems(), mix_seed(s, kK), 1.f, nullptr);
  fill_randn(v.get(), e, kv_elems(), mix_seed(s, kV), 1.f, nullptr);
  fill_randn(bias.get(), be, p.bias_elems(), mix_seed(s, kBias), static_cast<float>(p.bias_scale),
             nullptr);
  if (pass == Pass::bwd) fill_randn(dout.get(), e, q_elems(), mix_seed(s, kDout), 1.f, nullptr);
  // Outputs start as NaN (all-ones bits in fp16, bf16 and fp32): an element a kernel never
  // writes fails the non-finite scan instead of passing by luck.
  for (gpu::DeviceBuffer* b : {&o, &lse, &dq, &dk, &dv, &dbias})
    if (*b) FFPA_CUDA(cudaMemset(b->get(), 0xff, b->bytes()));
  FFPA_CUDA(cudaDeviceSynchronize());
  dropout_seed = mix_seed(s, kDropout);
  dropout_offset = 0;
}

int64_t AttnTensors::q_elems() const {
  const Shape& s = problem.shape;
  return s.B * s.Hq * s.Nq * s.D;
}
int64_t AttnTensors::kv_elems() const {
  const Shape& s = problem.shape;
  return s.B * s.Hkv * s.Nkv * s.D;
}
int64_t AttnTensors::lse_elems() const {
  const Shape& s = problem.shape;
  return s.B * s.Hq * s.Nq;
}

FfpaFwdParams AttnTensors::fwd_params() const {
  const Problem& p = problem;
  const Shape& s = p.shape;
  FfpaFwdParams f{};
  f.q = q.get();
  f.k = k.get();
  f.v = v.get();
  f.o = o.get();
  f.lse = lse.as<float>();
  f.bias = p.bias == BiasKind::none ? nullptr : bias.get();
  f.q_row_stride = f.o_row_stride = s.D;
  f.q_head_stride = f.o_head_stride = s.Nq * s.D;
  f.q_batch_stride = f.o_batch_stride = s.Hq * s.Nq * s.D;
  f.k_row_stride = f.v_row_stride = s.D;
  f.k_head_stride = f.v_head_stride = s.Nkv * s.D;
  f.k_batch_stride = f.v_batch_stride = s.Hkv * s.Nkv * s.D;
  switch (p.bias) {
    case BiasKind::none:
    case BiasKind::key:
      break;  // all broadcast: stride 0
    case BiasKind::query_key:
      f.bias_row_stride = s.Nkv;
      break;
    case BiasKind::full:
      f.bias_row_stride = s.Nkv;
      f.bias_head_stride = s.Nq * s.Nkv;
      f.bias_batch_stride = s.Hq * s.Nq * s.Nkv;
      break;
  }
  f.bias_is_fp32 = p.bias_dtype == BiasDtype::fp32;
  f.is_bf16 = p.dtype == Dtype::bf16;
  f.B = static_cast<int>(s.B);
  f.Hq = static_cast<int>(s.Hq);
  f.Hkv = static_cast<int>(s.Hkv);
  f.Nq = static_cast<int>(s.Nq);
  f.Nkv = static_cast<int>(s.Nkv);
  f.D = static_cast<int>(s.D);
  f.group = static_cast<int>(s.group());
  f.scale = static_cast<float>(p.scale());
  f.scale_log2 = static_cast<float>(p.scale() * M_LOG2E);
  f.causal = p.causal == Causal::none ? 0 : p.causal == Causal::bottom_right ? 1 : 2;
  f.dropout_keep_min = ffpa_keep_min(static_cast<float>(p.dropout));
  f.dropout_scale = p.dropout > 0 ? static_cast<float>(1.0 / (1.0 - p.dropout)) : 1.f;
  f.dropout_seed = dropout_seed;
  f.dropout_offset = dropout_offset;
  f.num_splits = 1;
  f.split_from = std::numeric_limits<long long>::max();  // no tail split
  return f;
}

FfpaBwdParams AttnTensors::bwd_params() const {
  const Shape& s = problem.shape;
  FfpaBwdParams b{};
  b.fwd = fwd_params();
  b.dout = dout.get();
  b.dq = dq.get();
  b.dk = dk.get();
  b.dv = dv.get();
  b.dbias = problem.bias == BiasKind::none ? nullptr : dbias.get();
  b.do_row_stride = b.dq_row_stride = s.D;
  b.do_head_stride = b.dq_head_stride = s.Nq * s.D;
  b.do_batch_stride = b.dq_batch_stride = s.Hq * s.Nq * s.D;
  b.dk_row_stride = b.dv_row_stride = s.D;
  b.dk_head_stride = b.dv_head_stride = s.Nkv * s.D;
  b.dk_batch_stride = b.dv_batch_stride = s.Hkv * s.Nkv * s.D;
  b.split_from = std::numeric_limits<long long>::max();  // no tail split
  b.num_splits = 1;
  return b;
}

}  // namespace ffpa
