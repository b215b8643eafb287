// tlaloc::Error: the one exception type of the library. Messages name the op / tensor / file
// and the values that disagree.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace tlaloc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Throws tlaloc::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// Bytes of user input for a message: cut to `max` bytes, in quotes, bytes outside printable ASCII
// as \xNN (a binary file's bytes would ring bells, or end the message at a NUL).
inline std::string quoted(std::string_view s, size_t max = 40) {
  std::string out = "\"";
  for (char ch : s.substr(0, max)) {
    const auto c = static_cast<unsigned char>(ch);
    out += c >= 0x20 && c < 0x7f ? std::string(1, ch) : fmt::format("\\x{:02x}", c);
  }
  return out + (s.size() > max ? "...\"" : "\"");
}

}  // namespace tlaloc
