// Progress of long work. Progress: a bar with items/s, a running value (loss), elapsed and ETA;
// on a terminal it redraws one line, otherwise (a pipe, a log file, CI) it prints plain lines at
// most every `plain_every` seconds so logs stay short. Activity: what a long phase without
// items to count is doing (compiling, evaluating, validating).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
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

// A long phase without a bar of its own (compiling a step, evaluating, validating), so a run
// never sits silent for long: once it has run `quiet` seconds, a terminal shows a transient
// line "LABEL... 12s", redrawn every second and erased at the end; elsewhere (a pipe, a log) it
// prints "LABEL..." once, "LABEL: still running (Ns)" every `every` seconds and "LABEL: done in
// N.Ns" at the end. A shorter phase prints nothing, so quick runs' output is unchanged. The
// environment variable TLALOC_PROGRESS_AFTER (seconds) replaces `quiet` (0: show every phase).
// Nothing else may print to `out` while it lives (a helper thread writes the lines).
class Activity {
 public:
  Activity(std::string label, std::FILE* out = stdout, double quiet = 5.0, double every = 30.0);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

 private:
  void run();
  void show();  // the first line (m_ held, or before the thread starts)
  double seconds() const;
  std::string label_;
  std::FILE* out_;
  bool tty_;
  double quiet_, every_;
  std::chrono::steady_clock::time_point start_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  bool shown_ = false;  // a line was printed (read by the destructor after join)
  std::thread thread_;
};

}  // namespace tlaloc::train
