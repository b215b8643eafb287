// Builder: appends verified nodes to a Function. Every method infers the result type with the
// verifier and throws tlaloc::Error naming the op and the shapes/dtypes that disagree.
// Semantics are StableHLO's (https://openxla.org/stablehlo/spec); narrowings are noted.
#pragma once

#include <span>
#include <utility>

#include "tlaloc/ir/ir.h"

namespace tlaloc::ir {

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};

// convolution's attributes (StableHLO names). Empty vectors take the defaults for the operands'
// number of spatial dims: window_strides 1, padding (0, 0), lhs_dilation / rhs_dilation 1.
// dimension_numbers defaults to NCHW input, OIHW kernel, NCHW output; left at that default, it
// follows the operands' rank (NCW / OIW / NCW for rank 3, NCDHW / OIDHW / NCDHW for rank 5).
struct ConvOptions {
  std::vector<int64_t> window_strides;
  std::vector<std::pair<int64_t, int64_t>> padding;  // (low, high) per spatial dim; may be < 0
  std::vector<int64_t> lhs_dilation, rhs_dilation;
  ConvDimensionNumbers dimension_numbers;
  int64_t feature_group_count = 1, batch_group_count = 1;
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
  // A composite op (ir/composite.h; shapes and attributes in its record's file): appends it
  // and, when it has several results, one `result` node per result. Returns the result values.
  std::vector<ValueId> composite(Op op, std::vector<ValueId> operands,
                                 std::vector<double> params = {});
  // Result dims: batch dims, lhs free dims, rhs free dims (StableHLO order). Float dtypes.
  // `preferred`: the result's element type (bf16 / f16 operands -> f32), else the operands'.
  ValueId dot_general(ValueId lhs, ValueId rhs, DotDims dims,
                      std::optional<DType> preferred = std::nullopt);
  // Removes `dimensions`; sum starts at 0, max at -inf, min at +inf (integer: type limits).
  ValueId reduce(ValueId x, ReduceKind kind, std::vector<int64_t> dimensions);
  // StableHLO convolution of lhs (input) with rhs (kernel), both of one float dtype (f32, f64,
  // bf16, f16; half types accumulate in f32 on the host lane). Every constraint of the spec is
  // checked (ranks, attribute lengths, positive strides / dilations / group counts, distinct
  // dimension numbers, feature / batch groups dividing the sizes, at most one group count
  // > 1). Not supported: window_reversal (always false), quantized or mixed dtypes.
  ValueId convolution(ValueId lhs, ValueId rhs, ConvOptions options = {});
  // StableHLO reverse: the order of elements along each of `dimensions` (distinct) reversed.
  ValueId reverse(ValueId x, std::vector<int64_t> dimensions);
  // Sliding-window reduction (StableHLO reduce_window with one operand and an implied init:
  // sum 0, max -inf, min +inf). One entry per operand dimension; empty means the default
  // (strides 1, padding 0, dilations 1). Narrowing: padding >= 0. Result dim i:
  // floor((pad_lo + (n - 1) * base_dilation + 1 + pad_hi - ((w - 1) * window_dilation + 1)) /
  // stride) + 1, or 0 when the dilated window is longer than the padded input. Padded and
  // dilation holes hold the init. Float dtypes.
  ValueId reduce_window(ValueId x, ReduceKind kind, std::vector<int64_t> window_dimensions,
                        std::vector<int64_t> window_strides = {},
                        std::vector<int64_t> padding_low = {},
                        std::vector<int64_t> padding_high = {},
                        std::vector<int64_t> base_dilations = {},
                        std::vector<int64_t> window_dilations = {});
  // StableHLO select_and_scatter with select = compare(select, ...) and scatter = add, init 0:
  // for each window of `operand` (padded, no dilations) whose position is source's index, the
  // element the select picks among the window's in-bounds elements (row-major order; the
  // current pick a is replaced by the next element b unless `a select b` holds: GE keeps the
  // first maximum, LE the first minimum; padded positions are never picked) gets that source
  // value added. Result: operand's shape, zeros elsewhere. source's shape is the window count
  // reduce_window gives. Float dtypes; select GE, GT, LE or LT.
  ValueId select_and_scatter(ValueId operand, ValueId source, Comparison select,
                             std::vector<int64_t> window_dimensions,
                             std::vector<int64_t> window_strides = {},
                             std::vector<int64_t> padding_low = {},
                             std::vector<int64_t> padding_high = {});
  // Collectives across replicas (StableHLO all_reduce / all_gather, cross-replica: no
  // channel_handle). replica_groups: non-empty groups of distinct replica ids >= 0, every group
  // the same size (all_replicas(n): one group of all n). all_reduce: each replica gets the
  // elementwise sum / max / min of x over its group; result type = x's; dtypes f32, f64, bf16,
  // f16, s32, u32 (i1: max / min only). all_gather: x of every replica of the group
  // concatenated along `dimension` in group order; result dims[dimension] = x's times the
  // group size; any dtype. The host lane runs them over distributed::world() (its header).
  ValueId all_reduce(ValueId x, ReduceKind kind, std::vector<std::vector<int64_t>> replica_groups);
  ValueId all_gather(ValueId x, int64_t dimension,
                     std::vector<std::vector<int64_t>> replica_groups);
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

// All result types of `op` (one, but for a composite with several results).
std::vector<TensorType> result_types(Op op, std::span<const TensorType> operands,
                                     const Attrs& attrs);

// Checks a whole function: operands defined before use, every node's type equals its
// inferred type, inputs are parameter nodes, results and aliases in range, aliased types equal,
// a multi-result node directly followed by its result nodes and read only through them.
void verify(const Function& f);

}  // namespace tlaloc::ir
