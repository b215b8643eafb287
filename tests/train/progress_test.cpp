// train::Activity, the line a long phase (compiling, evaluating, validating) shows: nothing for a
// phase shorter than its quiet time, else "LABEL..." / "LABEL: done in N.Ns" in a log;
// TLALOC_PROGRESS_AFTER replaces the quiet time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tlaloc/train/progress.h"

namespace tlaloc::train {
namespace {

// What a phase of `seconds` under an Activity(quiet, every) prints to a file (not a terminal).
std::string printed(double seconds, double quiet, double every = 30) {
  std::FILE* f = std::tmpfile();
  {
    Activity a("validating", f, quiet, every);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
  std::string text(size_t(std::ftell(f)), '\0');
  std::rewind(f);
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  return text;
}

TEST(Activity, AShortPhasePrintsNothing) { EXPECT_EQ(printed(0.01, 5.0), ""); }

TEST(Activity, ALongPhaseSaysWhatRunsAndWhenItEnds) {
  const std::string text = printed(0.6, 0.05, 0.1);
  EXPECT_EQ(text.rfind("validating...\nvalidating: still running (", 0), 0u) << text;
  EXPECT_NE(text.find("\nvalidating: done in 0."), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(Activity, TheEnvironmentSetsTheQuietTime) {
  setenv("TLALOC_PROGRESS_AFTER", "0", 1);
  const std::string text = printed(0.05, 5.0);
  unsetenv("TLALOC_PROGRESS_AFTER");
  EXPECT_EQ(text.rfind("validating...\nvalidating: done in ", 0), 0u) << text;
}

}  // namespace
}  // namespace tlaloc::train
