// A minimal PNG decoder for the browser test: 8-bit RGB / RGBA, not
// interlaced (what Chromium's --screenshot writes). Enough to check that a
// rendered page is not blank and shows the report's colours.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fgm::test {

struct RgbImage {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
  uint32_t pixel(uint32_t x, uint32_t y) const {
    const size_t i = (static_cast<size_t>(y) * width + x) * 3;
    return (uint32_t{rgb[i]} << 16) | (uint32_t{rgb[i + 1]} << 8) | rgb[i + 2];
  }
};

inline uint32_t png_be32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

// Throws std::runtime_error saying what is wrong with the file.
inline RgbImage decode_png(const std::string& bytes) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 8 || bytes.compare(0, 8, kSignature, 8) != 0) throw std::runtime_error("not a PNG file");
  RgbImage img;
  int colour_type = -1;
  std::string idat;
  for (size_t at = 8; at + 12 <= bytes.size();) {
    const uint32_t length = png_be32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (at + 12 + length > bytes.size()) throw std::runtime_error("truncated chunk " + type);
    const size_t data = at + 8;
    if (type == "IHDR") {
      img.width = png_be32(bytes, data);
      img.height = png_be32(bytes, data + 4);
      const int depth = static_cast<uint8_t>(bytes[data + 8]);
      colour_type = static_cast<uint8_t>(bytes[data + 9]);
      const int interlace = static_cast<uint8_t>(bytes[data + 12]);
      if (depth != 8 || (colour_type != 2 && colour_type != 6) || interlace != 0)
        throw std::runtime_error("unsupported PNG: depth " + std::to_string(depth) + ", colour type " +
                                 std::to_string(colour_type) + ", interlace " + std::to_string(interlace));
    } else if (type == "IDAT") {
      idat.append(bytes, data, length);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + length;
  }
  if (colour_type < 0 || img.width == 0 || img.height == 0) throw std::runtime_error("no IHDR");
  const size_t channels = colour_type == 6 ? 4 : 3;
  const size_t stride = img.width * channels;
  std::vector<uint8_t> raw(img.height * (stride + 1));
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_size != raw.size())
    throw std::runtime_error("IDAT does not inflate to the image size");
  std::vector<uint8_t> previous(stride, 0), line(stride);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= channels ? line[i - channels] : 0, b = previous[i],
                c = i >= channels ? previous[i - channels] : 0;
      int predicted;
      switch (filter) {
        case 0: predicted = 0; break;
        case 1: predicted = a; break;
        case 2: predicted = b; break;
        case 3: predicted = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw std::runtime_error("bad filter type " + std::to_string(filter));
      }
      line[i] = static_cast<uint8_t>(in[i] + predicted);
    }
    for (uint32_t x = 0; x < img.width; ++x)
      for (size_t k = 0; k < 3; ++k) img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + k] = line[x * channels + k];
    previous.swap(line);
  }
  return img;
}

// Pixels within `tolerance` (per channel) of `colour` (0xRRGGBB).
inline uint64_t count_near(const RgbImage& img, uint32_t colour, int tolerance) {
  uint64_t n = 0;
  for (uint32_t y = 0; y < img.height; ++y)
    for (uint32_t x = 0; x < img.width; ++x) {
      const uint32_t p = img.pixel(x, y);
      bool near = true;
      for (int shift : {16, 8, 0})
        near = near && std::abs(static_cast<int>((p >> shift) & 0xff) - static_cast<int>((colour >> shift) & 0xff)) <=
                           tolerance;
      n += near;
    }
  return n;
}

inline size_t distinct_colours(const RgbImage& img) {
  std::set<uint32_t> seen;
  for (uint32_t y = 0; y < img.height; ++y)
    for (uint32_t x = 0; x < img.width; ++x) seen.insert(img.pixel(x, y));
  return seen.size();
}

}  // namespace fgm::test
