// Minimal .npy (NumPy format 1.0/2.0) reader and writer: little-endian float arrays in C order,
// which is what the oracle ships and what --save-tensors writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace ffpa {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // converted from the file's dtype (<f2, <f4 or <f8)
  int64_t size() const;
};

// Throws RunError on a missing or malformed file, or an unsupported dtype / Fortran order.
NpyArray read_npy(const std::filesystem::path&);
// Writes float32 ('<f4'); the data must hold the product of the shape's elements.
void write_npy(const std::filesystem::path&, const std::vector<int64_t>& shape, const float* data);

}  // namespace ffpa
