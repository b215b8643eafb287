// tlaloc::Error: the one exception type of the library. Messages name the op / tensor / file
// and the values that disagree.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

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

}  // namespace tlaloc
