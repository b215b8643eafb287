// safetensors writer and the dtype table. Layout as huggingface/safetensors writes it: the
// JSON header padded with spaces to a multiple of 8 bytes, data contiguous in header order.
// tlaloc orders tensors by name (the reference orders by alignment, then name).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

namespace {

struct DTypeInfo {
  StDType t;
  const char* name;
  int bits;
};

constexpr DTypeInfo kTable[] = {
    {StDType::BOOL, "BOOL", 8},       {StDType::U8, "U8", 8},
    {StDType::I8, "I8", 8},           {StDType::I16, "I16", 16},
    {StDType::U16, "U16", 16},        {StDType::I32, "I32", 32},
    {StDType::U32, "U32", 32},        {StDType::I64, "I64", 64},
    {StDType::U64, "U64", 64},        {StDType::F16, "F16", 16},
    {StDType::BF16, "BF16", 16},      {StDType::F32, "F32", 32},
    {StDType::F64, "F64", 64},        {StDType::C64, "C64", 64},
    {StDType::F8_E4M3, "F8_E4M3", 8}, {StDType::F8_E5M2, "F8_E5M2", 8},
    {StDType::F8_E8M0, "F8_E8M0", 8}, {StDType::F6_E2M3, "F6_E2M3", 6},
    {StDType::F6_E3M2, "F6_E3M2", 6}, {StDType::F4, "F4", 4},
};

const DTypeInfo& info(StDType t) {
  for (const auto& i : kTable)
    if (i.t == t) return i;
  fail("unknown safetensors dtype code {}", int(t));
}

}  // namespace

std::string_view st_name(StDType t) { return info(t).name; }
int st_bits(StDType t) { return info(t).bits; }

std::optional<StDType> st_dtype_from_name(std::string_view s) {
  for (const auto& i : kTable)
    if (s == i.name) return i.t;
  return std::nullopt;
}

std::optional<DType> to_tlaloc(StDType t) {
  switch (t) {
    case StDType::F32:
      return DType::f32;
    case StDType::F64:
      return DType::f64;
    case StDType::BF16:
      return DType::bf16;
    case StDType::F16:
      return DType::f16;
    case StDType::I32:
      return DType::s32;
    case StDType::U32:
      return DType::u32;
    case StDType::BOOL:
      return DType::i1;
    default:
      return std::nullopt;
  }
}

StDType from_tlaloc(DType t) {
  switch (t) {
    case DType::f32:
      return StDType::F32;
    case DType::f64:
      return StDType::F64;
    case DType::bf16:
      return StDType::BF16;
    case DType::f16:
      return StDType::F16;
    case DType::s32:
      return StDType::I32;
    case DType::u32:
      return StDType::U32;
    case DType::i1:
      return StDType::BOOL;
  }
  fail("dtype code {} has no safetensors equivalent", int(t));
}

TensorRef tensor_ref(std::string name, const Array& a) {
  return TensorRef{std::move(name), from_tlaloc(a.dtype()), a.shape().dims,
                   std::span<const std::byte>(static_cast<const std::byte*>(a.raw()), a.nbytes())};
}

SerializedHeader serialize_header(std::vector<TensorRef> tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
  // The JSON holds every name, key and value, so their total length bounds it from below.
  uint64_t lower = 0;
  for (const auto& [k, v] : metadata) lower += k.size() + v.size();
  for (const TensorRef& t : tensors) lower += t.name.size();
  if (lower > kMaxHeaderSize)
    fail("safetensors: names and metadata alone take {} bytes, over the header limit of {} bytes",
         lower, kMaxHeaderSize);
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = root["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) {
      if (!is_utf8(k)) fail("safetensors metadata key is not valid UTF-8");
      if (!is_utf8(v)) fail("safetensors metadata value of '{}' is not valid UTF-8", k);
      m[k] = v;
    }
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef& t = tensors[i];
    if (i > 0 && tensors[i - 1].name == t.name)
      fail("safetensors: two tensors are named '{}'", t.name);
    if (t.name == "__metadata__")
      fail("safetensors: a tensor may not be named '__metadata__' (the name is reserved)");
    if (!is_utf8(t.name)) fail("safetensors: a tensor name is not valid UTF-8");
    uint64_t numel = 1;
    bool overflow = false, zero = false;
    for (int64_t d : t.shape) {
      if (d < 0) fail("safetensors: tensor '{}' has a negative dimension {}", t.name, d);
      if (d == 0) zero = true;
      if (__builtin_mul_overflow(numel, uint64_t(d), &numel)) overflow = true;
    }
    if (zero) numel = 0;
    uint64_t bits;
    if ((overflow && !zero) || __builtin_mul_overflow(numel, uint64_t(st_bits(t.dtype)), &bits))
      fail("safetensors: tensor '{}': element count or byte size overflows 64 bits", t.name);
    if (bits % 8 != 0)
      fail("safetensors: tensor '{}': {} elements of {} are {} bits, not whole bytes", t.name,
           numel, st_name(t.dtype), bits);
    if (t.data.size() != bits / 8)
      fail("safetensors: tensor '{}' has {} bytes of data but {} elements of {} need {}", t.name,
           t.data.size(), numel, st_name(t.dtype), bits / 8);
    auto& e = root[t.name] = nlohmann::ordered_json::object();
    e["dtype"] = st_name(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + bits / 8};
    offset += bits / 8;
  }
  std::string text = root.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  if (text.size() > kMaxHeaderSize)
    fail("safetensors: header of {} bytes exceeds the limit of {} bytes", text.size(),
         kMaxHeaderSize);
  SerializedHeader h;
  h.prefix.resize(8 + text.size());
  uint64_t n = text.size();
  std::memcpy(h.prefix.data(), &n, 8);
  std::memcpy(h.prefix.data() + 8, text.data(), text.size());
  h.ordered = std::move(tensors);
  h.data_bytes = offset;
  return h;
}

std::vector<std::byte> serialize(std::vector<TensorRef> tensors,
                                 const std::map<std::string, std::string>& metadata) {
  SerializedHeader h = serialize_header(std::move(tensors), metadata);
  std::vector<std::byte> out = std::move(h.prefix);
  out.reserve(out.size() + h.data_bytes);
  for (const TensorRef& t : h.ordered) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

void write_safetensors(const std::string& path, const SerializedHeader& h,
                       const SaveOptions& options) {
  AtomicFile f(path, options);
  f.write(h.prefix);
  for (const TensorRef& t : h.ordered) f.write(t.data);
  f.commit();
}

void save_safetensors(const std::string& path, std::vector<TensorRef> tensors,
                      const std::map<std::string, std::string>& metadata,
                      const SaveOptions& options) {
  write_safetensors(path, serialize_header(std::move(tensors), metadata), options);
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Array>>& tensors,
                      const std::map<std::string, std::string>& metadata,
                      const SaveOptions& options) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const auto& [name, a] : tensors) refs.push_back(tensor_ref(name, a));
  save_safetensors(path, std::move(refs), metadata, options);
}

}  // namespace tlaloc::io
