// safetensors: read (mmap, zero-copy views, strict validation) and write (sorted by name,
// header padded with spaces to 8 bytes). Format: huggingface/safetensors README and
// safetensors/src/tensor.rs -- 8-byte little-endian header length N, N bytes of UTF-8 JSON
// {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "value"}}, then the data section; offsets are relative to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/io/atomic_file.h"

namespace tlaloc::io {

// The format's element types, spelled as in the file. F8/F6/F4 kinds are kept as raw bytes.
enum class StDType : uint8_t {
  BOOL,
  U8,
  I8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  F16,
  BF16,
  F32,
  F64,
  C64,
  F8_E4M3,
  F8_E5M2,
  F8_E8M0,
  F6_E2M3,
  F6_E3M2,
  F4,
};

// "F32", "BF16", ... exactly as in a header.
std::string_view st_name(StDType t);
// Parses a header dtype string; nullopt for an unknown one.
std::optional<StDType> st_dtype_from_name(std::string_view s);
// Bits per element (F4: 4, F6_*: 6, BOOL: 8, F64: 64, ...).
int st_bits(StDType t);
// tlaloc's dtype for F32 F64 BF16 F16 I32(s32) U32 BOOL(i1); nullopt for the others.
std::optional<DType> to_tlaloc(StDType t);
// The file dtype of a tlaloc dtype (s32 -> I32, i1 -> BOOL, ...).
StDType from_tlaloc(DType t);

// The largest header (JSON + padding) read or written: 100,000,000 bytes, as
// huggingface/safetensors' MAX_HEADER_SIZE.
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;

// One tensor of a file: a view into the mapping (valid while its SafetensorsFile lives).
struct TensorView {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;       // [] for a scalar
  std::span<const std::byte> data;  // row-major, little-endian; empty for 0 elements
  std::string_view dtype_name() const { return st_name(dtype); }
  int64_t numel() const;
};

// A validated safetensors file. Opening checks everything the format forbids (see
// open()); afterwards every view lies inside the file.
class SafetensorsFile {
 public:
  // mmaps `path` read-only and validates it. The file must not be truncated while open
  // (a mapping cannot guard against that; tlaloc's own saves replace files by rename). Throws
  // tlaloc::Error naming the file and the tensor / field with the disagreeing numbers for: a file
  // shorter than 8 bytes; a header length that wraps when added to 8, exceeds kMaxHeaderSize or the
  // file; a header that is not UTF-8, not JSON, or not an object, or has a duplicate key; an
  // unknown dtype or field; a shape that is not a list of non-negative integers or whose element
  // count (or byte size) overflows 64 bits; data_offsets reversed, out of range, overlapping,
  // leaving gaps (including trailing bytes), or whose length disagrees with shape x dtype size; a
  // tensor named __metadata__; a __metadata__ that is not an object of strings.
  static SafetensorsFile open(const std::string& path);
  // Validates bytes already in memory (no copy; the views point into `bytes`, which must
  // outlive the result). `what` names the source in errors.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string what);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  // Tensors sorted by name.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* find(std::string_view name) const;
  // Throws tlaloc::Error naming the file and the tensor when absent.
  const TensorView& at(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // N, the header length field (JSON + padding), in bytes.
  uint64_t header_size() const { return header_size_; }
  uint64_t file_size() const { return size_; }
  const std::string& source() const { return source_; }

 private:
  SafetensorsFile() = default;
  void validate();

  std::string source_;
  const std::byte* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  uint64_t header_size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Copies a view into an owned Array (F32 F64 BF16 F16 I32 U32 BOOL). Throws tlaloc::Error
// naming the tensor for other dtypes, and for a BOOL byte other than 0 or 1.
Array to_array(const TensorView& v);

// A tensor to write: bytes (row-major, little-endian) with their file dtype and shape.
struct TensorRef {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};
// A view of an Array as a tensor to write (the Array must outlive the ref).
TensorRef tensor_ref(std::string name, const Array& a);

// The complete file image: header (tensors sorted by name, __metadata__ first when non-empty,
// padded with spaces to a multiple of 8) then the data. Refuses, with tlaloc::Error naming the
// tensor / key, what open() would refuse: duplicate names, the name __metadata__, names,
// keys or values that are not UTF-8, negative dims, element counts overflowing 64 bits, data
// whose length disagrees with shape x dtype size, a header over kMaxHeaderSize.
std::vector<std::byte> serialize(std::vector<TensorRef> tensors,
                                 const std::map<std::string, std::string>& metadata);
// The header part only (8-byte length + padded JSON) and the tensors in file order.
struct SerializedHeader {
  std::vector<std::byte> prefix;   // length field + JSON + padding
  std::vector<TensorRef> ordered;  // data follows in this order
  uint64_t data_bytes = 0;
};
SerializedHeader serialize_header(std::vector<TensorRef> tensors,
                                  const std::map<std::string, std::string>& metadata);

// Writes a serialized header and its tensors' data to `path` atomically (atomic_file.h).
void write_safetensors(const std::string& path, const SerializedHeader& header,
                       const SaveOptions& options = {});

// Writes `path` atomically (see atomic_file.h): a crash leaves either the old file or the new
// one. Errors as serialize() plus I/O failures naming the file.
void save_safetensors(const std::string& path, std::vector<TensorRef> tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      const SaveOptions& options = {});
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Array>>& tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      const SaveOptions& options = {});

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_utf8(std::string_view s);

}  // namespace tlaloc::io
