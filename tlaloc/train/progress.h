// A progress bar for long work: items/s, a running value (loss), elapsed and ETA. On a terminal
// it redraws one line; otherwise (a pipe, a log file, CI) it prints plain lines at most every
// `plain_every` seconds so logs stay short.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace tlaloc::train {

class Progress {
 public:
  // total: items (e.g. samples) in this unit of work; label: e.g. "epoch 1/5".
  Progress(std::string label, int64_t total, std::FILE* out = stdout, double plain_every = 5.0);
  // Reports `done` items so far and the running value (NaN: none yet).
  void update(int64_t done, double value);
  // Ends the line (terminal) or prints the last plain line.
  void finish(int64_t done, double value);
  double elapsed() const;
  // The running value's name in the line ("loss" unless set, e.g. "loss (bits/byte)").
  void set_value_name(std::string name) { value_name_ = std::move(name); }

 private:
  std::string line(int64_t done, double value) const;
  std::string label_, value_name_ = "loss";
  int64_t total_;
  std::FILE* out_;
  bool tty_;
  double plain_every_;
  std::chrono::steady_clock::time_point start_;
  double last_print_ = -1e9;
  int64_t last_done_ = -1;  // `done` of the last line printed
};

}  // namespace tlaloc::train
