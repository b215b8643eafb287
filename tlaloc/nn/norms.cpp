#include "tlaloc/nn/norms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace tlaloc::nn {

using trace::Tensor;

namespace {

double machine_eps(DType t) {
  switch (t) {
    case DType::f64:
      return 0x1p-52;
    case DType::bf16:
      return 0x1p-7;
    case DType::f16:
      return 0x1p-10;
    default:
      return 0x1p-23;
  }
}

}  // namespace

RMSNorm::RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps,
                 bool elementwise_affine)
    : shape_(std::move(normalized_shape)), eps_(eps), affine_(elementwise_affine) {
  bool ok = !shape_.empty();
  for (int64_t d : shape_) ok = ok && d > 0;
  if (!ok)
    fail("RMSNorm: normalized_shape ({}) must be non-empty and positive", fmt::join(shape_, ", "));
  if (eps && !(*eps > 0)) fail("RMSNorm: eps {} must be positive", *eps);
  if (affine_) register_parameter("weight", Array::filled(DType::f32, Shape{shape_}, 1.0));
}

Tensor RMSNorm::forward(const Tensor& x) {
  const int64_t n = int64_t(shape_.size());
  bool ok = x.rank() >= n;
  for (int64_t i = 0; ok && i < n; ++i) ok = x.dim(x.rank() - n + i) == shape_[size_t(i)];
  if (!ok)
    fail("RMSNorm(({})): input {} does not end in those dims", fmt::join(shape_, ", "),
         ir::to_string(x.type()));
  if (!is_floating(x.dtype()))
    fail("RMSNorm: input must be floating, got {}", ir::to_string(x.type()));
  const bool half = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  Tensor xf = half ? trace::astype(x, DType::f32) : x;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < n; ++i) axes.push_back(x.rank() - n + i);
  Tensor ms = trace::mean(trace::square(xf), axes, true);
  Tensor y = xf * trace::rsqrt(ms + eps_.value_or(machine_eps(x.dtype())));
  if (affine_) {
    const Tensor& w = param("weight");
    y = y * (w.dtype() == y.dtype() ? w : trace::astype(w, y.dtype()));
  }
  return half ? trace::astype(y, x.dtype()) : y;
}

std::string RMSNorm::repr() const {
  std::string eps = eps_ ? fmt::format("{}", *eps_) : "None";
  std::string dims = shape_.size() == 1 ? fmt::format("({},)", shape_[0])
                                        : fmt::format("({})", fmt::join(shape_, ", "));
  return fmt::format("RMSNorm({}, eps={}, elementwise_affine={})", dims, eps,
                     affine_ ? "True" : "False");
}

void RMSNorm::reset_parameters(const random::Key&) {
  if (affine_) parameter("weight").value = Array::filled(DType::f32, Shape{shape_}, 1.0);
}

}  // namespace tlaloc::nn
