// A FILE* whose writes the test reads back (what fit prints, through FitOptions' output).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tlaloc::testing {

struct CapturedOutput {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  CapturedOutput() = default;
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;
  ~CapturedOutput() {
    std::fclose(f);
    std::free(buf);
  }
  std::string text() {
    std::fflush(f);
    return std::string(buf, len);
  }
};

}  // namespace tlaloc::testing
