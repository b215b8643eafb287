#include "tlaloc/nn/batch_norm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "tlaloc/composites/composites.h"

namespace tlaloc::nn {

using trace::Tensor;

BatchNorm::BatchNorm(const char* kind, std::vector<int64_t> ranks, int64_t num_features, double eps,
                     std::optional<double> momentum, bool affine, bool track_running_stats)
    : kind_(kind),
      ranks_(std::move(ranks)),
      c_(num_features),
      eps_(eps),
      momentum_(momentum),
      affine_(affine),
      track_(track_running_stats) {
  if (c_ < 1) fail("{}: num_features {} must be >= 1", kind_, c_);
  if (!(eps_ > 0) || !std::isfinite(eps_)) fail("{}: eps {} must be finite and > 0", kind_, eps_);
  if (momentum_ && !(*momentum_ >= 0 && *momentum_ <= 1))
    fail("{}: momentum {} must be in [0, 1] (or None)", kind_, *momentum_);
  if (affine_) {
    register_parameter("weight", Array::filled(DType::f32, Shape{c_}, 1.0));
    register_parameter("bias", Array::filled(DType::f32, Shape{c_}, 0.0));
  }
  if (track_) {
    register_buffer("running_mean", Array::filled(DType::f32, Shape{c_}, 0.0));
    register_buffer("running_var", Array::filled(DType::f32, Shape{c_}, 1.0));
    register_buffer("num_batches_tracked", Array::filled(DType::s32, Shape{}, 0.0));
  }
}

void BatchNorm::reset_parameters(const random::Key&) {
  if (affine_) {
    parameter("weight").value = Array::filled(DType::f32, Shape{c_}, 1.0);
    parameter("bias").value = Array::filled(DType::f32, Shape{c_}, 0.0);
  }
  if (track_) {
    buffer_slot("running_mean").value = Array::filled(DType::f32, Shape{c_}, 0.0);
    buffer_slot("running_var").value = Array::filled(DType::f32, Shape{c_}, 1.0);
    buffer_slot("num_batches_tracked").value = Array::filled(DType::s32, Shape{}, 0.0);
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  bool rank_ok = false;
  for (int64_t r : ranks_) rank_ok = rank_ok || x.rank() == r;
  if (!rank_ok || x.dim(1) != c_) {
    std::vector<std::string> want;
    for (int64_t r : ranks_)
      want.push_back(r == 2 ? "[N, C]" : r == 3 ? "[N, C, L]" : "[N, C, H, W]");
    fail("{}({}): input {} is not {} with C = {}", kind_, c_, ir::to_string(x.type()),
         fmt::join(want, " or "), c_);
  }
  if (!is_floating(x.dtype()))
    fail("{}: input must be floating, got {}", kind_, ir::to_string(x.type()));
  const bool half = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  const DType ct = half ? DType::f32 : x.dtype();
  Tensor xf = half ? trace::astype(x, ct) : x;
  std::vector<int64_t> keep(size_t(x.rank()), 1);  // [1, C, 1...]
  keep[1] = c_;
  const int64_t n = x.shape().numel() / c_;  // values per channel
  auto as_ct = [&](const Tensor& v) { return v.dtype() == ct ? v : trace::astype(v, ct); };
  std::optional<Tensor> w, b;
  if (affine_) {
    w = as_ct(param("weight"));
    b = as_ct(param("bias"));
  }
  if (training() || !track_) {
    if (training() && n == 1)
      fail("{}: expected more than 1 value per channel when training, got input {}", kind_,
           ir::to_string(x.type()));
    composites::BatchNormResult r = composites::batch_norm(xf, w, b, eps_);
    if (training() && track_) {
      Tensor nbt = buffer("num_batches_tracked") + trace::scalar(1, DType::s32);
      set_buffer("num_batches_tracked", nbt);
      Tensor f =
          momentum_ ? trace::scalar(*momentum_, ct) : trace::scalar(1, ct) / trace::astype(nbt, ct);
      Tensor one_minus = trace::scalar(1, ct) - f;
      auto update = [&](const char* name, const Tensor& stat) {
        Tensor old = buffer(name);
        Tensor next = f * stat + one_minus * as_ct(old);
        set_buffer(name, next.dtype() == old.dtype() ? next : trace::astype(next, old.dtype()));
      };
      update("running_mean", r.mean);
      update("running_var", r.var * (double(n) / double(n - 1)));  // unbiased
    }
    return half ? trace::astype(r.y, x.dtype()) : r.y;
  }
  // Eval mode: the running estimates.
  const Tensor inv = trace::rsqrt(as_ct(buffer("running_var")) + eps_);
  Tensor y = (xf - trace::reshape(as_ct(buffer("running_mean")), keep)) * trace::reshape(inv, keep);
  if (affine_) y = y * trace::reshape(*w, keep) + trace::reshape(*b, keep);
  return half ? trace::astype(y, x.dtype()) : y;
}

std::string BatchNorm::repr() const {
  std::string m = momentum_ ? fmt::format("{}", *momentum_) : "None";
  return fmt::format("{}({}, eps={}, momentum={}, affine={}, track_running_stats={})", kind_, c_,
                     eps_, m, affine_ ? "True" : "False", track_ ? "True" : "False");
}

}  // namespace tlaloc::nn
