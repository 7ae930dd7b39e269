#include "reference/cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "philox.cuh"

namespace ffpa {

int64_t bias_index(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const Shape& s = p.shape;
  switch (p.bias) {
    case BiasKind::none:
      return -1;
    case BiasKind::key:
      return j;
    case BiasKind::query_key:
      return i * s.Nkv + j;
    case BiasKind::full:
      return ((b * s.Hq + h) * s.Nq + i) * s.Nkv + j;
  }
  return -1;
}

int64_t visible_keys(const Problem& p, int64_t i) {
  const Shape& s = p.shape;
  switch (p.causal) {
    case Causal::none:
      return s.Nkv;
    case Causal::bottom_right:
      return std::min(s.Nkv, i + s.Nkv - s.Nq + 1);
    case Causal::top_left:
      return std::min(s.Nkv, i + 1);
  }
  return s.Nkv;
}

HostAttnOutputs cpu_attention(const Problem& p, const HostAttnInputs& in) {
  const Shape& s = p.shape;
  const int64_t D = s.D, g = s.group();
  const double scale = p.scale();
  const bool bwd = !in.dout.empty();
  const float drop = static_cast<float>(p.dropout);
  const double keep_scale = p.dropout > 0 ? 1.0 / (1.0 - p.dropout) : 1.0;
  HostAttnOutputs out;
  out.o.assign(static_cast<size_t>(s.B * s.Hq * s.Nq * D), 0.0);
  out.lse.assign(static_cast<size_t>(s.B * s.Hq * s.Nq), 0.0);
  if (bwd) {
    out.dq.assign(out.o.size(), 0.0);
    out.dk.assign(static_cast<size_t>(s.B * s.Hkv * s.Nkv * D), 0.0);
    out.dv.assign(out.dk.size(), 0.0);
    out.dbias.assign(static_cast<size_t>(p.bias_elems()), 0.0);
  }
  std::vector<double> sc(static_cast<size_t>(s.Nkv)), pr(sc.size()), mult(sc.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t hk = h / g;
      const double* K = in.k.data() + (b * s.Hkv + hk) * s.Nkv * D;
      const double* V = in.v.data() + (b * s.Hkv + hk) * s.Nkv * D;
      for (int64_t i = 0; i < s.Nq; ++i) {
        const int64_t row = (b * s.Hq + h) * s.Nq + i;
        const double* Q = in.q.data() + row * D;
        double* O = out.o.data() + row * D;
        const int64_t nv = std::max<int64_t>(0, visible_keys(p, i));
        if (nv == 0) {
          out.lse[row] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < nv; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += Q[d] * K[j * D + d];
          acc *= scale;
          if (p.bias != BiasKind::none) acc += in.bias[bias_index(p, b, h, i, j)];
          sc[j] = acc;
          m = std::max(m, acc);
        }
        double sum = 0;
        for (int64_t j = 0; j < nv; ++j) sum += std::exp(sc[j] - m);
        const double lse = m + std::log(sum);
        out.lse[row] = lse;
        for (int64_t j = 0; j < nv; ++j) {
          pr[j] = std::exp(sc[j] - lse);
          const uint64_t e = static_cast<uint64_t>(row * s.Nkv + j);
          mult[j] = p.dropout > 0 && !ffpa_dropout_keep(in.dropout_seed, in.dropout_offset, e, drop)
                        ? 0.0
                        : keep_scale;
          const double w = pr[j] * mult[j];
          for (int64_t d = 0; d < D; ++d) O[d] += w * V[j * D + d];
        }
        if (!bwd) continue;
        const double* dO = in.dout.data() + row * D;
        double* dQ = out.dq.data() + row * D;
        double* dK = out.dk.data() + (b * s.Hkv + hk) * s.Nkv * D;
        double* dV = out.dv.data() + (b * s.Hkv + hk) * s.Nkv * D;
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += dO[d] * O[d];
        for (int64_t j = 0; j < nv; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += dO[d] * V[j * D + d];
          const double ds = pr[j] * (dp * mult[j] - delta);
          const double w = pr[j] * mult[j];
          for (int64_t d = 0; d < D; ++d) {
            dQ[d] += scale * ds * K[j * D + d];
            dK[j * D + d] += scale * ds * Q[d];
            dV[j * D + d] += w * dO[d];
          }
          if (p.bias != BiasKind::none) out.dbias[bias_index(p, b, h, i, j)] += ds;
        }
      }
    }
  return out;
}

}  // namespace ffpa
