#include "tlaloc/io/json_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "tlaloc/core/error.h"

namespace tlaloc::io {

using json = nlohmann::json;

namespace {
// Larger JSON files are refused unread (a 1T-parameter model's index is ~10 MB).
constexpr uint64_t kMaxJsonFileBytes = 256 << 20;
}  // namespace

json read_json_object(const std::string& path, std::string_view noun, int max_depth) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("{}: cannot read: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
  if (uint64_t(st.st_size) > kMaxJsonFileBytes)
    fail("{}: {} bytes, over the {} bytes tlaloc reads as JSON", path, st.st_size,
         kMaxJsonFileBytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read: {}", path, std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("{}: read failed", path);
  json j = parse_json_strict(text, path, noun, max_depth);
  if (!j.is_object()) fail("{}: holds {}, not a JSON object", path, json_kind(j));
  return j;
}

const char* json_kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a float";
    default:
      return "not a JSON value";
  }
}

namespace {

// A SAX pass that builds nothing: nesting depth and duplicate keys, refused by name. (nlohmann's
// parser callback would do the same while building, but it rescans the parent object at every
// object's end: quadratic in a safetensors header's thousands of entries.)
struct StrictSax : nlohmann::json_sax<json> {
  const std::string& src;
  std::string_view noun;
  int max_depth, depth = 0;
  std::vector<std::set<std::string>> keys;

  StrictSax(const std::string& s, std::string_view n, int d) : src(s), noun(n), max_depth(d) {}
  bool open() {
    if (++depth > max_depth)
      fail("{}: {} nests deeper than the format's {} levels", src, noun, max_depth);
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys.emplace_back();
    return open();
  }
  bool key(string_t& k) override {
    if (!keys.back().insert(k).second)
      fail("{}: {} has the key '{}' twice in one object", src, noun, k);
    return true;
  }
  bool end_object() override {
    keys.pop_back();
    --depth;
    return true;
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override {
    --depth;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail("{}: {} is not valid JSON: {}", src, noun, e.what());
  }
};

}  // namespace

json parse_json_strict(std::string_view text, const std::string& src, std::string_view noun,
                       int max_depth) {
  StrictSax sax(src, noun, max_depth);
  json::sax_parse(text.begin(), text.end(), &sax);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail("{}: {} is not valid JSON: {}", src, noun, e.what());
  }
}

std::string hf_json_text(const json& value) {
  // nlohmann::json keeps object keys sorted; dump(2) separates as Python's indent mode does.
  return value.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

}  // namespace tlaloc::io
