#include "tlaloc/nn/pooling.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tlaloc::nn {

std::string Pool2dArg::str() const {
  return pair ? fmt::format("({}, {})", v[0], v[1]) : fmt::format("{}", v[0]);
}

namespace {
const char* py_bool(bool b) { return b ? "True" : "False"; }
}  // namespace

MaxPool2d::MaxPool2d(Pool2dArg kernel_size, std::optional<Pool2dArg> stride, Pool2dArg padding,
                     Pool2dArg dilation, bool ceil_mode)
    : kernel_size_(kernel_size),
      stride_(stride.value_or(kernel_size)),
      padding_(padding),
      dilation_(dilation),
      ceil_mode_(ceil_mode) {}

trace::Tensor MaxPool2d::forward(const trace::Tensor& x) {
  return trace::max_pool2d(x, kernel_size_.v, stride_.v, padding_.v, dilation_.v, ceil_mode_);
}

std::string MaxPool2d::repr() const {
  return fmt::format("MaxPool2d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})",
                     kernel_size_.str(), stride_.str(), padding_.str(), dilation_.str(),
                     py_bool(ceil_mode_));
}

AvgPool2d::AvgPool2d(Pool2dArg kernel_size, std::optional<Pool2dArg> stride, Pool2dArg padding,
                     bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override)
    : kernel_size_(kernel_size),
      stride_(stride.value_or(kernel_size)),
      padding_(padding),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad),
      divisor_override_(divisor_override) {}

trace::Tensor AvgPool2d::forward(const trace::Tensor& x) {
  return trace::avg_pool2d(x, kernel_size_.v, stride_.v, padding_.v, ceil_mode_, count_include_pad_,
                           divisor_override_);
}

std::string AvgPool2d::repr() const {
  return fmt::format("AvgPool2d(kernel_size={}, stride={}, padding={})", kernel_size_.str(),
                     stride_.str(), padding_.str());
}

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim_(start_dim), end_dim_(end_dim) {}

trace::Tensor Flatten::forward(const trace::Tensor& x) {
  const int64_t r = x.rank();
  if (r == 0) return trace::reshape(x, {1});
  const int64_t s = start_dim_ < 0 ? start_dim_ + r : start_dim_;
  const int64_t e = end_dim_ < 0 ? end_dim_ + r : end_dim_;
  if (s < 0 || s >= r || e < 0 || e >= r)
    fail("Flatten: start_dim {} / end_dim {} out of range for {}", start_dim_, end_dim_,
         tlaloc::to_string(x.shape()));
  if (s > e) fail("Flatten: start_dim {} comes after end_dim {}", start_dim_, end_dim_);
  std::vector<int64_t> shape;
  int64_t merged = 1;
  for (int64_t i = 0; i < r; ++i) {
    if (i < s || i > e) {
      shape.push_back(x.dim(i));
    } else {
      merged *= x.dim(i);
      if (i == e) shape.push_back(merged);
    }
  }
  return trace::reshape(x, shape);
}

std::string Flatten::repr() const {
  return fmt::format("Flatten(start_dim={}, end_dim={})", start_dim_, end_dim_);
}

Unflatten::Unflatten(int64_t dim, std::vector<int64_t> sizes)
    : dim_(dim), sizes_(std::move(sizes)) {}

trace::Tensor Unflatten::forward(const trace::Tensor& x) {
  const int64_t r = x.rank(), d = dim_ < 0 ? dim_ + r : dim_;
  if (d < 0 || d >= r)
    fail("{}: dim {} out of range for {}", repr(), dim_, tlaloc::to_string(x.shape()));
  int64_t prod = 1;
  for (int64_t s : sizes_) prod *= s;
  if (prod != x.dim(d))
    fail("{}: sizes multiply to {}, but dim {} of {} is {}", repr(), prod, dim_,
         tlaloc::to_string(x.shape()), x.dim(d));
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < r; ++i) {
    if (i == d)
      shape.insert(shape.end(), sizes_.begin(), sizes_.end());
    else
      shape.push_back(x.dim(i));
  }
  return trace::reshape(x, shape);
}

std::string Unflatten::repr() const {
  std::string sizes = sizes_.size() == 1 ? fmt::format("({},)", sizes_[0])
                                         : fmt::format("({})", fmt::join(sizes_, ", "));
  return fmt::format("Unflatten(dim={}, unflattened_size={})", dim_, sizes);
}

}  // namespace tlaloc::nn
