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

json parse_json_strict(std::string_view text, const std::string& src, std::string_view noun,
                       int max_depth) {
  std::vector<std::set<std::string>> keys;
  int depth = 0;
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        [[fallthrough]];
      case json::parse_event_t::array_start:
        if (++depth > max_depth)
          fail("{}: {} nests deeper than the format's {} levels", src, noun, max_depth);
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        [[fallthrough]];
      case json::parse_event_t::array_end:
        --depth;
        break;
      case json::parse_event_t::key: {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(k).second)
          fail("{}: {} has the key '{}' twice in one object", src, noun, k);
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    fail("{}: {} is not valid JSON: {}", src, noun, e.what());
  }
}

std::string hf_json_text(const json& value) {
  // nlohmann::json keeps object keys sorted; dump(2) separates as Python's indent mode does.
  return value.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

}  // namespace tlaloc::io
