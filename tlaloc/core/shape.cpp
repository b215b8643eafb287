#include "tlaloc/core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tlaloc/core/error.h"

namespace tlaloc {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) fail("shape {} has a negative dimension", to_string(*this));
    if (d != 0 && n > INT64_MAX / d) fail("shape {} has more than 2^63 elements", to_string(*this));
    n *= d;
  }
  return n;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

std::string to_string(const Shape& s) { return fmt::format("[{}]", fmt::join(s.dims, ",")); }

}  // namespace tlaloc
