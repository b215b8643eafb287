// Batch normalization (Ioffe & Szegedy 2015, "Batch Normalization: Accelerating Deep Network
// Training by Reducing Internal Covariate Shift") with torch.nn.BatchNorm1d / BatchNorm2d's
// semantics, names and defaults.
#pragma once

#include <optional>

#include "tlaloc/nn/module.h"

namespace tlaloc::nn {

// Normalizes each channel (dim 1) of x over every other dim:
//   y = (x - mean) / sqrt(var + eps) * weight + bias,
// with the batch's mean and biased variance in training mode (or whenever
// track_running_stats is false), the running estimates in eval mode. Parameters (affine):
// weight [C] (ones), bias [C] (zeros). Buffers (track_running_stats): running_mean [C] (zeros),
// running_var [C] (ones), num_batches_tracked s32 [] (0; int64 in PyTorch). A training-mode
// forward gives them their new values (Module::set_buffer), PyTorch's convention:
//   running = momentum * batch_stat + (1 - momentum) * running,
// with the unbiased variance (sum / (n - 1)), and momentum None taking 1 / num_batches_tracked
// (a cumulative average). Inputs: BatchNorm1d [N, C] or [N, C, L]; BatchNorm2d [N, C, H, W];
// f32 or f64 (bf16 / f16 are normalized in f32 and converted back). Throws tlaloc::Error for
// num_features < 1, eps <= 0, momentum outside [0, 1], an input of another rank or channel
// count, and a training-mode batch with one value per channel (as PyTorch).
class BatchNorm : public Module {
 public:
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;
  void reset_parameters(const random::Key& key) override;
  int64_t num_features() const { return c_; }

 protected:
  BatchNorm(const char* kind, std::vector<int64_t> ranks, int64_t num_features, double eps,
            std::optional<double> momentum, bool affine, bool track_running_stats);

 private:
  const char* kind_;
  std::vector<int64_t> ranks_;  // input ranks accepted
  int64_t c_;
  double eps_;
  std::optional<double> momentum_;
  bool affine_, track_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", {2, 3}, num_features, eps, momentum, affine, track_running_stats) {
  }
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", {4}, num_features, eps, momentum, affine, track_running_stats) {}
};

}  // namespace tlaloc::nn
