// Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary
// Position Embedding") as HuggingFace transformers computes them for Llama:
// modeling_rope_utils.py (_compute_default_rope_parameters, _compute_llama3_parameters) for the
// frequencies, modeling_llama.py (LlamaRotaryEmbedding, rotate_half, apply_rotary_pos_emb) for
// the rotation. The angle of position p and frequency i is p · inv_freq[i]; a pair of features
// (a, b) becomes (a·cos − b·sin, b·cos + a·sin).
#pragma once

#include <cstdint>
#include <optional>

#include "tlaloc/core/array.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::nn {

// The "llama3" frequency scaling (HF rope_scaling {"rope_type": "llama3", ...}; Llama 3.1):
// frequencies whose wavelength exceeds original_max_position_embeddings / low_freq_factor are
// divided by factor, those below original / high_freq_factor kept, and those between
// interpolated smoothly. Defaults: Llama 3.1's values.
struct Llama3RopeScaling {
  double factor = 8, low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

// Which features form a rotated pair. rotate_half: (i, i + D/2), HF's layout (rotate_half);
// interleaved: (2i, 2i + 1), the original Llama / Meta layout (complex multiplication). A model
// in one layout equals the other with q_proj / k_proj rows permuted (rope_permute).
enum class RopeLayout { rotate_half, interleaved };

// inv_freq [dim / 2] = 1 / theta^(2i / dim), then the llama3 scaling when given, in `dtype` (f32
// or f64) with HF's operations in HF's order: in f32 these are torch's f32 operations, so the
// values are HF's up to the last ulp of pow. Throws tlaloc::Error for an odd or non-positive
// dim, theta <= 0, another dtype, or a scaling with factor <= 0 or high_freq_factor <=
// low_freq_factor.
Array rope_inv_freq(int64_t dim, double theta, const std::optional<Llama3RopeScaling>& scaling,
                    DType dtype = DType::f32);

// cos and sin of the angles p · inv_freq[i] for positions p = 0..length-1: [length, dim / 2]
// each, of inv_freq's dtype. The angle is rounded to that dtype (as HF's f32 product), and its
// cos / sin computed in double and rounded. Throws tlaloc::Error for length < 1.
struct RopeTables {
  Array cos, sin;
};
RopeTables rope_tables(const Array& inv_freq, int64_t length);

// Rotates x [..., S, H, D] (D even) by cos, sin [S, D / 2] (x's dtype): for every head h and
// pair (a, b) of `layout` at position s, (a·cos[s, i] − b·sin[s, i], b·cos[s, i] + a·sin[s, i]).
// f32 / f64: the rope composite (composites/rope.cpp: one pass; its gradient is the rotation by
// −sin); other float dtypes: its decomposition in plain ops. Throws tlaloc::Error naming the
// shapes when they disagree.
trace::Tensor apply_rope(const trace::Tensor& x, const trace::Tensor& cos, const trace::Tensor& sin,
                         RopeLayout layout = RopeLayout::rotate_half);

// The rows of a q_proj / k_proj weight (or bias) [heads · D, ...] in the interleaved layout
// reordered for rotate-half: HF's convert_llama_weights_to_hf.py permute(w, n_heads), i.e.
// w.view(heads, D / 2, 2, rest).transpose(1, 2).reshape(...). rope_unpermute is its inverse.
// Throws tlaloc::Error when the first dim is not heads times an even number.
Array rope_permute(const Array& w, int64_t heads);
Array rope_unpermute(const Array& w, int64_t heads);

}  // namespace tlaloc::nn
