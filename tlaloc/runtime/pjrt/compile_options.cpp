#include "tlaloc/runtime/pjrt/compile_options.h"

#include <cstring>

namespace tlaloc::runtime::pjrt {

void ProtoWriter::varint(uint64_t v) {
  while (v >= 0x80) {
    out_ += char((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out_ += char(v);
}

void ProtoWriter::varint_field(int field, uint64_t v) {
  varint(uint64_t(field) << 3 | 0);  // wire type 0: varint
  varint(v);
}

void ProtoWriter::double_field(int field, double v) {
  varint(uint64_t(field) << 3 | 1);  // wire type 1: 64-bit, little-endian
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; ++i) out_ += char((bits >> (8 * i)) & 0xFF);
}

void ProtoWriter::bytes_field(int field, const std::string& bytes) {
  varint(uint64_t(field) << 3 | 2);  // wire type 2: length-delimited
  varint(bytes.size());
  out_ += bytes;
}

std::string serialize(const CompileOptions& o) {
  ProtoWriter build;
  build.int64_field(1, o.device_ordinal);
  build.int64_field(4, o.num_replicas);
  build.int64_field(5, o.num_partitions);
  if (o.optimization_level != EffortLevel::unknown)
    build.int64_field(24, int64_t(o.optimization_level));
  if (o.memory_fitting_level != EffortLevel::unknown)
    build.int64_field(25, int64_t(o.memory_fitting_level));
  ProtoWriter top;
  top.bytes_field(3, build.bytes());
  for (const OptionOverride& ov : o.overrides) {
    ProtoWriter value;
    if (auto* s = std::get_if<std::string>(&ov.value))
      value.bytes_field(1, *s);
    else if (auto* b = std::get_if<bool>(&ov.value))
      value.bool_field(2, *b);
    else if (auto* i = std::get_if<int64_t>(&ov.value))
      value.int64_field(3, *i);
    else
      value.double_field(4, std::get<double>(ov.value));
    ProtoWriter entry;  // a map entry is a message {key = 1; value = 2}
    entry.bytes_field(1, ov.name);
    entry.bytes_field(2, value.bytes());
    top.bytes_field(7, entry.bytes());
  }
  return top.bytes();
}

}  // namespace tlaloc::runtime::pjrt
