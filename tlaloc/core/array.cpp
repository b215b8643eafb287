#include "tlaloc/core/array.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>

namespace tlaloc {

void Array::Free::operator()(void* p) const { std::free(p); }

std::unique_ptr<void, Array::Free> Array::allocate(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  // Large buffers: 2 MiB aligned and backed by transparent huge pages where the kernel allows
  // (fewer TLB misses on streaming kernels).
  constexpr size_t kHuge = size_t(2) << 20;
  const bool huge = rounded >= 2 * kHuge;
  if (huge) rounded = (rounded + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(huge ? kHuge : 64, rounded);
  if (!p) fail("out of host memory allocating {} bytes", bytes);
  if (huge) madvise(p, rounded, MADV_HUGEPAGE);
  std::memset(p, 0, rounded);
  return std::unique_ptr<void, Free>(p);
}

int64_t checked_nbytes(DType dtype, const Shape& shape) {
  int64_t bytes = int64_t(size_of(dtype));
  for (int64_t d : shape.dims)
    if (d < 0) fail("{}{} has a negative dimension", name(dtype), to_string(shape));
  // Overflow of the element count or of the byte count: either wraps a size_t.
  for (int64_t d : shape.dims)
    if (__builtin_mul_overflow(bytes, d, &bytes))
      fail("{}{} is too large: its size overflows 2^63 - 1 bytes", name(dtype), to_string(shape));
  return bytes;
}

Array::Array(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  const int64_t bytes = checked_nbytes(dtype_, shape_);  // before numel(), to name the dtype
  numel_ = shape_.numel();
  data_ = allocate(size_t(bytes));
}

Array::Array(const Array& o) : dtype_(o.dtype_), shape_(o.shape_), numel_(o.numel_) {
  if (o.data_) {
    data_ = allocate(nbytes());
    std::memcpy(data_.get(), o.data_.get(), nbytes());
  }
}

Array& Array::operator=(const Array& o) {
  if (this != &o) *this = Array(o);
  return *this;
}

static void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = float(v);
      break;
    case DType::f64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = f32_to_bf16(float(v));
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = f32_to_f16(float(v));
      break;
    case DType::s32:
      static_cast<int32_t*>(p)[i] = int32_t(v);
      break;
    case DType::u32:
      static_cast<uint32_t*>(p)[i] = uint32_t(int64_t(v));
      break;
    case DType::i1:
      static_cast<uint8_t*>(p)[i] = v != 0.0 ? 1 : 0;
      break;
  }
}

Array Array::from_doubles(DType dtype, Shape shape, const std::vector<double>& values) {
  Array a(dtype, std::move(shape));
  if (int64_t(values.size()) != a.numel())
    fail("Array::from_doubles: {} values for shape {} ({} elements)", values.size(),
         to_string(a.shape()), a.numel());
  for (int64_t i = 0; i < a.numel(); ++i) store(a.raw(), dtype, i, values[size_t(i)]);
  return a;
}

Array Array::filled(DType dtype, Shape shape, double value) {
  Array a(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) store(a.raw(), dtype, i, value);
  return a;
}

double Array::at(int64_t i) const {
  if (i < 0 || i >= numel_) fail("Array index {} out of range for {}", i, describe(*this));
  const void* p = data_.get();
  switch (dtype_) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f64:
      return static_cast<const double*>(p)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::s32:
      return static_cast<const int32_t*>(p)[i];
    case DType::u32:
      return static_cast<const uint32_t*>(p)[i];
    case DType::i1:
      return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

std::vector<double> Array::to_doubles() const {
  std::vector<double> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[size_t(i)] = at(i);
  return v;
}

Array Array::astype(DType t) const {
  if (t == dtype_) return *this;
  Array r(t, shape_);
  for (int64_t i = 0; i < numel_; ++i) store(r.raw(), t, i, at(i));
  return r;
}

Array Array::reshaped(Shape s) const& { return Array(*this).reshaped(std::move(s)); }

Array Array::reshaped(Shape s) && {
  if (s.numel() != numel_)
    fail("cannot reshape {} to {}: {} vs {} elements", describe(*this), to_string(s), numel_,
         s.numel());
  shape_ = std::move(s);
  return std::move(*this);
}

bool Array::bitwise_equal(const Array& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ &&
         (nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0);
}

std::string describe(const Array& a) {
  return fmt::format("{}{}", name(a.dtype()), to_string(a.shape()));
}

}  // namespace tlaloc
