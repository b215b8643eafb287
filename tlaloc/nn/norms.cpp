#include "tlaloc/nn/norms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "tlaloc/composites/composites.h"

namespace tlaloc::nn {

using trace::Tensor;

namespace {

// The default eps: the machine epsilon of the type RMSNorm computes in (f32 for f32, bf16 and
// f16; f64 for f64), as PyTorch's rms_norm takes it (std::numeric_limits<opmath_t>::epsilon()).
double machine_eps(DType t) { return t == DType::f64 ? 0x1p-52 : 0x1p-23; }

}  // namespace

RMSNorm::RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps,
                 bool elementwise_affine)
    : shape_(std::move(normalized_shape)), eps_(eps), affine_(elementwise_affine) {
  bool ok = !shape_.empty();
  for (int64_t d : shape_) ok = ok && d > 0;
  if (!ok)
    fail("RMSNorm: normalized_shape ({}) must be non-empty and positive", fmt::join(shape_, ", "));
  if (eps && (!(*eps > 0) || !std::isfinite(*eps)))
    fail("RMSNorm: eps {} must be finite and positive", *eps);
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
  // The rms_norm composite over one trailing dim: the normalized dims flattened into it.
  std::vector<int64_t> rows;  // x's leading dims, then the normalized ones as one
  int64_t d = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < x.rank() - n)
      rows.push_back(x.dim(i));
    else
      d *= x.dim(i);
  }
  rows.push_back(d);
  std::optional<Tensor> w;
  if (affine_) {
    const Tensor& p = param("weight");
    w = trace::reshape(p.dtype() == xf.dtype() ? p : trace::astype(p, xf.dtype()), {d});
  }
  Tensor y =
      composites::rms_norm(trace::reshape(xf, rows), w, eps_.value_or(machine_eps(x.dtype())));
  y = trace::reshape(y, x.shape().dims);
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
