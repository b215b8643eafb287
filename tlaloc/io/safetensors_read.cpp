// Strict safetensors reader: mmap, then validate the header against the file before any view
// is handed out. Rules follow huggingface/safetensors (tensor.rs: read_metadata, validate),
// made stricter where the format leaves room (duplicate keys, unknown fields).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tlaloc/io/json_util.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

static_assert(std::endian::native == std::endian::little, "tlaloc assumes a little-endian host");

namespace {

using json = nlohmann::json;

// Depth limit of the header JSON: root object -> tensor / metadata object -> shape array.
constexpr int kMaxJsonDepth = 3;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

uint64_t u64_field(const json& v, const std::string& src, const std::string& tensor,
                   const char* field) {
  if (!v.is_number_unsigned())
    fail("{}: tensor '{}': {} holds {} ({}), not a non-negative integer", src, tensor, field,
         json_kind(v), v.dump());
  return v.get<uint64_t>();
}

}  // namespace

bool is_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // > U+10FFFF
    } else {
      return false;
    }
    if (n - i < size_t(len)) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (int k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return false;
    i += size_t(len);
  }
  return true;
}

int64_t TensorView::numel() const {
  // Validation bounded non-empty shapes by the file size; empty ones may hold huge dims.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string what) {
  SafetensorsFile f;
  f.source_ = std::move(what);
  f.base_ = bytes.data();
  f.size_ = bytes.size();
  f.validate();
  return f;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before fstat could refuse it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  SafetensorsFile f;
  f.source_ = path;
  f.size_ = uint64_t(st.st_size);
  if (f.size_ >= 8) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail("{}: cannot mmap {} bytes: {}", path, f.size_, std::strerror(e));
    }
    f.base_ = static_cast<const std::byte*>(p);
    f.mapped_ = true;
  }
  ::close(fd);
  f.validate();  // on failure f's destructor unmaps
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (mapped_) ::munmap(const_cast<std::byte*>(base_), size_);
    source_ = std::move(o.source_);
    base_ = o.base_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    header_size_ = o.header_size_;
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
    o.base_ = nullptr;
    o.size_ = 0;
    o.mapped_ = false;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapped_) ::munmap(const_cast<std::byte*>(base_), size_);
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& v, std::string_view n) { return v.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorView& SafetensorsFile::at(std::string_view name) const {
  if (const TensorView* v = find(name)) return *v;
  fail("{}: no tensor named '{}' (the file holds {} tensors)", source_, name, tensors_.size());
}

void SafetensorsFile::validate() {
  const std::string& src = source_;
  if (size_ < 8) fail("{}: file is {} bytes, shorter than the 8-byte header length", src, size_);
  uint64_t n = 0;
  std::memcpy(&n, base_, 8);  // little-endian host (static_assert above)
  if (n > UINT64_MAX - 8) fail("{}: header length {} wraps when added to 8", src, n);
  // A safetensors header is JSON: its first byte is '{'. Without one, say the file is not one.
  const char* hint = size_ > 8 && static_cast<char>(base_[8]) == '{'
                         ? ""
                         : " (not a safetensors file: no JSON header after the 8-byte length)";
  if (n > kMaxHeaderSize)
    fail("{}: header length {} exceeds the limit of {} bytes{}", src, n, kMaxHeaderSize, hint);
  if (n + 8 > size_)
    fail("{}: header length {} runs past the end of the file ({} bytes, header needs {}){}", src, n,
         size_, n + 8, hint);
  header_size_ = n;
  std::string_view text(reinterpret_cast<const char*>(base_) + 8, size_t(n));
  if (!is_utf8(text)) fail("{}: header ({} bytes) is not valid UTF-8", src, n);
  json root = parse_json_strict(text, src, "header", kMaxJsonDepth);
  if (!root.is_object()) fail("{}: header is {}, not a JSON object", src, json_kind(root));

  const uint64_t data_len = size_ - 8 - n;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (auto& [name, info] : root.items()) {
    if (name == "__metadata__") {
      if (info.is_object() && (info.contains("dtype") || info.contains("data_offsets")))
        fail("{}: a tensor may not be named '__metadata__' (the name is reserved)", src);
      if (!info.is_object())
        fail("{}: __metadata__ is {}, not an object of strings", src, json_kind(info));
      for (auto& [k, v] : info.items()) {
        if (!v.is_string())
          fail("{}: __metadata__ value of '{}' is {} ({}), not a string", src, k, json_kind(v),
               v.dump());
        metadata_.emplace(k, v.get<std::string>());
      }
      continue;
    }
    if (!info.is_object())
      fail("{}: tensor '{}': entry is {}, not an object", src, name, json_kind(info));
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!info.contains(field)) fail("{}: tensor '{}': missing field '{}'", src, name, field);
    for (auto& [k, v] : info.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        fail("{}: tensor '{}': unknown field '{}'", src, name, k);
    TensorView view;
    view.name = name;
    const json& jd = info["dtype"];
    if (!jd.is_string())
      fail("{}: tensor '{}': dtype is {}, not a string", src, name, json_kind(jd));
    auto dt = st_dtype_from_name(jd.get_ref<const std::string&>());
    if (!dt) fail("{}: tensor '{}': unknown dtype '{}'", src, name, jd.get<std::string>());
    view.dtype = *dt;
    const json& js = info["shape"];
    if (!js.is_array())
      fail("{}: tensor '{}': shape is {}, not a list of integers", src, name, json_kind(js));
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : js) {
      uint64_t dim = u64_field(d, src, name, "shape");
      if (dim > uint64_t(INT64_MAX))
        fail("{}: tensor '{}': shape dimension {} exceeds 2^63-1", src, name, dim);
      view.shape.push_back(int64_t(dim));
      if (__builtin_mul_overflow(numel, dim, &numel)) overflow = true;
    }
    bool zero = std::find(view.shape.begin(), view.shape.end(), 0) != view.shape.end();
    if (overflow && !zero)
      fail("{}: tensor '{}': element count of shape {} overflows 64 bits", src, name, js.dump());
    if (zero) numel = 0;
    uint64_t bits;
    if (__builtin_mul_overflow(numel, uint64_t(st_bits(view.dtype)), &bits))
      fail("{}: tensor '{}': byte size of {} elements of {} overflows 64 bits", src, name, numel,
           st_name(view.dtype));
    if (bits % 8 != 0)
      fail("{}: tensor '{}': {} elements of {} are {} bits, not a whole number of bytes", src, name,
           numel, st_name(view.dtype), bits);
    const json& jo = info["data_offsets"];
    if (!jo.is_array() || jo.size() != 2)
      fail("{}: tensor '{}': data_offsets is {}, not a [begin, end] pair", src, name, jo.dump());
    uint64_t b = u64_field(jo[0], src, name, "data_offsets"),
             e = u64_field(jo[1], src, name, "data_offsets");
    if (e < b) fail("{}: tensor '{}': data_offsets [{}, {}] are reversed", src, name, b, e);
    if (e > data_len)
      fail("{}: tensor '{}': data_offsets [{}, {}] run past the data section of {} bytes", src,
           name, b, e, data_len);
    if (e - b != bits / 8)
      fail("{}: tensor '{}': data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", src,
           name, b, e, e - b, shape_str(view.shape), st_name(view.dtype), bits / 8);
    view.data = std::span<const std::byte>(base_ + 8 + n + b, size_t(e - b));
    ranges.push_back({b, e, tensors_.size()});
    tensors_.push_back(std::move(view));
  }

  // The data section must be covered exactly: sorted by offsets, each range starts where the
  // previous one ended (zero-byte tensors may share an offset).
  std::sort(ranges.begin(), ranges.end(), [&](const Range& x, const Range& y) {
    return std::tie(x.begin, x.end) < std::tie(y.begin, y.end);
  });
  uint64_t pos = 0;
  const std::string* prev = nullptr;
  for (const Range& r : ranges) {
    const std::string& nm = tensors_[r.index].name;
    if (r.begin < pos)
      fail("{}: tensors '{}' and '{}' overlap: '{}' begins at {} before the other ends at {}", src,
           *prev, nm, nm, r.begin, pos);
    if (r.begin > pos)
      fail("{}: bytes [{}, {}) of the data section belong to no tensor (before '{}')", src, pos,
           r.begin, nm);
    pos = r.end;
    prev = &nm;
  }
  if (pos != data_len)
    fail("{}: bytes [{}, {}) at the end of the data section belong to no tensor", src, pos,
         data_len);
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
}

Array to_array(const TensorView& v) {
  auto t = to_tlaloc(v.dtype);
  if (!t)
    fail(
        "tensor '{}': dtype {} has no tlaloc equivalent (tlaloc has F32 F64 BF16 F16 I32 U32 "
        "BOOL)",
        v.name, st_name(v.dtype));
  Array a(*t, Shape(v.shape));
  if (a.nbytes() != v.data.size())
    fail("tensor '{}': {} bytes for {} of shape {}", v.name, v.data.size(), st_name(v.dtype),
         shape_str(v.shape));
  if (!v.data.empty()) std::memcpy(a.raw(), v.data.data(), v.data.size());
  if (*t == DType::i1) {
    const auto* p = static_cast<const uint8_t*>(a.raw());
    for (int64_t i = 0; i < a.numel(); ++i)
      if (p[i] > 1)
        fail("tensor '{}': BOOL element {} is byte {}, not 0 or 1", v.name, i, int(p[i]));
  }
  return a;
}

}  // namespace tlaloc::io
