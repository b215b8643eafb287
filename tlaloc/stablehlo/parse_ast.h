// Internal to tlaloc/stablehlo: the syntax tree that parse.cpp reads and parse_build.cpp turns
// into an ir::Function.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::stablehlo::detail {

struct Loc {
  int line = 1, column = 1;
};

// Throws tlaloc::Error "stablehlo::parse: line L column C: <msg>".
[[noreturn]] void error_at(Loc loc, const std::string& msg);

// An attribute value. Only the fields of its kind are set.
struct Attr {
  enum Kind {
    Int,
    Bool,
    Str,
    I64Array,
    Dense,
    DimNumbers,
    Enum,
    List,
    ConvLayout,
    I64Dense
  } kind = Int;
  Loc loc;
  int64_t i = 0;  // Int (typed or not), Bool (0/1)
  // Str; Enum: the word (LT, FLOAT); DimNumbers: kind; ConvLayout: the text inside
  // #stablehlo.conv<...>
  std::string s;
  std::string enum_kind;                           // Enum: comparison_direction, precision, ...
  std::vector<int64_t> ints;                       // I64Array; I64Dense: the elements, row-major
  std::shared_ptr<const Array> dense;              // Dense (already typed)
  std::map<std::string, std::vector<int64_t>> dn;  // DimNumbers fields (index_vector_dim: [n])
  std::vector<Attr> list;                          // List
};
using AttrDict = std::map<std::string, Attr>;

struct OpAst {
  Loc loc;
  std::string result;  // "" for func.return / stablehlo.return
  std::string name;    // "stablehlo.add"
  std::vector<std::string> operands;
  std::vector<Loc> operand_locs;
  AttrDict attrs;  // properties and discardable attributes together
  // One region with one block (reduce, reduce_window, scatter; select_and_scatter's select).
  bool has_region = false;
  std::vector<std::string> block_args;
  std::vector<ir::TensorType> block_arg_types;
  std::vector<OpAst> region;
  // A second region (select_and_scatter's scatter).
  bool has_region2 = false;
  std::vector<std::string> block_args2;
  std::vector<ir::TensorType> block_arg_types2;
  std::vector<OpAst> region2;
  std::vector<ir::TensorType> operand_types, result_types;
};

struct Argument {
  Loc loc;
  std::string name;
  ir::TensorType type;
  AttrDict attrs;
};

struct ModuleAst {
  std::string name = "main";
  AttrDict attrs;
  std::vector<Argument> args;
  std::vector<ir::TensorType> result_types;
  std::vector<AttrDict> result_attrs;
  std::vector<OpAst> ops;  // the last one is func.return
};

// Shared with emit.cpp: the init value of tlaloc's reduce (the identity of its kind, see
// ir/builder.h) and the StableHLO op of its region.
Array reduce_identity(ir::ReduceKind k, DType t);
std::string_view reduce_region_op(ir::ReduceKind k);
std::string_view comparison_type(DType t);  // FLOAT, SIGNED or UNSIGNED

// parse_conv.cpp: the dimension numbers of a ConvLayout attribute ("[b, f, 0, 1]x[o, i, 0,
// 1]->[b, f, 0, 1]"), and an i64 dense<...> : tensor<...xi64> (`type` its type's text;
// `elems` the elements as written, `nest` the list sizes per depth, `list` whether it was a
// list, `empty` dense<>) into a's ints and shape (dn["shape"]).
ir::ConvDimensionNumbers conv_layout(const Attr& a);
void i64_dense(Attr* a, std::string_view type, const std::vector<std::string>& elems,
               const std::vector<int64_t>& nest, bool list, bool empty);

// Decodes one element literal of a dense<...> of dtype t into dst (size_of(t) bytes); throws
// (error_at l) when it is not a valid t.
void decode_element(const std::string& s, DType t, unsigned char* dst, Loc l);

ModuleAst parse_module(std::string_view text);
ir::Function build_function(const ModuleAst& m);

}  // namespace tlaloc::stablehlo::detail
