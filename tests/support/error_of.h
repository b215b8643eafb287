// The message of the tlaloc::Error a piece of test code throws, for exact-message checks.
#pragma once

#include <functional>
#include <string>

#include "tlaloc/core/error.h"

namespace tlaloc::testing {

// What `f` throws as a tlaloc::Error, or "(no error)" when it returns.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tlaloc::testing
