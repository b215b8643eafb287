// Helpers shared by the train tests.
#pragma once

#include <vector>

#include "tlaloc/train/trainer.h"

namespace tlaloc::train_test {

// Runs n steps with no per-step data and returns each step's loss (read back every step).
inline std::vector<double> step_losses(train::Trainer& t, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i) {
    t.step({});
    losses.push_back(t.read_last().loss);
  }
  return losses;
}

}  // namespace tlaloc::train_test
