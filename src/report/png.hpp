// A dependency-free PNG writer: 8-bit RGB, zlib stream with one fixed-Huffman deflate block
// (greedy LZ77 with hash chains), which keeps flat-coloured charts small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ffpa {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel

  Image() = default;
  Image(int w, int h, uint32_t fill);  // fill as 0xRRGGBB
  uint32_t at(int x, int y) const;
  void set(int x, int y, uint32_t rgb);  // ignores points outside
};

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);
uint32_t adler32(const uint8_t* data, size_t n, uint32_t adler = 1);
// A complete zlib stream (RFC 1950) holding `data`.
std::string zlib_compress(const std::vector<uint8_t>& data);
std::string encode_png(const Image&);

}  // namespace ffpa
