// Factory of the "ffpa-fwd-sm90ws" variant (registered in variants/registry.cpp).
#pragma once

#include <memory>

#include "variants/op.hpp"

namespace ffpa {

std::unique_ptr<Variant> make_ffpa_fwd_sm90ws();

}  // namespace ffpa
