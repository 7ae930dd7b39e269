// Factory of the "ffpa-bwd-sm90c" variant (registered in variants/registry.cpp).
#pragma once

#include <memory>

#include "variants/op.hpp"

namespace ffpa {

std::unique_ptr<Variant> make_ffpa_bwd_sm90c();

}  // namespace ffpa
