#include "report/png.hpp"

#include <algorithm>
#include <array>

namespace ffpa {

Image::Image(int w, int h, uint32_t fill) : width(w), height(h), rgb(size_t(w) * h * 3) {
  for (size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i] = uint8_t(fill >> 16);
    rgb[i + 1] = uint8_t(fill >> 8);
    rgb[i + 2] = uint8_t(fill);
  }
}

uint32_t Image::at(int x, int y) const {
  const size_t i = (size_t(y) * width + x) * 3;
  return uint32_t(rgb[i]) << 16 | uint32_t(rgb[i + 1]) << 8 | rgb[i + 2];
}

void Image::set(int x, int y, uint32_t c) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  const size_t i = (size_t(y) * width + x) * 3;
  rgb[i] = uint8_t(c >> 16);
  rgb[i + 1] = uint8_t(c >> 8);
  rgb[i + 2] = uint8_t(c);
}

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const uint8_t* data, size_t n, uint32_t adler) {
  uint32_t a = adler & 0xFFFF, b = adler >> 16;
  for (size_t i = 0; i < n; ++i) {
    a = (a + data[i]) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

namespace {

// Deflate writes bit fields LSB first; Huffman codes go in MSB first.
class BitWriter {
 public:
  explicit BitWriter(std::string& out) : out_(out) {}
  void bits(uint32_t value, int n) {
    acc_ |= uint64_t(value) << count_;
    count_ += n;
    while (count_ >= 8) {
      out_ += char(acc_ & 0xFF);
      acc_ >>= 8;
      count_ -= 8;
    }
  }
  void code(uint32_t code, int n) {
    uint32_t rev = 0;
    for (int i = 0; i < n; ++i) rev |= ((code >> i) & 1) << (n - 1 - i);
    bits(rev, n);
  }
  void flush() {
    if (count_ > 0) bits(0, 8 - count_);
  }

 private:
  std::string& out_;
  uint64_t acc_ = 0;
  int count_ = 0;
};

// RFC 1951 3.2.6: the fixed literal/length code.
void literal(BitWriter& w, int sym) {
  if (sym < 144)
    w.code(0x30 + sym, 8);
  else if (sym < 256)
    w.code(0x190 + sym - 144, 9);
  else if (sym < 280)
    w.code(sym - 256, 7);
  else
    w.code(0xC0 + sym - 280, 8);
}

constexpr int kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                              31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr int kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                               2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr int kDistBase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                               33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                               1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr int kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

void match(BitWriter& w, int len, int dist) {
  int l = 28;
  while (kLenBase[l] > len) --l;
  literal(w, 257 + l);
  w.bits(len - kLenBase[l], kLenExtra[l]);
  int d = 29;
  while (kDistBase[d] > dist) --d;
  w.code(d, 5);
  w.bits(dist - kDistBase[d], kDistExtra[d]);
}

}  // namespace

std::string zlib_compress(const std::vector<uint8_t>& data) {
  constexpr int kWindow = 32768, kMaxLen = 258, kMinLen = 3, kChain = 32;
  constexpr int kHashBits = 15;
  std::string out = "\x78\x01";  // deflate, 32 KiB window, no dictionary
  BitWriter w(out);
  w.bits(1, 1);  // final block
  w.bits(1, 2);  // fixed Huffman codes

  const size_t n = data.size();
  std::vector<int64_t> head(size_t(1) << kHashBits, -1), prev(n, -1);
  const auto hash = [&](size_t i) {
    const uint32_t v = uint32_t(data[i]) << 16 | uint32_t(data[i + 1]) << 8 | data[i + 2];
    return (v * 2654435761u) >> (32 - kHashBits);
  };
  const auto insert = [&](size_t i) {
    if (i + kMinLen > n) return;
    const uint32_t h = hash(i);
    prev[i] = head[h];
    head[h] = int64_t(i);
  };

  size_t i = 0;
  while (i < n) {
    int best_len = 0, best_dist = 0;
    if (i + kMinLen <= n) {
      const size_t limit = std::min<size_t>(kMaxLen, n - i);
      int64_t cand = head[hash(i)];
      for (int steps = 0; cand >= 0 && i - size_t(cand) <= kWindow && steps < kChain; ++steps) {
        size_t len = 0;
        while (len < limit && data[size_t(cand) + len] == data[i + len]) ++len;
        if (int(len) > best_len) {
          best_len = int(len);
          best_dist = int(i - size_t(cand));
          if (len == limit) break;
        }
        cand = prev[size_t(cand)];
      }
    }
    if (best_len >= kMinLen) {
      match(w, best_len, best_dist);
      for (int k = 0; k < best_len; ++k) insert(i + k);
      i += size_t(best_len);
    } else {
      literal(w, data[i]);
      insert(i);
      ++i;
    }
  }
  literal(w, 256);  // end of block
  w.flush();
  const uint32_t a = adler32(data.data(), n);
  for (int s = 24; s >= 0; s -= 8) out += char((a >> s) & 0xFF);
  return out;
}

namespace {

void put32(std::string& s, uint32_t v) {
  for (int sh = 24; sh >= 0; sh -= 8) s += char((v >> sh) & 0xFF);
}

void chunk(std::string& png, const char* type, const std::string& body) {
  put32(png, uint32_t(body.size()));
  std::string typed = std::string(type, 4) + body;
  png += typed;
  put32(png, crc32(reinterpret_cast<const uint8_t*>(typed.data()), typed.size()));
}

}  // namespace

std::string encode_png(const Image& img) {
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put32(ihdr, uint32_t(img.width));
  put32(ihdr, uint32_t(img.height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit, RGB, deflate, no filter, no interlace
  chunk(png, "IHDR", ihdr);
  // Filter type 0 on every row: LZ77 already finds the repeats (previous pixel, previous row).
  const size_t stride = size_t(img.width) * 3;
  std::vector<uint8_t> raw;
  raw.reserve((stride + 1) * img.height);
  for (int y = 0; y < img.height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), img.rgb.begin() + y * stride, img.rgb.begin() + (y + 1) * stride);
  }
  chunk(png, "IDAT", zlib_compress(raw));
  chunk(png, "IEND", "");
  return png;
}

}  // namespace ffpa
