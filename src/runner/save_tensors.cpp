#include "runner/save_tensors.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/npy.hpp"
#include "reference/reference.hpp"
#include "tensors/tensors.hpp"

namespace ffpa {
namespace fs = std::filesystem;

std::string save_tensors(const std::string& dir, const AttnTensors& t, Pass pass,
                         const std::string& impl, bool inputs) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const std::string row = p.case_name + "_" + to_string(pass) + "_" + to_string(p.dtype) + "_" +
                          std::to_string(s.B) + "x" + std::to_string(s.Hq) + "x" +
                          std::to_string(s.Hkv) + "x" + std::to_string(s.Nq) + "x" +
                          std::to_string(s.Nkv) + "x" + std::to_string(s.D);
  const fs::path out = fs::path(dir) / row;
  const fs::path outputs = fs::path(dir) / (row + "." + impl);
  // A RunError fails this measurement with the reason; the sweep goes on.
  for (const fs::path& d : {out, outputs}) {
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) throw RunError("--save-tensors: cannot create " + d.string() + ": " + ec.message());
  }
  const Elem in = p.dtype == Dtype::bf16 ? Elem::bf16 : Elem::f16;
  const Elem bias_elem = p.bias_dtype == BiasDtype::fp32 ? Elem::f32 : in;
  const std::vector<int64_t> q_shape{s.B, s.Hq, s.Nq, s.D}, kv_shape{s.B, s.Hkv, s.Nkv, s.D},
      lse_shape{s.B, s.Hq, s.Nq};
  std::vector<int64_t> bias_shape;
  switch (p.bias) {
    case BiasKind::none:
      break;
    case BiasKind::key:
      bias_shape = {1, 1, 1, s.Nkv};
      break;
    case BiasKind::query_key:
      bias_shape = {1, 1, s.Nq, s.Nkv};
      break;
    case BiasKind::full:
      bias_shape = {s.B, s.Hq, s.Nq, s.Nkv};
      break;
  }
  auto save = [&](const fs::path& where, const char* name, const gpu::DeviceBuffer& buf, Elem e,
                  const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::vector<double> wide = download(buf.get(), e, n);
    const std::vector<float> narrow(wide.begin(), wide.end());
    write_npy(where / (std::string(name) + ".npy"), shape, narrow.data());
  };
  // The backward's o and lse are the reference forward: inputs, like dO.
  std::vector<std::string> input_names{"q", "k", "v"};
  if (p.bias != BiasKind::none) input_names.push_back("bias");
  if (pass == Pass::bwd) input_names.insert(input_names.end(), {"do", "o", "lse"});
  const fs::path fwd_out = pass == Pass::fwd ? outputs : out;
  if (inputs || pass == Pass::fwd) {
    save(fwd_out, "o", t.o, in, q_shape);
    save(fwd_out, "lse", t.lse, Elem::f32, lse_shape);
  }
  if (inputs) {
    save(out, "q", t.q, in, q_shape);
    save(out, "k", t.k, in, kv_shape);
    save(out, "v", t.v, in, kv_shape);
    if (p.bias != BiasKind::none) save(out, "bias", t.bias, bias_elem, bias_shape);
    if (pass == Pass::bwd) save(out, "do", t.dout, in, q_shape);
  }
  // Hard links cost no space; a file system without them gets copies.
  for (const std::string& name : input_names) {
    const fs::path from = out / (name + ".npy"), to = outputs / (name + ".npy");
    std::error_code ec;
    fs::remove(to, ec);
    fs::create_hard_link(from, to, ec);
    if (ec) fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec)
      throw RunError("--save-tensors: cannot link " + from.string() + " into " + outputs.string() +
                     ": " + ec.message());
  }
  if (pass == Pass::bwd) {
    save(outputs, "dq", t.dq, in, q_shape);
    save(outputs, "dk", t.dk, in, kv_shape);
    save(outputs, "dv", t.dv, in, kv_shape);
    if (p.bias != BiasKind::none) save(outputs, "dbias", t.dbias, bias_elem, bias_shape);
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
      {"bias", to_string(p.bias)},
      {"bias_dtype", to_string(p.bias_dtype)},
      {"dropout_p", p.dropout},
      {"dropout_seed", t.dropout_seed},
      {"dropout_offset", t.dropout_offset},
      {"layout", "[B, H, N, D]; lse [B, Hq, Nq] natural log; values widened to float32"},
      {"note", pass == Pass::bwd
                   ? "inputs q, k, v, bias, do, and o and lse (the fp32 reference "
                     "forward rounded to dtype), linked from ../" +
                         row + "; outputs dq, dk, dv, dbias"
                   : "inputs q, k, v, bias, linked from ../" + row + "; outputs o and lse"}};
  write_file_atomic(outputs / "meta.json", meta.dump(2) + "\n");
  return outputs.string();
}

}  // namespace ffpa
