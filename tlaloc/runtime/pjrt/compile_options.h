// The serialized xla.CompileOptionsProto handed to PJRT_Client_Compile, hand-encoded in the
// protobuf wire format (https://protobuf.dev/programming-guides/encoding/): tlaloc links no
// protobuf library. Field numbers are those of xla/pjrt/proto/compile_options.proto:
//   CompileOptionsProto { executable_build_options = 3; env_option_overrides = 7 (map) }
//   ExecutableBuildOptionsProto { device_ordinal = 1; num_replicas = 4; num_partitions = 5;
//                                 optimization_level = 24; memory_fitting_level = 25 }
//   OptionOverrideProto { oneof: string_field = 1; bool_field = 2; int_field = 3;
//                         double_field = 4 }
// tlaloc always sends device_ordinal (-1, XLA's C++ default: "any"), num_replicas (the
// program's mhlo.num_replicas, 1 by default) and num_partitions (1), because proto3 zeros are
// not XLA's defaults, and memory_fitting_level O2
// as JAX does (jax_memory_fitting_level's default; the proto's zero is EFFORT_UNKNOWN, which is
// not what ExecutableBuildOptions defaults to); optimization_level stays unset, JAX's default
// too. Nothing switches XLA's command buffers off. debug_options is never
// sent (it would replace XLA's defaults wholesale); single DebugOptions fields are changed
// through env_option_overrides, which XLA applies on top of its defaults and XLA_FLAGS.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tlaloc::runtime::pjrt {

// A DebugOptions field set by name, e.g. {"xla_gpu_deterministic_ops", true}.
struct OptionOverride {
  std::string name;
  std::variant<std::string, bool, int64_t, double> value;
};

// xla.ExecutionOptions.EffortLevel, the values of its enum.
enum class EffortLevel : int64_t { unknown = 0, O0 = 9, O1 = 19, O2 = 29, O3 = 39 };

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  int64_t device_ordinal = -1;
  EffortLevel optimization_level = EffortLevel::unknown;  // sent unless unknown
  EffortLevel memory_fitting_level = EffortLevel::O2;     // sent unless unknown
  std::vector<OptionOverride> overrides;                  // encoded in this order
};

// Protobuf wire-format writer (varint, length-delimited and 64-bit fields only).
class ProtoWriter {
 public:
  void varint_field(int field, uint64_t v);
  void int64_field(int field, int64_t v) { varint_field(field, uint64_t(v)); }  // two's complement
  void bool_field(int field, bool v) { varint_field(field, v ? 1 : 0); }
  void double_field(int field, double v);
  void bytes_field(int field, const std::string& bytes);  // strings and sub-messages
  const std::string& bytes() const { return out_; }

 private:
  void varint(uint64_t v);
  std::string out_;
};

// The serialized CompileOptionsProto.
std::string serialize(const CompileOptions& o);

}  // namespace tlaloc::runtime::pjrt
