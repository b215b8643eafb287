#include "tlaloc/io/inspect.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

namespace tlaloc::io {

namespace {

std::string printable(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c == '\n') {
      r += "\\n";
    } else if (c == '\t') {
      r += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      r += fmt::format("\\x{:02x}", c);
    } else {
      r += char(c);
    }
  }
  return r;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// A value that is a JSON array of strings longer than one line (a checkpoint's optimizer_state
// names): its count, then one string per line. Anything else: nullopt.
std::optional<std::string> string_list(const std::string& v) {
  constexpr size_t kLine = 100;
  if (v.size() <= kLine || v.front() != '[') return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
  if (!j.is_array() ||
      !std::all_of(j.begin(), j.end(), [](const nlohmann::json& e) { return e.is_string(); }))
    return std::nullopt;
  std::string r = fmt::format("{} strings:\n", j.size());
  for (const auto& e : j) r += fmt::format("    {}\n", printable(e.get<std::string>()));
  return r;
}

}  // namespace

std::string inspect_text(const SafetensorsFile& f) {
  uint64_t elements = 0;
  for (const TensorView& v : f.tensors()) elements += uint64_t(v.numel());
  std::string out = fmt::format("{}: {} tensors, {} elements, {} data bytes, {} header bytes\n",
                                f.source(), f.tensors().size(), elements,
                                f.file_size() - 8 - f.header_size(), f.header_size());
  if (!f.metadata().empty()) {
    out += "metadata:\n";
    for (const auto& [k, v] : f.metadata()) {
      auto list = string_list(v);
      out += fmt::format("  {} = {}", printable(k), list ? *list : printable(v) + "\n");
    }
  }
  if (f.tensors().empty()) return out;
  std::vector<std::array<std::string, 5>> rows = {{"name", "dtype", "shape", "elements", "bytes"}};
  for (const TensorView& v : f.tensors())
    rows.push_back({printable(v.name), std::string(v.dtype_name()), shape_text(v.shape),
                    std::to_string(v.numel()), std::to_string(v.data.size())});
  std::array<size_t, 5> w{};
  for (const auto& r : rows)
    for (size_t i = 0; i < 5; ++i) w[i] = std::max(w[i], r[i].size());
  out += "tensors:\n";
  for (const auto& r : rows)
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {:>{}}\n", r[0], w[0], r[1], w[1], r[2],
                       w[2], r[3], w[3], r[4], w[4]);
  return out;
}

}  // namespace tlaloc::io
