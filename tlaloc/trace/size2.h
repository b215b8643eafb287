// (height, width) pairs for 2-D convolution and pooling arguments, as PyTorch's `int or tuple`.
#pragma once

#include <cstdint>

namespace tlaloc::trace {

// A size per spatial dim (height, width); one number means both.
struct Size2 {
  int64_t h = 0, w = 0;
  Size2() = default;                // (0, 0)
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit, as PyTorch accepts an int
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
  // [0]: height, [1]: width.
  int64_t operator[](int i) const { return i == 0 ? h : w; }
  int64_t& operator[](int i) { return i == 0 ? h : w; }
};

}  // namespace tlaloc::trace
