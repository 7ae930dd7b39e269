// One status line for long sweeps.
#pragma once

#include <string>

namespace ffpa {

// "[ 3/40]   7% elapsed 1:05, ETA 12:30 | self-attn fwd bf16": i is the 1-based number of the item
// being worked on; an ETA that is negative or not finite (nothing measured yet) shows as "--".
std::string progress_line(int i, int n, double elapsed_s, double eta_s, const std::string& what);

}  // namespace ffpa
