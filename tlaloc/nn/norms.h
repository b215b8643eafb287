// RMSNorm (torch.nn.RMSNorm semantics; Zhang & Sennrich 2019, "Root Mean Square Layer
// Normalization"). LayerNorm lives in transformer.h.
#pragma once

#include <optional>
#include <vector>

#include "tlaloc/nn/module.h"

namespace tlaloc::nn {

// y = x / sqrt(mean(x²) + eps) · weight, the mean over the last normalized_shape.size() axes of
// x [..., normalized_shape...]; weight [normalized_shape] (ones) when elementwise_affine, no
// bias. eps unset = the machine epsilon of the type it computes in, as PyTorch's implementation
// takes it: 2^-23 for f32, bf16 and f16 (bf16 / f16 inputs are normalised in f32 and converted
// back), 2^-52 for f64. There is no
// cancellation to guard against (no mean is subtracted, the squares are non-negative), so the
// f32 mean of squares is accurate to a few ulp for rows with a large mean such as
// [40000, 40001, 40002, 40003]; |x| above ~1.8e19 overflows the f32 square, as in PyTorch.
// Throws tlaloc::Error for an empty or non-positive normalized_shape, eps <= 0 or inf, or an input
// whose trailing dims differ (naming both).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  explicit RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true)
      : RMSNorm(std::vector<int64_t>{dim}, eps, elementwise_affine) {}
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;
  void reset_parameters(const random::Key& key) override;

 private:
  std::vector<int64_t> shape_;
  std::optional<double> eps_;
  bool affine_;
};

}  // namespace tlaloc::nn
