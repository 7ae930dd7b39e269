// Device tensors of one problem, shared by every implementation of a row so that all of them see
// identical inputs. Inputs are random normal (never zeros), seeded from the problem.
#pragma once

#include "core/types.hpp"
#include "gpu/cuda.hpp"
#include "params.h"

namespace ffpa {

struct AttnTensors {
  Problem problem;
  gpu::DeviceBuffer q, k, v, bias;      // inputs ([B,H,N,D]; bias in its broadcast shape)
  gpu::DeviceBuffer o, lse;             // forward outputs (also backward inputs)
  gpu::DeviceBuffer dout;               // backward input: random, never ones
  gpu::DeviceBuffer dq, dk, dv, dbias;  // backward outputs (dbias in the bias's own shape)
  uint64_t dropout_seed = 0, dropout_offset = 0;

  // Allocates for the pass and fills inputs (q, k, v, bias, and dout for bwd) with seeded randn.
  // Throws RunError (out of memory) when it does not fit.
  AttnTensors(const Problem&, Pass);

  int64_t q_elems() const;
  int64_t kv_elems() const;
  int64_t lse_elems() const;

  // Contiguous [B,H,N,D] strides and broadcast bias strides filled in.
  FfpaFwdParams fwd_params() const;
  FfpaBwdParams bwd_params() const;
};

}  // namespace ffpa
