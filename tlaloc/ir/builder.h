// Builder: appends verified nodes to a Function. Every method infers the result type with the
// verifier and throws tlaloc::Error naming the op and the shapes/dtypes that disagree.
// Semantics are StableHLO's (https://openxla.org/stablehlo/spec); narrowings are noted.
#pragma once

#include <span>

#include "tlaloc/ir/ir.h"

namespace tlaloc::ir {

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};

class Builder {
 public:
  explicit Builder(std::string name = "main");
  // Continue building on an existing function (its inputs and nodes are kept; results cleared
  // by build()).
  explicit Builder(Function f);

  // A new input; inputs are numbered in the order they are added.
  ValueId parameter(TensorType t, std::string name = "");
  ValueId constant(Array value);
  // Scalar (shape []) constant of `dtype`, value rounded as convert would.
  ValueId scalar(DType dtype, double value);
  // Result element i = index along `dimension` (s32, u32 or float).
  ValueId iota(TensorType t, int64_t dimension);
  ValueId convert(ValueId x, DType to);
  // Result dim broadcast_dimensions[i] takes operand dim i (size equal, or operand size 1).
  ValueId broadcast_in_dim(ValueId x, Shape shape, std::vector<int64_t> broadcast_dimensions);
  ValueId reshape(ValueId x, Shape shape);
  // Result dim i = operand dim permutation[i].
  ValueId transpose(ValueId x, std::vector<int64_t> permutation);
  ValueId slice(ValueId x, std::vector<int64_t> start, std::vector<int64_t> limit,
                std::vector<int64_t> strides = {});
  ValueId concatenate(std::vector<ValueId> xs, int64_t dimension);
  // Narrowing: low / high / interior padding must be >= 0.
  ValueId pad(ValueId x, ValueId padding_value, std::vector<int64_t> low, std::vector<int64_t> high,
              std::vector<int64_t> interior = {});
  // start_indices: one s32 scalar per dimension, clamped to [0, dim - size] (StableHLO).
  ValueId dynamic_slice(ValueId x, std::vector<ValueId> start_indices,
                        std::vector<int64_t> slice_sizes);
  ValueId dynamic_update_slice(ValueId x, ValueId update, std::vector<ValueId> start_indices);
  // Row gather (narrowed StableHLO gather): x [N, d...], indices s32 [i...] -> [i..., d...].
  // Indices are clamped to [0, N-1] as StableHLO clamps gather start indices.
  ValueId gather(ValueId x, ValueId indices);
  // Row scatter-add: x [N, d...], indices s32 [i...], updates [i..., d...] -> x with
  // updates added to rows; out-of-range rows are skipped (StableHLO scatter semantics).
  ValueId scatter(ValueId x, ValueId indices, ValueId updates);
  // Composite attention (FlashAttention, Dao et al. 2022): q [B,Hq,S,D], k [B,Hkv,T,D],
  // v [B,Hkv,T,Dv] (f32 or f64, Hq a multiple of Hkv: query head h reads kv head h/(Hq/Hkv)),
  // key_mask i1 [B,T] (true = visible) or -1 for none. Scores s = scale·q·kᵀ; with `causal`,
  // query i sees key j only when j <= i + T - S (bottom-right aligned; top-left when S = T).
  // Result [B,Hq,S,Dv+1]: [..., :Dv] = softmax(s)·v, [..., Dv] = logsumexp(s) over visible
  // keys. A row with no visible key gives output 0 and log-sum-exp -inf.
  ValueId attention(ValueId q, ValueId k, ValueId v, ValueId key_mask, double scale, bool causal);
  // Its VJP: given out = attention(...) and d_out (same type), result [B, Hq·S·D + Hkv·T·(D+Dv)]:
  // per batch row, dq [Hq,S,D], dk [Hkv,T,D], dv [Hkv,T,Dv] flattened and concatenated.
  ValueId attention_grad(ValueId q, ValueId k, ValueId v, ValueId out, ValueId d_out,
                         ValueId key_mask, double scale, bool causal);
  // Composite layer normalization (Ba et al. 2016; torch.nn.functional.layer_norm over the last
  // dim): x [..., D] f32 / f64, weight [D], bias [D] or -1 (none). Result: x's type,
  // (x - mean) · rsqrt(var + epsilon) · weight (+ bias), mean and biased var over the last dim.
  ValueId layer_norm(ValueId x, ValueId weight, ValueId bias, double epsilon);
  // Its VJP: d_y of x's type; result [R + 2, D] (R = rows of x): d_x as [R, D], then d_weight,
  // then d_bias.
  ValueId layer_norm_grad(ValueId x, ValueId weight, ValueId d_y, double epsilon);
  // Composite softmax cross-entropy per row (torch.nn.functional.cross_entropy with
  // reduction="none"): logits [N, C] f32 / f64, labels s32 [N]; result [N] of the logits' dtype,
  // -log_softmax(logits)[label] (max-shifted; -0 for a label outside [0, C)).
  ValueId cross_entropy(ValueId logits, ValueId labels);
  // Its VJP: d_loss [N]; result [N, C] = d_loss · (softmax(logits) - one_hot(labels)), rows
  // whose label is outside [0, C) 0 (their loss is constant).
  ValueId cross_entropy_grad(ValueId logits, ValueId labels, ValueId d_loss);
  // Composite GELU, tanh approximation (Hendrycks & Gimpel 2016; torch.nn.GELU(approximate=
  // "tanh")): x f32 / f64, any shape; result x's type, 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
  ValueId gelu(ValueId x);
  // Its VJP from the forward's result y = gelu(x), d_y (both x's type): 1 + t = q = 2y / x
  // (1 where |x| < 2^-60), result x's type d_y·(0.5q + 0.5x·q(2 - q)·√(2/π)(1 + 3·0.044715x²)),
  // the derivative 0.5(1 + t) + 0.5x(1 - t²)·du/dx with no tanh to recompute. Its own VJP
  // (second derivatives) takes y to be gelu(x): y gets none, x all of d_y·gelu''(x).
  ValueId gelu_grad(ValueId x, ValueId y, ValueId d_y);
  // Result dims: batch dims, lhs free dims, rhs free dims (StableHLO order). Float dtypes.
  ValueId dot_general(ValueId lhs, ValueId rhs, DotDims dims);
  // Removes `dimensions`; sum starts at 0, max at -inf, min at +inf (integer: type limits).
  ValueId reduce(ValueId x, ReduceKind kind, std::vector<int64_t> dimensions);
  ValueId unary(Op op, ValueId x);
  ValueId binary(Op op, ValueId a, ValueId b);
  ValueId compare(ValueId a, ValueId b, Comparison direction);
  // pred is i1 of the operands' shape or a scalar.
  ValueId select(ValueId pred, ValueId on_true, ValueId on_false);
  // min / max are scalars or of the operand's shape.
  ValueId clamp(ValueId min, ValueId x, ValueId max);

  // Generic append: verifies and fills n.type where inferable; returns the new value.
  ValueId add(Node n);

  // The reference is invalidated when a node is added: copy it first if you keep it.
  const TensorType& type(ValueId v) const { return f_.type(v); }
  const Function& function() const { return f_; }
  // Finishes the function with these results.
  Function build(std::vector<ValueId> results, std::vector<std::string> output_names = {});

 private:
  Function f_;
};

// Infers the result type of `op` from operand types and attrs; `declared` supplies what cannot
// be inferred (iota: all; convert: dtype; reshape and broadcast_in_dim: shape; constant: from
// attrs.value). Throws tlaloc::Error naming the op and the disagreeing shapes/dtypes, or the
// result type when its byte size overflows 2^63 - 1 (checked_nbytes, core/array.h).
TensorType infer_type(Op op, std::span<const TensorType> operands, const Attrs& attrs,
                      const TensorType& declared);

// Checks a whole function: operands defined before use, every node's type equals its
// inferred type, inputs are parameter nodes, results and aliases in range, aliased types equal.
void verify(const Function& f);

}  // namespace tlaloc::ir
