// The parts of convolution's text that no other op uses: its dimension numbers
// (#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>) and its i64 padding
// (dense<...> : tensor<Nx2xi64>).
#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "tlaloc/stablehlo/parse_ast.h"

namespace tlaloc::stablehlo::detail {
namespace {

int64_t to_int(std::string_view s, Loc loc, const char* what) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    error_at(loc, fmt::format("{}: expected an integer, found '{}'", what, s));
  return v;
}

// One "[b, f, 0, 1]" list: its entries, spaces removed.
std::vector<std::string> layout_list(std::string_view s, Loc loc) {
  std::string t;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  if (t.size() < 2 || t.front() != '[' || t.back() != ']')
    error_at(loc, fmt::format("convolution dimension_numbers: '{}' is not a [..] list", s));
  std::vector<std::string> v;
  std::string cur;
  for (size_t i = 1; i + 1 < t.size(); ++i) {
    if (t[i] == ',') {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += t[i];
    }
  }
  if (!cur.empty() || !v.empty()) v.push_back(cur);
  return v;
}

// Sets the two named axes and the spatial ones of one tensor from its list.
void assign(const std::vector<std::string>& v, char c1, int64_t* d1, char c2, int64_t* d2,
            std::vector<int64_t>* spatial, Loc loc) {
  *d1 = *d2 = -1;
  std::vector<int64_t> sp(v.size(), -1);
  size_t count = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == std::string(1, c1) && *d1 < 0) {
      *d1 = int64_t(i);
    } else if (v[i] == std::string(1, c2) && *d2 < 0) {
      *d2 = int64_t(i);
    } else {
      const int64_t k = to_int(v[i], loc, "convolution dimension_numbers");
      if (k < 0 || size_t(k) >= v.size() || sp[size_t(k)] >= 0)
        error_at(loc,
                 fmt::format("convolution dimension_numbers: bad or repeated entry '{}'", v[i]));
      sp[size_t(k)] = int64_t(i);
      ++count;
    }
  }
  if (*d1 < 0 || *d2 < 0)
    error_at(loc, fmt::format("convolution dimension_numbers: a list lacks '{}' or '{}'", c1, c2));
  sp.resize(count);
  for (int64_t x : sp)
    if (x < 0) error_at(loc, "convolution dimension_numbers: spatial dims must be 0, 1, ...");
  *spatial = sp;
}

}  // namespace

ir::ConvDimensionNumbers conv_layout(const Attr& a) {
  const std::string& s = a.s;
  const size_t x = s.find("]x["), arrow = s.find("->");
  if (x == s.npos || arrow == s.npos || arrow < x)
    error_at(a.loc, fmt::format("convolution dimension_numbers '{}': expected [..]x[..]->[..]", s));
  ir::ConvDimensionNumbers d;
  assign(layout_list(s.substr(0, x + 1), a.loc), 'b', &d.input_batch_dimension, 'f',
         &d.input_feature_dimension, &d.input_spatial_dimensions, a.loc);
  assign(layout_list(s.substr(x + 2, arrow - x - 2), a.loc), 'o',
         &d.kernel_output_feature_dimension, 'i', &d.kernel_input_feature_dimension,
         &d.kernel_spatial_dimensions, a.loc);
  assign(layout_list(s.substr(arrow + 2), a.loc), 'b', &d.output_batch_dimension, 'f',
         &d.output_feature_dimension, &d.output_spatial_dimensions, a.loc);
  return d;
}

void i64_dense(Attr* a, std::string_view type, const std::vector<std::string>& elems,
               const std::vector<int64_t>& nest, bool list, bool empty) {
  // type: "tensor<AxBx...xi64>"
  if (!type.starts_with("tensor<") || !type.ends_with("i64>"))
    error_at(a->loc, fmt::format("bad i64 tensor type '{}'", type));
  std::vector<int64_t> shape;
  std::string_view dims = type.substr(7, type.size() - 7 - 4);
  int64_t n = 1;
  while (!dims.empty()) {
    const size_t e = dims.find('x');
    if (e == dims.npos) error_at(a->loc, fmt::format("bad i64 tensor type '{}'", type));
    shape.push_back(to_int(dims.substr(0, e), a->loc, "i64 tensor type"));
    if (shape.back() < 0 || shape.back() > (int64_t(1) << 20))
      error_at(a->loc, fmt::format("i64 tensor type '{}' is too large", type));
    n *= shape.back();
    dims.remove_prefix(e + 1);
  }
  a->kind = Attr::I64Dense;
  a->dn["shape"] = shape;
  a->ints.clear();
  if (empty) {
    if (n != 0) error_at(a->loc, fmt::format("dense<> for {} elements", n));
  } else if (!list || (elems.size() == 1 && nest.empty())) {
    a->ints.assign(size_t(n), to_int(elems.at(0), a->loc, "i64 constant"));
  } else {
    if (nest != shape || int64_t(elems.size()) != n)
      error_at(a->loc,
               fmt::format("i64 constant has {} elements but the type is {}", elems.size(), type));
    for (const std::string& e : elems) a->ints.push_back(to_int(e, a->loc, "i64 constant"));
  }
}

}  // namespace tlaloc::stablehlo::detail
