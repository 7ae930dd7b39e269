#include "runner/save_tensors.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

#include "core/files.hpp"
#include "core/npy.hpp"
#include "reference/reference.hpp"
#include "tensors/tensors.hpp"

namespace ffpa {
namespace fs = std::filesystem;

std::string save_tensors(const std::string& dir, const AttnTensors& t, Pass pass,
                         const std::string& impl) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const fs::path out =
      fs::path(dir) /
      (p.case_name + "_" + to_string(pass) + "_" + to_string(p.dtype) + "_" + std::to_string(s.B) +
       "x" + std::to_string(s.Hq) + "x" + std::to_string(s.Hkv) + "x" + std::to_string(s.Nq) + "x" +
       std::to_string(s.Nkv) + "x" + std::to_string(s.D));
  fs::create_directories(out);
  const Elem in = p.dtype == Dtype::bf16 ? Elem::bf16 : Elem::f16;
  const Elem mask_elem = p.mask_dtype == MaskDtype::fp32 ? Elem::f32 : in;
  const std::vector<int64_t> q_shape{s.B, s.Hq, s.Nq, s.D}, kv_shape{s.B, s.Hkv, s.Nkv, s.D},
      lse_shape{s.B, s.Hq, s.Nq};
  std::vector<int64_t> bias_shape;
  switch (p.mask) {
    case MaskKind::none:
      break;
    case MaskKind::key:
      bias_shape = {1, 1, 1, s.Nkv};
      break;
    case MaskKind::query_key:
      bias_shape = {1, 1, s.Nq, s.Nkv};
      break;
    case MaskKind::full:
      bias_shape = {s.B, s.Hq, s.Nq, s.Nkv};
      break;
  }
  auto save = [&](const char* name, const gpu::DeviceBuffer& buf, Elem e,
                  const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::vector<double> wide = download(buf.get(), e, n);
    const std::vector<float> narrow(wide.begin(), wide.end());
    write_npy(out / (std::string(name) + ".npy"), shape, narrow.data());
  };
  save("q", t.q, in, q_shape);
  save("k", t.k, in, kv_shape);
  save("v", t.v, in, kv_shape);
  if (p.mask != MaskKind::none) save("bias", t.bias, mask_elem, bias_shape);
  save("o", t.o, in, q_shape);
  save("lse", t.lse, Elem::f32, lse_shape);
  if (pass == Pass::bwd) {
    save("do", t.dout, in, q_shape);
    save("dq", t.dq, in, q_shape);
    save("dk", t.dk, in, kv_shape);
    save("dv", t.dv, in, kv_shape);
    if (p.mask != MaskKind::none) save("dbias", t.dbias, mask_elem, bias_shape);
  }
  const nlohmann::json meta = {
      {"case", p.case_name},
      {"pass", to_string(pass)},
      {"dtype", to_string(p.dtype)},
      {"outputs_from", impl},
      {"B", s.B},
      {"Hq", s.Hq},
      {"Hkv", s.Hkv},
      {"Nq", s.Nq},
      {"Nkv", s.Nkv},
      {"D", s.D},
      {"scale", p.scale()},
      {"causal", to_string(p.causal)},
      {"mask", to_string(p.mask)},
      {"mask_dtype", to_string(p.mask_dtype)},
      {"dropout_p", p.dropout},
      {"dropout_seed", t.dropout_seed},
      {"dropout_offset", t.dropout_offset},
      {"layout", "[B, H, N, D]; lse [B, Hq, Nq] natural log; values widened to float32"},
      {"note", pass == Pass::bwd ? "o and lse are the fp32 reference forward rounded to dtype; "
                                   "dq, dk, dv, dbias are the outputs of outputs_from"
                                 : "o and lse are the outputs of outputs_from"}};
  write_file_atomic(out / "meta.json", meta.dump(2) + "\n");
  return out.string();
}

}  // namespace ffpa
