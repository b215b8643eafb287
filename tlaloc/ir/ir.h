// The IR: static shapes, SSA values, one Function = parameters, an ordered node list, results.
// A node defines exactly one value; the value's id is the node's index in Function::nodes, and
// nodes are in topological order (operands have smaller ids). Function::inputs lists the
// parameter nodes in input order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/core/array.h"

namespace tlaloc::ir {

enum class Op : uint8_t {
#define TLALOC_OP(id, str, kind) id,
#include "tlaloc/ir/ops.def"
#undef TLALOC_OP
};

enum class OpKind : uint8_t { Parameter, Nullary, Unary, Binary, Ternary, Structural };

inline constexpr Op kAllOps[] = {
#define TLALOC_OP(id, str, kind) Op::id,
#include "tlaloc/ir/ops.def"
#undef TLALOC_OP
};

std::string_view op_name(Op op);  // StableHLO spelling: "add", "and", "dot_general"
OpKind op_kind(Op op);
Op op_from_name(std::string_view s);  // throws tlaloc::Error for an unknown name
bool is_elementwise(Op op);           // Unary, Binary, Ternary kinds
bool is_composite(Op op);             // attention, layer_norm, cross_entropy, gelu, their _grad ops

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

// Attributes, named as in StableHLO. Each op reads only its own fields (see builder.h).
struct Attrs {
  std::vector<int64_t> broadcast_dimensions;                   // broadcast_in_dim
  std::vector<int64_t> permutation;                            // transpose
  std::vector<int64_t> dimensions;                             // reduce
  int64_t dimension = 0;                                       // iota (iota_dimension), concatenate
  std::vector<int64_t> start_indices, limit_indices, strides;  // slice
  std::vector<int64_t> edge_padding_low, edge_padding_high, interior_padding;  // pad
  std::vector<int64_t> slice_sizes;                                            // dynamic_slice
  std::vector<int64_t> lhs_batching_dimensions, rhs_batching_dimensions;       // dot_general
  std::vector<int64_t> lhs_contracting_dimensions, rhs_contracting_dimensions;
  ReduceKind reduce_kind = ReduceKind::sum;          // reduce
  Comparison comparison_direction = Comparison::EQ;  // compare
  std::shared_ptr<const Array> value;                // constant
  double scale = 1.0;                                // attention, attention_grad: score scale
  bool causal = false;                               // attention, attention_grad
  double epsilon = 0.0;  // layer_norm, layer_norm_grad: added to the variance

  // Field-wise equality; constants compare by contents (for CSE).
  bool operator==(const Attrs& o) const;
};

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

// Readable text, one node a line.
std::string print(const Function& f);

}  // namespace tlaloc::ir
