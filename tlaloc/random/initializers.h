// Weight initialisers: jax.nn.initializers (bit-exact as random.h's draws are) and PyTorch's
// default nn.Linear initialisation (its distribution, drawn from threefry bits).
//
// JAX: jax/_src/nn/initializers.py (JAX 0.4-0.7). Fans follow _compute_fans: for a weight of
// rank >= 2 with input axis in_axis and output axis out_axis (defaults -2 and -1, i.e. a JAX
// kernel [..., in, out]), receptive = numel / shape[in_axis] / shape[out_axis], fan_in =
// shape[in_axis] * receptive, fan_out = shape[out_axis] * receptive. variance = scale / fan
// (fan_avg: (fan_in + fan_out) / 2) rounded to the dtype, then
//   truncated_normal: truncated_normal(-2, 2) * (sqrt(variance) / 0.87962566103423978)
//   normal:           normal * sqrt(variance)
//   uniform:          uniform(-1, 1) * sqrt(3 * variance)
// each multiplication in the dtype. Errors: tlaloc::Error for rank < 2, an axis out of range,
// a zero fan, or a non-float dtype.
#pragma once

#include "tlaloc/random/random.h"

namespace tlaloc::random {

enum class FanMode : uint8_t { fan_in, fan_out, fan_avg };
enum class Distribution : uint8_t { truncated_normal, normal, uniform };

struct Fans {
  double fan_in = 0;
  double fan_out = 0;
};
// JAX's _compute_fans (axes may be negative).
Fans compute_fans(const Shape& shape, int64_t in_axis = -2, int64_t out_axis = -1);

// jax.nn.initializers.variance_scaling(scale, mode, distribution, in_axis, out_axis)(key, shape,
// dtype).
Array variance_scaling(Key k, const Shape& shape, double scale, FanMode mode,
                       Distribution distribution, DType dtype = DType::f32,
                       Mode prng = Mode::partitionable, int64_t in_axis = -2,
                       int64_t out_axis = -1);

// The named specialisations (all with in_axis -2, out_axis -1):
// lecun_normal: (1, fan_in, truncated_normal); lecun_uniform: (1, fan_in, uniform);
// glorot (xavier) normal: (1, fan_avg, truncated_normal); glorot uniform: (1, fan_avg, uniform);
// he (kaiming) normal: (2, fan_in, truncated_normal); he uniform: (2, fan_in, uniform).
Array lecun_normal(Key k, const Shape& shape, DType dtype = DType::f32,
                   Mode prng = Mode::partitionable);
Array lecun_uniform(Key k, const Shape& shape, DType dtype = DType::f32,
                    Mode prng = Mode::partitionable);
Array glorot_normal(Key k, const Shape& shape, DType dtype = DType::f32,
                    Mode prng = Mode::partitionable);
Array glorot_uniform(Key k, const Shape& shape, DType dtype = DType::f32,
                     Mode prng = Mode::partitionable);
Array he_normal(Key k, const Shape& shape, DType dtype = DType::f32,
                Mode prng = Mode::partitionable);
Array he_uniform(Key k, const Shape& shape, DType dtype = DType::f32,
                 Mode prng = Mode::partitionable);
// jax.nn.initializers.zeros / ones (no key).
Array zeros(const Shape& shape, DType dtype = DType::f32);
Array ones(const Shape& shape, DType dtype = DType::f32);

// --- PyTorch-style (torch.nn.init, torch 1.13-2.x) ---------------------------------------------
// The values come from threefry bits (uniform above), NOT from torch's generator: a model
// initialised here has PyTorch's distribution, not PyTorch's numbers.
//
// torch.nn.init.kaiming_uniform_(w, a, mode="fan_in", nonlinearity="leaky_relu") for a PyTorch
// weight layout [out, in, *kernel]: fan_in = shape[1] * prod(shape[2:]),
// bound = sqrt(3) * sqrt(2 / (1 + a^2)) / sqrt(fan_in), w ~ U(-bound, bound).
Array torch_kaiming_uniform(Key k, const Shape& shape, double a, DType dtype = DType::f32,
                            Mode prng = Mode::partitionable);
// nn.Linear(in_features, out_features).reset_parameters(): weight [out, in] =
// kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)) up to rounding.
Array torch_linear_weight(Key k, int64_t out_features, int64_t in_features,
                          DType dtype = DType::f32, Mode prng = Mode::partitionable);
// nn.Linear bias [out] ~ U(-1/sqrt(in_features), 1/sqrt(in_features)) (0 bound if in = 0).
Array torch_linear_bias(Key k, int64_t out_features, int64_t in_features, DType dtype = DType::f32,
                        Mode prng = Mode::partitionable);

}  // namespace tlaloc::random
