// Shape: a static list of dimension sizes, row-major. A scalar has rank 0.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace tlaloc {

struct Shape {
  std::vector<int64_t> dims;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims(d) {}
  explicit Shape(std::vector<int64_t> d) : dims(std::move(d)) {}

  int64_t rank() const { return int64_t(dims.size()); }
  // Number of elements (1 for a scalar). Throws tlaloc::Error on a negative dim or overflow.
  int64_t numel() const;
  int64_t operator[](int64_t i) const { return dims[size_t(i)]; }
  int64_t& operator[](int64_t i) { return dims[size_t(i)]; }
  bool operator==(const Shape&) const = default;
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;
};

// "[2,3]"; a scalar prints "[]".
std::string to_string(const Shape& s);

}  // namespace tlaloc
