#include "tlaloc/random/initializers.h"

#include <cmath>

#include "tlaloc/random/rounding.h"

namespace tlaloc::random {
namespace {

using detail::round_to;

int64_t axis_index(const Shape& shape, int64_t axis, const char* what) {
  const int64_t r = shape.rank();
  if (axis < -r || axis >= r)
    fail("initializers: {} {} out of range for a weight of shape {}", what, axis, to_string(shape));
  return axis < 0 ? axis + r : axis;
}

// x * s elementwise in x's dtype (s already a value of that dtype).
Array scaled(const Array& x, double s) {
  auto v = x.to_doubles();
  for (double& e : v) e = round_to(x.dtype(), e * s);
  return Array::from_doubles(x.dtype(), x.shape(), v);
}

}  // namespace

Fans compute_fans(const Shape& shape, int64_t in_axis, int64_t out_axis) {
  if (shape.rank() < 2)
    fail("initializers: can't compute fans of a weight of shape {}; it must be at least 2-D",
         to_string(shape));
  const double in_size = double(shape[axis_index(shape, in_axis, "in_axis")]);
  const double out_size = double(shape[axis_index(shape, out_axis, "out_axis")]);
  const double receptive = double(shape.numel()) / in_size / out_size;
  return {in_size * receptive, out_size * receptive};
}

Array variance_scaling(Key k, const Shape& shape, double scale, FanMode mode,
                       Distribution distribution, DType dtype, Mode prng, int64_t in_axis,
                       int64_t out_axis) {
  if (!is_floating(dtype))
    fail("initializers::variance_scaling: dtype must be a float dtype, got {}", name(dtype));
  const Fans f = compute_fans(shape, in_axis, out_axis);
  const double den = mode == FanMode::fan_in    ? f.fan_in
                     : mode == FanMode::fan_out ? f.fan_out
                                                : (f.fan_in + f.fan_out) / 2;
  if (!(den > 0))
    fail("initializers::variance_scaling: zero fan for a weight of shape {}", to_string(shape));
  const double variance = round_to(dtype, scale / den);
  switch (distribution) {
    case Distribution::truncated_normal: {
      const double stddev = round_to(
          dtype, round_to(dtype, std::sqrt(variance)) / round_to(dtype, .87962566103423978));
      return scaled(truncated_normal(k, -2.0, 2.0, shape, dtype, prng), stddev);
    }
    case Distribution::normal:
      return scaled(normal(k, shape, dtype, prng), round_to(dtype, std::sqrt(variance)));
    case Distribution::uniform: {
      const double s = round_to(dtype, std::sqrt(round_to(dtype, 3.0 * variance)));
      return scaled(uniform(k, shape, dtype, -1.0, 1.0, prng), s);
    }
  }
  fail("initializers::variance_scaling: unknown distribution");
}

Array lecun_normal(Key k, const Shape& shape, DType dtype, Mode prng) {
  return variance_scaling(k, shape, 1.0, FanMode::fan_in, Distribution::truncated_normal, dtype,
                          prng);
}
Array lecun_uniform(Key k, const Shape& shape, DType dtype, Mode prng) {
  return variance_scaling(k, shape, 1.0, FanMode::fan_in, Distribution::uniform, dtype, prng);
}
Array glorot_normal(Key k, const Shape& shape, DType dtype, Mode prng) {
  return variance_scaling(k, shape, 1.0, FanMode::fan_avg, Distribution::truncated_normal, dtype,
                          prng);
}
Array glorot_uniform(Key k, const Shape& shape, DType dtype, Mode prng) {
  return variance_scaling(k, shape, 1.0, FanMode::fan_avg, Distribution::uniform, dtype, prng);
}
Array he_normal(Key k, const Shape& shape, DType dtype, Mode prng) {
  return variance_scaling(k, shape, 2.0, FanMode::fan_in, Distribution::truncated_normal, dtype,
                          prng);
}
Array he_uniform(Key k, const Shape& shape, DType dtype, Mode prng) {
  return variance_scaling(k, shape, 2.0, FanMode::fan_in, Distribution::uniform, dtype, prng);
}

Array zeros(const Shape& shape, DType dtype) { return Array(dtype, shape); }
Array ones(const Shape& shape, DType dtype) { return Array::filled(dtype, shape, 1.0); }

Array torch_kaiming_uniform(Key k, const Shape& shape, double a, DType dtype, Mode prng) {
  if (shape.rank() < 2)
    fail(
        "initializers::torch_kaiming_uniform: fan in can not be computed for a weight of "
        "shape {} (fewer than 2 dimensions)",
        to_string(shape));
  double fan_in = 1;  // shape[1] * prod(shape[2:])
  for (int64_t i = 1; i < shape.rank(); ++i) fan_in *= double(shape[i]);
  if (!(fan_in > 0))
    fail("initializers::torch_kaiming_uniform: zero fan_in for a weight of shape {}",
         to_string(shape));
  // torch.nn.init.calculate_gain("leaky_relu", a) and kaiming_uniform_, in double as Python.
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = std::sqrt(3.0) * (gain / std::sqrt(fan_in));
  return uniform(k, shape, dtype, -bound, bound, prng);
}

Array torch_linear_weight(Key k, int64_t out_features, int64_t in_features, DType dtype,
                          Mode prng) {
  return torch_kaiming_uniform(k, Shape{out_features, in_features}, std::sqrt(5.0), dtype, prng);
}

Array torch_linear_bias(Key k, int64_t out_features, int64_t in_features, DType dtype, Mode prng) {
  if (out_features < 0 || in_features < 0)
    fail("initializers::torch_linear_bias: negative size ({}, {})", out_features, in_features);
  const double bound = in_features > 0 ? 1.0 / std::sqrt(double(in_features)) : 0.0;
  return uniform(k, Shape{out_features}, dtype, -bound, bound, prng);
}

}  // namespace tlaloc::random
