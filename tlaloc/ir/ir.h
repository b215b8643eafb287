// The IR: static shapes, SSA values, one Function = parameters, an ordered node list, results.
// Every value is a node: its id is the node's index in Function::nodes, and nodes are in
// topological order (operands have smaller ids). Function::inputs lists the parameter nodes in
// input order.
//
// Multi-result nodes (as StableHLO's multi-result ops): a composite with several results (e.g.
// attention's output and log-sum-exp) is a node followed immediately by one `result` node per
// result, in order (`result` has the composite as its only operand and attrs.index = k). Users
// read the `result` nodes, never the composite itself; the composite node's own type is its
// first result's. A single-result composite is an ordinary value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/core/array.h"

namespace tlaloc::ir {

enum class Op : uint8_t {
#define TLALOC_OP(id, str, kind, operands, facts, formula) id,
#define TLALOC_COMPOSITE(id, str) id,
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP
};

enum class OpKind : uint8_t {
  Parameter,
  Nullary,
  Unary,
  Binary,
  Ternary,
  Structural,
  Result,
  Composite
};

inline constexpr Op kAllOps[] = {
#define TLALOC_OP(id, str, kind, operands, facts, formula) Op::id,
#define TLALOC_COMPOSITE(id, str) Op::id,
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP
};
inline constexpr size_t kNumOps = sizeof(kAllOps) / sizeof(kAllOps[0]);

// Algebraic facts of an op (ops.def's facts column).
enum OpFact : uint8_t { kCommutative = 1, kAssociative = 2, kIdempotent = 4, kInvolution = 8 };
inline constexpr int kVariadic = -1;

// One op's record (ops.def). Composites' details are in their own record (ir/composite.h).
struct OpRecord {
  Op op;
  std::string_view name;  // StableHLO spelling ("add", "and", "dot_general") or "tlaloc.*"
  OpKind kind;
  int operands;   // the count, or kVariadic
  uint8_t facts;  // OpFact bits
  int dtypes;     // elementwise ops with a formula: the dtypes it accepts (ir/scalar.h's kF...)
  bool formula;   // has a scalar formula (ir/scalar.h)
};
const OpRecord& op_record(Op op);

std::string_view op_name(Op op);  // op_record(op).name
OpKind op_kind(Op op);
Op op_from_name(std::string_view s);  // throws tlaloc::Error for an unknown name
bool is_elementwise(Op op);           // Unary, Binary, Ternary kinds
bool is_composite(Op op);             // Composite kind (ops.def's TLALOC_COMPOSITE lines)
bool has_fact(Op op, OpFact f);
// all_reduce, all_gather: collectives across replicas. Not a pure function of the operand, so
// never folded, merged by CSE or computed in place of their operand.
bool is_collective(Op op);

using ValueId = int32_t;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};
std::string to_string(const TensorType& t);  // "f32[2,3]"

enum class ReduceKind : uint8_t { sum, max, min };
enum class Comparison : uint8_t { EQ, NE, LT, LE, GT, GE };
std::string_view name(ReduceKind k);
std::string_view name(Comparison c);

// StableHLO convolution dimension_numbers: which axis of the input, kernel and output is the
// batch / feature axis and which are the spatial ones (in window order). Defaults: PyTorch's
// NCHW input, OIHW kernel, NCHW output for two spatial dims.
struct ConvDimensionNumbers {
  int64_t input_batch_dimension = 0, input_feature_dimension = 1;
  std::vector<int64_t> input_spatial_dimensions{2, 3};
  int64_t kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0;
  std::vector<int64_t> kernel_spatial_dimensions{2, 3};
  int64_t output_batch_dimension = 0, output_feature_dimension = 1;
  std::vector<int64_t> output_spatial_dimensions{2, 3};
  bool operator==(const ConvDimensionNumbers&) const = default;
};

// Attributes, named as in StableHLO. Each op reads only its own fields (see builder.h).
struct Attrs {
  std::vector<int64_t> broadcast_dimensions;  // broadcast_in_dim
  std::vector<int64_t> permutation;           // transpose
  std::vector<int64_t> dimensions;            // reduce
  int64_t dimension = 0;  // iota (iota_dimension), concatenate, all_gather (all_gather_dim)
  std::vector<int64_t> start_indices, limit_indices, strides;                  // slice
  std::vector<int64_t> edge_padding_low, edge_padding_high, interior_padding;  // pad
  std::vector<int64_t> slice_sizes;                                            // dynamic_slice
  std::vector<int64_t> lhs_batching_dimensions, rhs_batching_dimensions;       // dot_general
  std::vector<int64_t> lhs_contracting_dimensions, rhs_contracting_dimensions;
  // dot_general: the result's element type when it differs from the operands' (JAX's
  // preferred_element_type; StableHLO spells it as the result type): bf16 / f16 operands
  // accumulated and returned in f32.
  std::optional<DType> preferred_element_type;
  ReduceKind reduce_kind = ReduceKind::sum;  // reduce, reduce_window, all_reduce
  // convolution, reduce_window, select_and_scatter: one entry per window dimension
  // (convolution: per spatial dimension; the others: per operand dimension). StableHLO's
  // `padding` [n, 2] is padding_low[i], padding_high[i].
  std::vector<int64_t> window_dimensions;  // reduce_window, select_and_scatter
  std::vector<int64_t> window_strides, padding_low, padding_high;
  std::vector<int64_t> lhs_dilation, rhs_dilation;        // convolution
  std::vector<int64_t> base_dilations, window_dilations;  // reduce_window
  ConvDimensionNumbers conv_dimension_numbers;            // convolution
  int64_t feature_group_count = 1, batch_group_count = 1;
  // all_reduce, all_gather: StableHLO's replica_groups (replica ids per group, every group the
  // same size) and channel_id (0: no channel_handle, cross-replica as JAX's pmap emits; > 0:
  // channel_handle with that handle and use_global_device_ids).
  std::vector<std::vector<int64_t>> replica_groups;
  int64_t channel_id = 0;
  Comparison comparison_direction = Comparison::EQ;  // compare
  std::shared_ptr<const Array> value;                // constant
  int64_t index = 0;                                 // result: which result of its operand
  // Composites: their numeric attributes, in the order their record names them
  // (ir::Composite::params; booleans as 0 / 1).
  std::vector<double> params;

  // Field-wise equality; constants compare by contents (for CSE).
  bool operator==(const Attrs& o) const;
};

// {{0, 1, ..., n - 1}}: one replica group of all n replicas (n >= 1).
std::vector<std::vector<int64_t>> all_replicas(int64_t n);

struct Node {
  Op op;
  TensorType type;
  std::vector<ValueId> operands;
  Attrs attrs;
};

// Output `output` reuses the storage of input `input` (donation): the caller gives up the input.
struct Alias {
  int output;
  int input;
  bool operator==(const Alias&) const = default;
};

struct Function {
  std::string name = "main";
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;  // parameter nodes, in input order
  std::vector<ValueId> results;
  std::vector<std::string> input_names;   // optional, one per parameter
  std::vector<std::string> output_names;  // optional, one per result
  std::vector<Alias> aliases;

  int num_inputs() const { return int(inputs.size()); }
  int num_outputs() const { return int(results.size()); }
  const TensorType& type(ValueId v) const { return nodes[size_t(v)].type; }
  const TensorType& input_type(int i) const { return type(inputs[size_t(i)]); }
  const TensorType& output_type(int i) const { return type(results[size_t(i)]); }
  // Nodes that are not parameters.
  int64_t num_ops() const { return int64_t(nodes.size()) - num_inputs(); }
};

// Results of node `v`: for a multi-result composite its `result` nodes (ids v + 1 ... v + k),
// else {v}.
int num_results(const Function& f, ValueId v);
std::vector<ValueId> results_of(const Function& f, ValueId v);
// Whether node `v` is a multi-result composite (its value is never read; see the top).
bool is_multi_result(const Function& f, ValueId v);

// Readable text, one node a line.
std::string print(const Function& f);

}  // namespace tlaloc::ir
