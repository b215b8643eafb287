#include "tlaloc/nn/rope.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/ir.h"

namespace tlaloc::nn {

using trace::Tensor;

namespace {

// HF's computation in T (float: torch's f32 tensor ops, a Python scalar operand rounded to f32
// first; double: the same in f64). modeling_rope_utils.py:
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
//   wavelen = 2 * math.pi / inv_freq
//   inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
//   smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor -
//                   low_freq_factor)
//   smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor *
//                       inv_freq_llama
//   is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
//   inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
template <typename T>
std::vector<double> inv_freq(int64_t dim, double theta, const std::optional<Llama3RopeScaling>& s) {
  std::vector<double> out;
  for (int64_t i = 0; i < dim; i += 2) {
    T f = T(1) / std::pow(T(theta), T(i) / T(dim));
    if (s) {
      const double old = double(s->original_max_position_embeddings);
      const T low_wavelen = T(old / s->low_freq_factor),
              high_wavelen = T(old / s->high_freq_factor);
      const T factor = T(s->factor);
      const T wavelen = T(2 * std::numbers::pi) / f;
      const T scaled = wavelen > low_wavelen ? f / factor : f;
      const T smooth =
          (T(old) / wavelen - T(s->low_freq_factor)) / T(s->high_freq_factor - s->low_freq_factor);
      const T smoothed = (T(1) - smooth) * scaled / factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
    out.push_back(double(f));
  }
  return out;
}

}  // namespace

Array rope_inv_freq(int64_t dim, double theta, const std::optional<Llama3RopeScaling>& scaling,
                    DType dtype) {
  if (dim <= 0 || dim % 2 != 0) fail("rope: head dim {} must be positive and even", dim);
  if (!(theta > 0) || !std::isfinite(theta))
    fail("rope: rope_theta {} must be finite and positive", theta);
  if (scaling) {
    const Llama3RopeScaling& s = *scaling;
    if (!(s.factor > 0) || !std::isfinite(s.factor))
      fail("rope: llama3 factor {} must be finite and positive", s.factor);
    if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
        !std::isfinite(s.high_freq_factor))
      fail("rope: llama3 high_freq_factor {} must be greater than low_freq_factor {} > 0",
           s.high_freq_factor, s.low_freq_factor);
    if (s.original_max_position_embeddings <= 0)
      fail("rope: llama3 original_max_position_embeddings {} must be positive",
           s.original_max_position_embeddings);
  }
  if (dtype != DType::f32 && dtype != DType::f64)
    fail("rope: inv_freq dtype must be f32 or f64, got {}", name(dtype));
  std::vector<double> v = dtype == DType::f32 ? inv_freq<float>(dim, theta, scaling)
                                              : inv_freq<double>(dim, theta, scaling);
  return Array::from_doubles(dtype, Shape{dim / 2}, v);
}

RopeTables rope_tables(const Array& inv_freq, int64_t length) {
  if (length < 1) fail("rope: table length {} must be >= 1", length);
  const DType t = inv_freq.dtype();
  if (inv_freq.shape().rank() != 1 || (t != DType::f32 && t != DType::f64))
    fail("rope: inv_freq must be f32 / f64 [dim / 2], got {}",
         ir::to_string(ir::TensorType{t, inv_freq.shape()}));
  const int64_t n = inv_freq.numel();
  std::vector<double> c(size_t(length * n)), s(c.size());
  const std::vector<double> f = inv_freq.to_doubles();
  for (int64_t p = 0; p < length; ++p)
    for (int64_t i = 0; i < n; ++i) {
      // The angle as HF rounds it: position (exact) times inv_freq, in the dtype.
      const double a = t == DType::f32 ? double(float(p) * float(f[size_t(i)])) : p * f[size_t(i)];
      c[size_t(p * n + i)] = std::cos(a);
      s[size_t(p * n + i)] = std::sin(a);
    }
  return {Array::from_doubles(t, Shape{length, n}, c), Array::from_doubles(t, Shape{length, n}, s)};
}

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout) {
  const int64_t r = x.rank();
  if (r < 3 || x.dim(-1) % 2 != 0)
    fail("apply_rope: x {} must be [..., seq, heads, head_dim] with an even head_dim",
         ir::to_string(x.type()));
  const int64_t S = x.dim(-3), D = x.dim(-1), h = D / 2;
  for (const Tensor* t : {&cos, &sin})
    if (t->type() != ir::TensorType{x.dtype(), Shape{S, h}})
      fail("apply_rope: cos / sin {} must be {} [{}, {}] for x {}", ir::to_string(t->type()),
           name(x.dtype()), S, h, ir::to_string(x.type()));
  return composites::rope(x, cos, sin, layout == RopeLayout::interleaved);
}

namespace {

// Rows of w [heads · D, rest...] moved: within each head, row i of `from`'s order goes to row
// i of `to`'s; interleaved row 2j + k <-> rotate-half row k · D/2 + j.
Array permute_rows(const Array& w, int64_t heads, bool to_rotate_half) {
  const int64_t rows = w.shape().rank() >= 1 ? w.shape().dims[0] : 0;
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    fail("rope_permute: {} rows are not {} heads of an even head_dim", rows, heads);
  const int64_t D = rows / heads, half = D / 2;
  const size_t row_bytes = rows ? w.nbytes() / size_t(rows) : 0;
  Array out(w.dtype(), w.shape());
  const auto* src = static_cast<const std::byte*>(w.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t hd = 0; hd < heads; ++hd)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t inter = hd * D + 2 * j + k, rot = hd * D + k * half + j;
        const int64_t from = to_rotate_half ? inter : rot, to = to_rotate_half ? rot : inter;
        std::memcpy(dst + size_t(to) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
  return out;
}

}  // namespace

Array rope_permute(const Array& w, int64_t heads) { return permute_rows(w, heads, true); }
Array rope_unpermute(const Array& w, int64_t heads) { return permute_rows(w, heads, false); }

}  // namespace tlaloc::nn
