// In-program random numbers: threefry2x32 written as IR ops (u32 add, xor, shift_left,
// shift_right_logical, or, plus iota / slice / concatenate / reshape / convert), so a compiled
// step can draw dropout masks or shuffles on its lane. For the same key, shape and mode the
// values equal the host functions' of key.h / random.h bit for bit (and so JAX's; see there).
//
// A key in a program is a u32[2] tensor [hi, lo] (key_data(k) as an input, or key_constant).
// Every function appends nodes to the tensors' capture (call them inside trace::capture or a
// trace::BuilderScope). In-program draws are limited to fewer than 2^32 elements.
// Errors: tlaloc::Error naming the function and the offending type (a key that is not u32[2],
// data that is not a u32 / s32 scalar, a negative count).
#pragma once

#include <utility>

#include "tlaloc/random/key.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::random {

using trace::Tensor;

// The key as a u32[2] constant of the current capture (prefer an input so one executable
// serves every key).
Tensor key_constant(Key k);

// Threefry-2x32-20 of counters (x0, x1) under key words (k0, k1); all u32, broadcast as NumPy.
// Returns the two output words.
std::pair<Tensor, Tensor> threefry2x32(const Tensor& k0, const Tensor& k1, const Tensor& x0,
                                       const Tensor& x1);

// fold_in(key, data) as key.h: data is a u32 or s32 scalar tensor (s32 bits reinterpreted).
Tensor fold_in(const Tensor& key, const Tensor& data);
// split(key, n) as key.h: u32[n, 2], row i = key i.
Tensor split(const Tensor& key, int64_t n, Mode mode = Mode::partitionable);
// bits(key, shape) as random.h: u32 [shape].
Tensor bits(const Tensor& key, const Shape& shape, Mode mode = Mode::partitionable);
// uniform(key, shape, f32, minval, maxval) as random.h: f32 [shape].
Tensor uniform(const Tensor& key, const Shape& shape, double minval = 0.0, double maxval = 1.0,
               Mode mode = Mode::partitionable);
// bernoulli(key, p, shape) as random.h: i1 [shape], uniform < p. A dropout keep-mask with
// keep probability p is bernoulli(fold_in(key, step), p, shape).
Tensor bernoulli(const Tensor& key, double p, const Shape& shape, Mode mode = Mode::partitionable);
// randint(key, shape, minval, maxval) as random.h (jax.random.randint): s32 or u32 [shape] in
// [minval, maxval), the bounds clamped to the dtype as there. A batch of window starts drawn on
// the lane is randint(fold_in(key, step), {batch}, 0, n - context).
Tensor randint(const Tensor& key, const Shape& shape, int64_t minval, int64_t maxval,
               DType dtype = DType::s32, Mode mode = Mode::partitionable);

}  // namespace tlaloc::random
