// Helpers of the picture tests: a PNG's size read from its header (not through cairo), colour
// distance, and the colour found nearest a point.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tlaloc/plot/canvas.h"

namespace tlaloc::plot_test {

struct Size {
  int width = 0, height = 0;
};

// Width and height from the IHDR chunk, which the PNG format puts first: the 8-byte signature,
// the chunk's length and type, then width and height as big-endian 32-bit numbers.
inline Size png_size(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 ||
      png.compare(12, 4, "IHDR") != 0)
    return {};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | uint8_t(png[at + i]);
    return int(v);
  };
  return {be32(16), be32(20)};
}

inline uint32_t rgb_of(plot::Color c) {
  auto byte = [](double v) { return uint32_t(std::lround(v * 255)); };
  return byte(c.r) << 16 | byte(c.g) << 8 | byte(c.b);
}

// The largest difference of the three channels.
inline int distance(uint32_t a, uint32_t b) {
  int d = 0;
  for (int shift : {16, 8, 0})
    d = std::max(d, std::abs(int((a >> shift) & 255) - int((b >> shift) & 255)));
  return d;
}

// The smallest distance to `want` of the pixels within `radius` of (x, y).
inline int nearest(const plot::Image& img, double x, double y, uint32_t want, int radius = 1) {
  int best = 256;
  const int cx = int(std::floor(x)), cy = int(std::floor(y));
  for (int dy = -radius; dy <= radius; ++dy)
    for (int dx = -radius; dx <= radius; ++dx) {
      const int px = cx + dx, py = cy + dy;
      if (px < 0 || py < 0 || px >= img.width || py >= img.height) continue;
      best = std::min(best, distance(img.at(px, py), want));
    }
  return best;
}

// Relative luminance (Rec. 709 weights) of a pixel, 0 to 255.
inline double luminance(uint32_t rgb) {
  return 0.2126 * double((rgb >> 16) & 255) + 0.7152 * double((rgb >> 8) & 255) +
         0.0722 * double(rgb & 255);
}

}  // namespace tlaloc::plot_test
