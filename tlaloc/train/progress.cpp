#include "tlaloc/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "tlaloc/distributed/communicator.h"

namespace tlaloc::train {

namespace {

// A terminal that redraws a line in place; under mpirun the processes' output is a pseudo
// terminal mpirun copies into wherever its own output goes (a log file, a pipe): plain lines.
bool is_terminal(std::FILE* out) {
  return isatty(fileno(out)) != 0 && distributed::world_size() == 1;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, std::FILE* out, double plain_every)
    : label_(std::move(label)),
      total_(total),
      out_(out),
      tty_(is_terminal(out)),
      plain_every_(plain_every),
      start_(std::chrono::steady_clock::now()) {}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::line(int64_t done, double value) const {
  double t = elapsed();
  double rate = t > 0 ? double(done) / t : 0;
  double eta = rate > 0 ? double(total_ - done) / rate : 0;
  double frac = total_ > 0 ? double(done) / double(total_) : 1;
  std::string bar;
  if (tty_) {
    const int width = 24;
    int fill = int(frac * width);
    bar = "[" + std::string(size_t(fill), '=') + std::string(size_t(width - fill), ' ') + "] ";
  }
  std::string val = std::isnan(value) ? "" : fmt::format("  {} {:.4f}", value_name_, value);
  return fmt::format("{} {}{:3.0f}% {:>8.0f}/s{}  {:.1f}s elapsed, ETA {:.1f}s", label_, bar,
                     100 * frac, rate, val, t, eta);
}

void Progress::update(int64_t done, double value) {
  double t = elapsed();
  if (tty_) {
    if (t - last_print_ < 0.1) return;
    fmt::print(out_, "\r{}\033[K", line(done, value));
    std::fflush(out_);
  } else {
    if (t - last_print_ < plain_every_) return;
    fmt::print(out_, "{}\n", line(done, value));
    std::fflush(out_);  // a log file or `tee` shows the line now, not at exit
  }
  last_print_ = t;
  last_done_ = done;
}

void Progress::finish(int64_t done, double value) {
  if (tty_) {
    fmt::print(out_, "\r{}\033[K\n", line(done, value));
  } else if (done != last_done_) {  // a short run's log ends at 100%, not at its first line
    fmt::print(out_, "{}\n", line(done, value));
  }
  std::fflush(out_);
}

Activity::Activity(std::string label, std::FILE* out, double quiet, double every)
    : label_(std::move(label)),
      out_(out),
      tty_(is_terminal(out)),
      quiet_(quiet),
      every_(every),
      start_(std::chrono::steady_clock::now()) {
  if (const char* env = std::getenv("TLALOC_PROGRESS_AFTER"); env && *env) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (*end == '\0' && v >= 0) quiet_ = v;
  }
  if (quiet_ <= 0) show();  // at once, however short the phase
  thread_ = std::thread([this] { run(); });
}

double Activity::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Activity::show() {
  shown_ = true;
  if (tty_)
    fmt::print(out_, "\r{}... {:.0f}s\033[K", label_, seconds());
  else
    fmt::print(out_, "{}...\n", label_);
  std::fflush(out_);
}

void Activity::run() {
  std::unique_lock<std::mutex> lock(m_);
  auto wait = [&](double s) {
    return cv_.wait_for(lock, std::chrono::duration<double>(s), [&] { return done_; });
  };
  if (!shown_) {
    if (wait(quiet_)) return;
    show();
  }
  while (!wait(tty_ ? 1.0 : every_)) {
    if (tty_)
      fmt::print(out_, "\r{}... {:.0f}s\033[K", label_, seconds());
    else
      fmt::print(out_, "{}: still running ({:.0f}s)\n", label_, seconds());
    std::fflush(out_);
  }
}

Activity::~Activity() {
  {
    std::lock_guard<std::mutex> g(m_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (!shown_) return;
  if (tty_)
    fmt::print(out_, "\r\033[K");  // the next output starts on a clean line
  else
    fmt::print(out_, "{}: done in {:.1f}s\n", label_, seconds());
  std::fflush(out_);
}

}  // namespace tlaloc::train
