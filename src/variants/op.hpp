// What the runner times: an implementation bound to one problem, configuration and set of tensors.
// Everything expensive (compiling, graph building, workspace allocation) happens in bind(), outside
// the timed region; launch() only enqueues work.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "gpu/cuda.hpp"

namespace ffpa {

struct AttnTensors;

// The answer of every support check ("no, because ..." in one form): empty reason = supported.
// Unsupported (below) only carries a refusal out of bind(), where a library answers late.
struct Support {
  std::string reason;
  bool ok() const { return reason.empty(); }
  static Support yes() { return {}; }
  static Support no(std::string why) { return {std::move(why)}; }
};

// Thrown by bind() when a library refuses the problem at build time (cuDNN's answer, a config
// that does not fit): the row becomes "n/a" with this reason, never an error.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Op {
 public:
  virtual ~Op() = default;
  virtual void launch(cudaStream_t) = 0;
  // Device memory beyond the problem's inputs and outputs (workspaces, S/P for unfused).
  virtual int64_t extra_bytes() const { return 0; }
  // What one launch() covers, e.g. "preprocess + dK/dV + dQ" for a backward.
  virtual std::string includes() const { return {}; }
  // Outputs that cannot be compared with the reference element-wise (another RNG stream) or are
  // not produced at all; the check records why instead of failing them.
  struct Unchecked {
    std::string tensor;  // "o", "dq", "dbias", ...
    std::string why;
    bool written;  // written (then scanned for NaN/Inf) or left untouched
  };
  virtual std::vector<Unchecked> unchecked() const { return {}; }
};

// An FFPA kernel variant: its name, pass, tuning knobs and support surface, declared in its file
// pair src/variants/<variant>.{hpp,cpp} (README, Development: adding a kernel family).
class Variant {
 public:
  virtual ~Variant() = default;
  virtual std::string name() const = 0;
  virtual Pass pass() const = 0;
  // Knob names; the variant's grid file (configs/grids/<name>.json) must declare exactly these.
  virtual std::vector<std::string> knob_names() const = 0;
  virtual Knobs default_knobs(const Problem&) const = 0;
  // Whether the variant handles the problem at all (shape, dtype, features).
  virtual Support supports(const Problem&) const = 0;
  // Whether one configuration fits (shared memory, registers, divisibility) on this device,
  // checked before anything is compiled or launched.
  virtual Support supports(const Problem&, const Knobs&, const gpu::DeviceInfo&) const = 0;
  // Compiles, without touching the GPU, what bind() would compile for a device with these
  // properties, so that the cubin cache holds it (a parallel warm-up, or --compile-only on a
  // machine without a GPU). No = refused after compiling (ptxas spilled registers).
  virtual Support compile(const Problem&, const Knobs&, const gpu::DeviceInfo&) const = 0;
  // Compiles or loads the configuration for the device and binds it to the tensors. May throw
  // Unsupported.
  virtual std::unique_ptr<Op> bind(const Problem&, const Knobs&, AttnTensors&,
                                   const gpu::DeviceInfo&) = 0;
};

// A baseline: the strongest thing a user could run instead.
class Baseline {
 public:
  virtual ~Baseline() = default;
  virtual BaselineId id() const = 0;
  std::string name() const { return to_string(id()); }  // "cudnn", "unfused"
  virtual Support supports(const Problem&, Pass) const = 0;
  // Extra device memory the baseline would need, so the runner can skip what will not fit.
  virtual int64_t extra_bytes(const Problem&, Pass) const = 0;
  virtual std::unique_ptr<Op> bind(const Problem&, Pass, AttnTensors&) = 0;
  // Library version loaded at run time (empty if not applicable).
  virtual std::string version() const { return {}; }
};

}  // namespace ffpa
