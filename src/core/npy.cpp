#include "core/npy.hpp"

#include <cstring>
#include <fstream>
#include <string>

#include "core/error.hpp"

namespace ffpa {
namespace {

[[noreturn]] void bad(const std::filesystem::path& p, const std::string& why) {
  throw RunError(p.string() + ": " + why);
}

// Value of `'key': <value>` in the header dict, up to the next ',' or '}' outside parentheses.
std::string field(const std::string& h, const std::string& key) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t i = h.find(':', k);
  if (i == std::string::npos) return {};
  ++i;
  int depth = 0;
  size_t j = i;
  for (; j < h.size(); ++j) {
    if (h[j] == '(') ++depth;
    if (h[j] == ')') --depth;
    if (depth == 0 && (h[j] == ',' || h[j] == '}')) break;
  }
  std::string v = h.substr(i, j - i);
  const size_t a = v.find_first_not_of(" "), b = v.find_last_not_of(" ");
  return a == std::string::npos ? std::string() : v.substr(a, b - a + 1);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else {
    bits = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray read_npy(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) bad(p, "cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) bad(p, "not a .npy file");
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    hlen = b[0] | b[1] << 8;
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    hlen = b[0] | b[1] << 8 | b[2] << 16 | static_cast<uint32_t>(b[3]) << 24;
  }
  std::string h(hlen, '\0');
  if (!in.read(h.data(), hlen)) bad(p, "truncated header");
  const std::string descr = field(h, "descr");
  const std::string fortran = field(h, "fortran_order");
  const std::string shape = field(h, "shape");
  if (fortran != "False") bad(p, "Fortran order is not supported");
  int width = 0;
  if (descr == "'<f2'") width = 2;
  if (descr == "'<f4'") width = 4;
  if (descr == "'<f8'") width = 8;
  if (width == 0) bad(p, "unsupported dtype " + descr);
  NpyArray a;
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') bad(p, "bad shape");
  std::string dims = shape.substr(1, shape.size() - 2);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t end = dims.find(',', pos);
    if (end == std::string::npos) end = dims.size();
    const std::string d = dims.substr(pos, end - pos);
    if (d.find_first_not_of(" ") != std::string::npos) {
      try {
        a.shape.push_back(std::stoll(d));
      } catch (const std::exception&) {
        bad(p, "bad shape " + shape);
      }
    }
    pos = end + 1;
  }
  const int64_t n = a.size();
  std::vector<char> raw(static_cast<size_t>(n) * width);
  if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size()))) bad(p, "truncated data");
  a.data.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const char* src = raw.data() + i * width;
    if (width == 4) {
      std::memcpy(&a.data[i], src, 4);
    } else if (width == 8) {
      double d;
      std::memcpy(&d, src, 8);
      a.data[i] = static_cast<float>(d);
    } else {
      uint16_t hb;
      std::memcpy(&hb, src, 2);
      a.data[i] = half_to_float(hb);
    }
  }
  return a;
}

void write_npy(const std::filesystem::path& p, const std::vector<int64_t>& shape,
               const float* data) {
  std::string dims;
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    n *= shape[i];
  }
  if (shape.size() == 1) dims += ',';  // a 1-tuple is "(5,)"
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad so that magic (6) + version (2) + length (2) + header ends on a 64-byte boundary.
  const size_t total = 10 + h.size() + 1;
  h += std::string((64 - total % 64) % 64, ' ') + '\n';
  if (h.size() > 65535) throw RunError(p.string() + ": shape too long for a .npy header");
  std::ofstream out(p, std::ios::binary);
  if (!out) throw RunError("cannot write " + p.string());
  const uint16_t len = static_cast<uint16_t>(h.size());
  out.write("\x93NUMPY\x01\x00", 8);
  const char lb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(lb, 2);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * 4));
  if (!out) throw RunError("cannot write " + p.string());
}

}  // namespace ffpa
