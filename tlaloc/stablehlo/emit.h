// StableHLO emission: prints an ir::Function as an MLIR module that XLA's StableHLO parser reads
// (https://openxla.org/stablehlo/spec). Every op is printed in MLIR's generic form
//   %3 = "stablehlo.add"(%1, %2) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// with inherent attributes as properties (<{...}>), inside
//   module @<f.name> attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}
//   func.func public @main(%arg0: tensor<...> {tf.aliasing_output = N : i32}, ...) -> (...)
// Donated inputs (Function::aliases) carry tf.aliasing_output (XLA's may-alias); input and
// output names travel as tlaloc.name attributes. tlaloc's narrowed ops print as the general
// StableHLO op: gather/scatter as row gather / row scatter-add along axis 0, reduce with its
// identity as init and an add / maximum / minimum region. Composite ops print as
// their decomposition (ir/composite.h). Output is deterministic: values are
// numbered in node order, attributes in a fixed order, floats with round-trip precision.
#pragma once

#include <string>
#include <string_view>

#include "tlaloc/ir/ir.h"

namespace tlaloc::stablehlo {

// dot_general precision_config (XLA: DEFAULT may use TF32 for f32 dots on GPU; HIGHEST is
// full f32). Names as in StableHLO's #stablehlo<precision ...>.
enum class Precision : uint8_t { DEFAULT, HIGH, HIGHEST };
std::string_view name(Precision p);
// "default" | "high" | "highest" (jax.default_matmul_precision's names, as the commands'
// --matmul-precision takes them); throws tlaloc::Error naming `flag` for another.
Precision parse_precision(std::string_view s, std::string_view flag = "--matmul-precision");

struct EmitOptions {
  Precision precision = Precision::DEFAULT;
  bool names = true;  // print input/output names as tlaloc.name attributes
};

// The MLIR module text for `f` (verified first). Throws tlaloc::Error if f fails verification.
std::string emit(const ir::Function& f, const EmitOptions& options = {});

// The replicas `f` runs on (its module's mhlo.num_replicas): the largest group size times group
// count of its collectives (all_reduce, all_gather); 1 without any.
int64_t num_replicas(const ir::Function& f);

// StableHLO spelling of a dtype: f32 f64 bf16 f16 i32 ui32 i1.
std::string_view element_type(DType t);
// "tensor<2x3xf32>"; a scalar is "tensor<f32>".
std::string type_text(const ir::TensorType& t);
// The dense<...> literal of a constant, e.g. "dense<[1, 2]>" (without the ": type" suffix).
// Floats print with round-trip precision (f32 9 significant digits), non-finite values as
// their bit pattern (0x7F800000), arrays of more than kHexThreshold elements as a hex string.
std::string dense_literal(const Array& a);
inline constexpr int64_t kHexThreshold = 4096;

}  // namespace tlaloc::stablehlo
