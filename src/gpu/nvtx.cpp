#include "gpu/nvtx.hpp"

#include <nvtx3/nvToolsExt.h>

namespace ffpa::gpu {
namespace {

nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("ffpa-bench");
  return d;
}

}  // namespace

Range::Range(const std::string& name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name.c_str();  // copied by the tool at push
  nvtxDomainRangePushEx(domain(), &a);
}

Range::~Range() {
  nvtxDomainRangePop(domain());
}

}  // namespace ffpa::gpu
