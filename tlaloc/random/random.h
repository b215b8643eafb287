// Random draws from threefry2x32 keys (key.h), matching jax.random.
//
// Matches JAX 0.5-0.7 jax/_src/random.py (bits, uniform, normal, truncated_normal, bernoulli,
// randint, permutation / _shuffle, gumbel, categorical) on top of jax/_src/prng.py's
// random_bits. Every function takes a Mode (key.h): Mode::partitionable is JAX's default since
// jax 0.5.0 (jax_threefry_partitionable = True), Mode::legacy is JAX before 0.5.0; the two
// give different values for the same key.
//
// Exactness: bits, uniform, bernoulli, randint, permutation are bit-exact with JAX for f32 /
// f64 / s32 / u32 (uniform scales in the dtype as JAX does: x * (maxval - minval) + minval,
// then max(minval, .)). normal, truncated_normal, gumbel and categorical apply
// XLA's erf_inv polynomial (Giles 2010, as XLA's ErfInv32 / ErfInv64) and log / erf from the C
// library, so they agree with JAX to a few ulp: JAX's own values for these differ between its
// CPU and GPU backends, whose log1p / log / erf differ. bf16 / f16 round after every operation;
// XLA may keep excess precision there, so those agree to within an ulp.
//
// Shapes are any rank; values are laid out row-major; a scalar draw has Shape{}.
// Errors: tlaloc::Error for a dtype a function does not accept (named with the function).
#pragma once

#include <cstdint>
#include <vector>

#include "tlaloc/random/key.h"

namespace tlaloc::random {

// jax.random.bits(key, shape, uint32): u32 [shape].
Array bits(Key k, const Shape& shape, Mode mode = Mode::partitionable);

// jax.random.uniform: values in [minval, maxval) of a float dtype (f32, f64, bf16, f16).
// The unit draw keeps the top mantissa-width bits of the raw stream (bf16 draws 8-bit, f16
// 16-bit, f32 32-bit, f64 64-bit values, as JAX does): (bits >> (width - nmant)) * 2^-nmant.
Array uniform(Key k, const Shape& shape, DType dtype = DType::f32, double minval = 0.0,
              double maxval = 1.0, Mode mode = Mode::partitionable);

// jax.random.normal: sqrt(2) * erf_inv(u), u = uniform(nextafter(-1, 0), 1) in the dtype.
Array normal(Key k, const Shape& shape, DType dtype = DType::f32, Mode mode = Mode::partitionable);

// jax.random.truncated_normal(key, lower, upper, shape, dtype): standard normal restricted to
// the open interval (lower, upper): sqrt(2) * erf_inv(uniform(erf(lower / sqrt2),
// erf(upper / sqrt2))), clipped to [nextafter(lower, +inf), nextafter(upper, -inf)].
Array truncated_normal(Key k, double lower, double upper, const Shape& shape,
                       DType dtype = DType::f32, Mode mode = Mode::partitionable);

// jax.random.bernoulli(key, p, shape): i1 [shape], uniform(f32) < float(p).
Array bernoulli(Key k, double p, const Shape& shape, Mode mode = Mode::partitionable);

// jax.random.randint(key, shape, minval, maxval, dtype): integers in [minval, maxval) for dtype
// s32 or u32. minval / maxval are clipped to the dtype's range first; maxval <= minval gives
// minval. Built from two 32-bit draws of split(key) (JAX's bias-reducing "double bits").
Array randint(Key k, const Shape& shape, int64_t minval, int64_t maxval, DType dtype = DType::s32,
              Mode mode = Mode::partitionable);

// jax.random.permutation(key, n): s32 [n], a shuffle of 0..n-1. JAX's _shuffle: ceil(3 ln n /
// ln(2^32 - 1)) rounds, each splitting the key and stable-sorting by fresh 32-bit keys (2
// rounds for n = 60000). Throws tlaloc::Error for n < 0 or n > 2^31 - 1.
Array permutation(Key k, int64_t n, Mode mode = Mode::partitionable);
// The same permutation as a vector, for shuffling a dataset's row order.
std::vector<int32_t> permutation_indices(Key k, int64_t n, Mode mode = Mode::partitionable);
// jax.random.permutation(key, x) with axis 0, independent=False: the rows of x [n, ...] in the
// order permutation(key, n). Throws tlaloc::Error for a scalar x.
Array permutation(Key k, const Array& x, Mode mode = Mode::partitionable);

// jax.random.gumbel(key, shape, dtype): -log(-log(uniform(tiny, 1))) for f32 / f64.
Array gumbel(Key k, const Shape& shape, DType dtype = DType::f32, Mode mode = Mode::partitionable);

// jax.random.categorical(key, logits, axis=-1): logits f32 / f64 [..., n] -> s32 [...], the
// argmax over the last axis of gumbel(key, logits.shape) + logits (first index on ties).
// Throws tlaloc::Error for a scalar or empty last axis.
Array categorical(Key k, const Array& logits, Mode mode = Mode::partitionable);

// XLA's inverse error function (Giles, "Approximating the erfinv function", GPU Gems 2010):
// erf_inv32 is XLA's ErfInv32 in f32 arithmetic, erf_inv64 XLA's ErfInv64; erf_inv(+-1) = +-inf.
float erf_inv32(float x);
double erf_inv64(double x);

}  // namespace tlaloc::random
