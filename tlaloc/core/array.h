// Array: an owned, 64-byte aligned host buffer with a dtype and a shape (row-major, dense).
// Copying deep-copies; moving is cheap. bf16 / f16 elements are stored as their 16-bit patterns.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/core/dtype.h"
#include "tlaloc/core/error.h"
#include "tlaloc/core/shape.h"

namespace tlaloc {

// Bytes of a dense array of `dtype` and `shape`. Throws tlaloc::Error naming both (as
// "f32[2147483648,2147483648]") for a negative dimension or a size over 2^63 - 1 bytes.
int64_t checked_nbytes(DType dtype, const Shape& shape);

class Array {
 public:
  Array() = default;
  // Zero-filled array. Throws tlaloc::Error as checked_nbytes() does, or when out of memory.
  Array(DType dtype, Shape shape);
  Array(const Array& other);
  Array& operator=(const Array& other);
  Array(Array&&) noexcept = default;
  Array& operator=(Array&&) noexcept = default;

  // From typed values; throws tlaloc::Error if values.size() != shape.numel().
  template <typename T>
  static Array from(Shape shape, const std::vector<T>& values);
  // Converting constructor from doubles into any dtype (rounding as convert does).
  static Array from_doubles(DType dtype, Shape shape, const std::vector<double>& values);
  template <typename T>
  static Array scalar(T value) {
    return from(Shape{}, std::vector<T>{value});
  }
  static Array filled(DType dtype, Shape shape, double value);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * size_of(dtype_); }
  bool empty() const { return data_ == nullptr && numel_ == 0; }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  // Typed views; throw tlaloc::Error naming both dtypes when T does not match.
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;
  template <typename T>
  std::span<T> span() {
    return {data<T>(), size_t(numel_)};
  }
  template <typename T>
  std::span<const T> span() const {
    return {data<T>(), size_t(numel_)};
  }
  template <typename T>
  std::vector<T> to_vector() const {
    auto s = span<T>();
    return {s.begin(), s.end()};
  }
  // Element i as double, for any dtype (bf16/f16 decoded).
  double at(int64_t i) const;
  std::vector<double> to_doubles() const;
  // A copy converted to another dtype (round-to-nearest-even for floats, C++ casts for ints).
  Array astype(DType t) const;
  // Same data, new shape with the same element count.
  Array reshaped(Shape s) const&;
  Array reshaped(Shape s) &&;
  // Bitwise equality of dtype, shape and bytes.
  bool bitwise_equal(const Array& o) const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  static std::unique_ptr<void, Free> allocate(size_t bytes);
  template <typename T>
  void check_type() const;

  DType dtype_ = DType::f32;
  Shape shape_;
  int64_t numel_ = 0;
  std::unique_ptr<void, Free> data_;
};

std::string describe(const Array& a);  // "f32[2,3]"

template <typename T>
void Array::check_type() const {
  bool ok;
  if constexpr (std::is_same_v<T, uint16_t>) {
    ok = dtype_ == DType::bf16 || dtype_ == DType::f16;
  } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>) {
    ok = dtype_ == DType::i1;
  } else {
    ok = dtype_ == dtype_of<T>();
  }
  if (!ok)
    fail("Array of dtype {} accessed with an element type of {} bytes", name(dtype_), sizeof(T));
}

template <typename T>
T* Array::data() {
  check_type<T>();
  return static_cast<T*>(data_.get());
}
template <typename T>
const T* Array::data() const {
  check_type<T>();
  return static_cast<const T*>(data_.get());
}

template <typename T>
Array Array::from(Shape shape, const std::vector<T>& values) {
  constexpr DType t = std::is_same_v<T, bool> ? DType::i1 : dtype_of<T>();
  Array a(t, std::move(shape));
  if (int64_t(values.size()) != a.numel())
    fail("Array::from: {} values for shape {} ({} elements)", values.size(), to_string(a.shape()),
         a.numel());
  if constexpr (std::is_same_v<T, bool>) {
    auto* p = static_cast<uint8_t*>(a.raw());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] ? 1 : 0;
  } else {
    if (!values.empty()) std::memcpy(a.raw(), values.data(), values.size() * sizeof(T));
  }
  return a;
}

}  // namespace tlaloc
