#include "tlaloc/train/fit.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "tlaloc/distributed/communicator.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/metrics_csv.h"
#include "tlaloc/plot/curves.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::train {

namespace {

// The checkpoint field naming the lr schedule (optim::describe) the run was trained with.
constexpr const char* kScheduleField = "schedule";

volatile std::sig_atomic_t g_signal = 0;
// The line a signal prints when it stops the run at once: a second signal, or any signal in the
// final evaluation (which runs after the last checkpoint is written). Set outside the handler.
char g_exit_line[512];
constexpr const char* kAgainLine =
    "tlaloc: interrupted again: stopped at once, without saving (the last checkpoint written is "
    "kept whole)\n";
volatile std::sig_atomic_t g_exit_line_size = 0, g_exit_at_once = 0;

void set_exit_line(const std::string& line, bool at_once) {
  g_exit_line_size = 0;
  const size_t n = std::min(line.size(), sizeof g_exit_line);
  std::memcpy(g_exit_line, line.data(), n);
  g_exit_line_size = std::sig_atomic_t(n);
  g_exit_at_once = at_once;
}

extern "C" void on_stop_signal(int sig) {
  if (g_signal || g_exit_at_once) {  // stop now, leaving no temporary behind
    if (g_exit_line_size > 0) {
      const ssize_t w = ::write(STDERR_FILENO, g_exit_line, size_t(g_exit_line_size));
      (void)w;
    }
    io::remove_live_temporaries();
    _exit(130);
  }
  g_signal = sig;
}

// SIGINT and SIGTERM set g_signal while it lives; the previous handlers come back after.
class SignalGuard {
 public:
  explicit SignalGuard(bool on) : on_(on) {
    if (!on_) return;
    g_signal = 0;
    set_exit_line(kAgainLine, false);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalGuard() {
    if (!on_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    set_exit_line("", false);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  int signal() const { return on_ ? int(g_signal) : 0; }

 private:
  bool on_;
  struct sigaction old_int_ {
  }, old_term_{};
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The run's metrics rows (io/metrics_csv.h), kept for the plot and appended to the CSV
// (FitOptions::metrics), every write flushed and checked.
class MetricsLog {
 public:
  explicit MetricsLog(const FitOptions& o) : o_(o) {
    if (o.metrics.empty()) return;
    std::error_code ec;
    const auto size = std::filesystem::file_size(o.metrics, ec);
    const bool fresh = ec || size == 0;
    f_ = std::fopen(o.metrics.c_str(), "a");
    if (!f_)
      fail("{}: --metrics {}: cannot open for writing: {}", o.name, o.metrics,
           std::strerror(errno));
    if (fresh) {
      write(io::metrics_header());
    } else if (std::FILE* r = std::fopen(o.metrics.c_str(), "rb")) {
      // A last line without its newline (an editor's, a killed writer's) ends before our rows.
      const bool open_line = std::fseek(r, -1, SEEK_END) == 0 && std::fgetc(r) != '\n';
      std::fclose(r);
      if (open_line) write("\n");
    }
  }
  ~MetricsLog() {
    if (f_) std::fclose(f_);
  }
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Adds a row (epoch: 0-based) with the evaluation's values in their columns.
  void add(const char* kind, int64_t step, int64_t epoch, double train_loss, const Metrics& m,
           double lr, double wall_s);
  const std::vector<io::MetricsRow>& rows() const { return rows_; }

 private:
  void write(const std::string& s) {
    if (std::fputs(s.c_str(), f_) < 0 || std::fflush(f_) != 0 || std::ferror(f_))
      fail("{}: --metrics {}: cannot write: {}", o_.name, o_.metrics, std::strerror(errno));
  }
  const FitOptions& o_;
  std::FILE* f_ = nullptr;
  std::vector<io::MetricsRow> rows_;
};

void MetricsLog::add(const char* kind, int64_t step, int64_t epoch, double train_loss,
                     const Metrics& m, double lr, double wall_s) {
  io::MetricsRow r;
  r.kind = kind;
  r.step = step;
  r.epoch = epoch + 1;
  r.train_loss = train_loss;
  r.lr = lr;
  r.wall_s = wall_s;
  for (const auto& [name, v] : m) {
    if (name == "val_loss")
      r.val_loss = v;
    else if (name == "val_accuracy")
      r.val_accuracy = v;
    else
      fail(
          "{}: the evaluation reported '{}', which is not a metrics column (val_loss, "
          "val_accuracy)",
          o_.name, name);
  }
  rows_.push_back(r);
  if (f_) write(io::format_metrics_row(r));
}

// Draws the rows' curves to o.plot (then, when `announce`, "plotted F (step N)"); returns the
// rows drawn (0: none yet, before the first loss read).
size_t plot_curves(const FitOptions& o, const std::vector<io::MetricsRow>& rows, int64_t step,
                   bool announce) {
  plot::Run run{o.name, o.name, rows};
  const plot::RunSeries series = plot::series_of(run);
  if (series.train.empty() && series.val.empty()) return 0;
  plot::CurveOptions co;
  co.title = fmt::format("{} (step {})", o.name, step);
  plot::write_file(o.plot, plot::render_curves({run}, co));
  if (announce) fmt::print(o.out, "plotted {} (step {})\n", o.plot, step);
  return rows.size();
}

// A resumed run may change its lr, schedule or other hyper-parameters (to extend or fine-tune a
// run), so they are not refused as the model's fields are; each change gets a note, as the run
// is then not the one it continues. (PyTorch's load_state_dict would bring the checkpoint's back;
// the command line here is taken at its word.)
void note_changed_hyper_parameters(const Trainer& t, const io::Checkpoint& c, const FitOptions& o) {
  const std::string& path = *o.resume;
  if (auto s = c.user.find(kScheduleField);
      s != c.user.end() && s->second != optim::describe(t.schedule()))
    fmt::print(o.out,
               "note: {} was trained with the lr schedule '{}', this run has '{}': from step {} "
               "the lr follows this run's ({:.6g} now)\n",
               path, s->second, optim::describe(t.schedule()), t.steps_taken(), t.current_lr());
  if (c.optimizer != optim::name(t.optimizer())) return;  // restore refused it already
  const auto now = hyper_parameters(t.optimizer());
  for (const auto& [k, v] : c.hyper_parameters)
    if (auto h = now.find(k); h != now.end() && h->second != v)
      fmt::print(o.out,
                 "note: {} was trained with {}={}, this run has {}={} (this run's is used)\n", path,
                 k, v, k, h->second);
}

void resume(Trainer& t, const FitOptions& o) {
  const std::string& path = *o.resume;
  io::Checkpoint c = o.format ? o.format->load(path) : io::load_checkpoint(path);
  check_resume_fields(c, path, o.metadata, o.seed);
  if (c.step >= o.steps)
    fail("--resume {}: it is at step {} already; this run ends at step {}: nothing to train", path,
         c.step, o.steps);
  // Finite numbers, second moments >= 0, a step count that agrees with itself: a damaged or
  // edited file would only train into NaN or replay steps.
  check_resumable(c, "--resume " + c.source);
  restore(t, c);
  fmt::print(o.out, "resumed from {} at step {}\n", path, t.steps_taken());
  // Another process count keeps the global batch (each rank takes another share of it); the
  // sums then run in another order, so the run is not bitwise the one it continues.
  const std::string n = std::to_string(distributed::world_size());
  const auto was = c.user.find("world_size");
  const std::string had = was == c.user.end() ? "1" : was->second;
  if (had != n)
    fmt::print(o.out,
               "note: {} was trained by {} process{}, this run has {}: the global batch is kept, "
               "the gradient sums run in another order (not bitwise the run it continues)\n",
               path, had, had == "1" ? "" : "es", n);
  note_changed_hyper_parameters(t, c, o);
}

}  // namespace

void check(const FitOptions& o) {
  if (o.steps < 1) fail("{}: the run has {} steps; it needs at least 1", o.name, o.steps);
  if (o.log_every < 1) fail("{}: --log-every {} must be >= 1", o.name, o.log_every);
  if (o.max_consecutive_skips < 1)
    fail("{}: max_consecutive_skips {} must be >= 1", o.name, o.max_consecutive_skips);
  const std::pair<const char*, int64_t> counts[] = {{"--save-every", o.save_every},
                                                    {"--stop-after", o.stop_after},
                                                    {"--eval-every", o.eval_every},
                                                    {"steps per epoch", o.steps_per_epoch}};
  for (const auto& [flag, v] : counts)
    if (v < 0) fail("{}: {} {} must be >= 0", o.name, flag, v);
  if (o.resume && o.resume->empty())
    fail("{}: --resume is empty (an unset variable?); omit it to train from scratch", o.name);
  if (o.resume) {  // a typo fails now, not after the data is loaded and the step compiled
    struct stat st {};
    if (::stat(o.resume->c_str(), &st) != 0)
      fail("{}: --resume {}: {}", o.name, *o.resume, std::strerror(errno));
    const bool folder = o.format && o.format->folder;
    if (S_ISDIR(st.st_mode) != folder)
      fail("{}: --resume {} is {}", o.name, *o.resume,
           folder ? "not a folder (a model directory)" : "a folder, not a checkpoint");
  }
  if (o.format && !(o.format->check_output && o.format->save && o.format->load))
    fail("{}: a checkpoint format needs check_output, save and load", o.name);
  if (o.save) {
    if (o.format)
      o.format->check_output(*o.save, o.name + ": --save");
    else
      io::check_checkpoint_output(*o.save, o.name + ": --save");
  }
  if (!(o.time_limit_seconds >= 0) || !std::isfinite(o.time_limit_seconds))
    fail("{}: the time limit {} s must be finite and >= 0", o.name, o.time_limit_seconds);
  // Appending CSV rows to the checkpoint, or a picture over it, would make it unreadable; a
  // model directory's checkpoint is also the training state beside it.
  std::vector<std::string> checkpoint_files;
  for (const auto* ck : {&o.save, &o.resume}) {
    if (!*ck) continue;
    checkpoint_files.push_back(**ck);
    if (o.format && o.format->folder) checkpoint_files.push_back(io::training_state_path(**ck));
  }
  for (const auto& [flag, path] : {std::pair{"--metrics", &o.metrics}, {"--plot", &o.plot}}) {
    if (path->empty()) continue;
    for (const std::string& ck : checkpoint_files)
      if (io::same_file(*path, ck))
        fail("{}: {} {} is the checkpoint file {} too; give it a file of its own", o.name, flag,
             *path, ck);
  }
  if (!o.plot.empty() && !o.metrics.empty() && io::same_file(o.plot, o.metrics))
    fail("{}: --plot {} is the --metrics file too; give the picture a file of its own", o.name,
         o.plot);
  if (!o.metrics.empty()) {
    io::check_output_file(o.metrics, o.name + ": --metrics", io::OutputMode::append);
    io::check_metrics_header(o.metrics, o.name + ": --metrics", !o.resume);
  }
  if (!o.plot.empty()) io::check_output_file(o.plot, o.name + ": --plot", io::OutputMode::replace);
  if (!o.plot.empty())  // after the checks above, whose messages say more
    io::check_output_png(o.plot, o.name + ": --plot",
                         o.format && o.format->folder ? o.save : std::nullopt);
  if (!o.items_per_step || o.items_per_step < 0 || o.items_per_epoch < 0)
    fail("{}: items per step {} and per epoch {} must be >= 0 (per step > 0)", o.name,
         o.items_per_step, o.items_per_epoch);
  if (!(o.progress_unit > 0) || !std::isfinite(o.progress_unit))
    fail("{}: the progress unit {} must be finite and > 0", o.name, o.progress_unit);
}

io::WriteLock lock_outputs(const FitOptions& o) {
  // Under data parallelism rank 0 alone writes files (the others' state is the same).
  return o.save && distributed::is_root() ? io::WriteLock(*o.save, o.name + ": --save")
                                          : io::WriteLock();
}

namespace {

// The check's line; when it failed, a warning naming the worst tensor (warn) or an error.
void report_cross_check(const CrossCheckReport& r, const FitOptions& o) {
  fmt::print(o.out, "{}\n", r.summary());
  if (r.passed()) return;
  const TensorScore& bad = !r.loss_passed()        ? r.loss
                           : !r.gradients_passed() ? r.worst_gradient()
                                                   : r.worst_update();
  const std::string what =
      &bad == &r.loss
          ? std::string("loss")
          : fmt::format("{} of {}", r.gradients_passed() ? "update" : "gradient", bad.name);
  const double limit = &bad == &r.loss        ? r.thresholds.loss
                       : r.gradients_passed() ? r.thresholds.update
                                              : r.thresholds.gradient;
  const std::string detail = bad.problem.empty()
                                 ? fmt::format("relative error {:.1e} > {:.0e}", bad.score, limit)
                                 : bad.problem;
  if (o.cross_check == CrossCheckMode::require)
    fail(
        "{}: the pjrt lane's {} disagrees with the host lane's ({}); stopped before the first "
        "step (--cross-check require)",
        o.name, what, detail);
  fmt::print(o.out,
             "warning: the pjrt lane's {} disagrees with the host lane's ({}); training goes on "
             "(--cross-check require stops here)\n",
             what, detail);
}

}  // namespace

FitResult fit(Trainer& t, const FitOptions& o, const FitCallbacks& cb) {
  check(o);
  const io::WriteLock lock = lock_outputs(o);  // shared with the caller's, when it took one
  if (o.resume) resume(t, o);
  const int64_t first = t.steps_taken();
  bool warned_skip = false;    // a skipped update was reported
  int64_t skips_in_a_row = 0;  // with loss scaling
  const bool by_epoch = o.steps_per_epoch > 0;
  const int64_t spe = by_epoch ? o.steps_per_epoch : o.steps;
  const int64_t epoch_items = o.items_per_epoch > 0 ? o.items_per_epoch : spe * o.items_per_step;
  auto batch = [&](int64_t s) {
    return cb.batch ? cb.batch(StepPosition{s, s / spe, s % spe}) : Batch{};
  };
  if (o.cross_check != CrossCheckMode::off && t.lane() == Lane::pjrt)  // on the next batch
    report_cross_check(cross_check(t, batch(first)), o);
  // Data parallelism: rank 0 writes the metrics, pictures and checkpoints; stops (a signal, the
  // time limit) are agreed by all ranks at the same step.
  const bool root = distributed::is_root(), many = distributed::world_size() > 1;
  FitOptions written = o;
  if (!root) written.metrics.clear();
  MetricsLog log(written);
  SignalGuard signals(o.handle_signals);
  if (many) distributed::world().barrier();  // the clocks start together (startup skew aside)
  auto stop_signal = [&] {
    int32_t sig = signals.signal();
    if (many) distributed::world().all_reduce(&sig, 1, DType::s32, distributed::Reduction::max);
    return int(sig);
  };
  const auto run_start = std::chrono::steady_clock::now();
  // The lr of the last step taken (group 0), for the metrics rows.
  auto last_lr = [&] { return t.steps_taken() > 0 ? t.lr_at(t.steps_taken() - 1) : NAN; };

  auto check_loss = [&](double l) {
    if (!std::isfinite(l))
      fail(
          "{}: the training loss is {} at step {} (diverged; try a lower --lr); no checkpoint "
          "written",
          o.name, std::isnan(l) ? std::fabs(l) : l, t.steps_taken());  // NaN's sign says nothing
  };
  // Loss scaling skips steps by design; endlessly is an error. The skip flags are read as the
  // steps finish (on pjrt without waiting for those in flight), all of them before a log, an
  // evaluation or a save, so nothing is saved past the run of skips.
  auto count_skips = [&](bool all) {
    if (!t.loss_scaling()) return;
    for (const auto& [step, skipped] : t.take_skips(!all)) {
      skips_in_a_row = skipped ? skips_in_a_row + 1 : 0;
      if (skips_in_a_row >= o.max_consecutive_skips)
        fail(
            "{}: the last {} steps all had inf or NaN gradients (the f16 loss scale is down to "
            "{:.3g}), so no update was made since step {}: the gradients overflow at any scale "
            "(a diverging run: try a lower --lr; or a model f16 cannot hold: --precision bf16 "
            "or f32); nothing was saved past the last checkpoint",
            o.name, skips_in_a_row, t.loss_scale(), step - skips_in_a_row);
    }
  };
  int64_t saved_at = -1;  // the step of this run's last save: the end does not save it twice
  auto save_checkpoint = [&](bool announce = true) {
    if (!o.save || saved_at == t.steps_taken()) return;
    count_skips(true);
    if (t.steps_taken() > first) check_loss(t.read_last().loss);
    auto meta = o.metadata;
    if (many) meta["world_size"] = std::to_string(distributed::world_size());
    meta[kScheduleField] = optim::describe(t.schedule());  // noted, not refused, on resume
    io::Checkpoint c = to_checkpoint(t, o.seed, t.steps_taken(), std::move(meta));
    if (!root) {  // written once, by rank 0, after every rank reached the step
      distributed::world().barrier();
      saved_at = t.steps_taken();
      return;
    }
    if (o.format)
      o.format->save(*o.save, c);
    else
      io::save_checkpoint(*o.save, c);
    if (many) distributed::world().barrier();
    if (announce) fmt::print(o.out, "saved {} (step {})\n", *o.save, t.steps_taken());
    saved_at = t.steps_taken();
  };
  size_t plotted_rows = 0;  // the rows the last picture drew: an unchanged one is not redrawn
  auto write_plot = [&](bool announce = true) {
    if (root && !o.plot.empty() && plotted_rows != log.rows().size())
      plotted_rows = plot_curves(o, log.rows(), t.steps_taken(), announce);
  };
  // A save point: the checkpoint, then the picture (at the last step only at the end, which
  // adds the last evaluation and the final row).
  auto save = [&](bool end = false) {
    save_checkpoint();
    if (end || t.steps_taken() < o.steps) write_plot();
  };
  if (many) {  // every process starts from the same state (the same --resume file, seed, ...)
    uint64_t h = distributed::fnv1a(fmt::format("step {}\n", t.steps_taken()));
    for (const auto& group : {t.named_parameters(), t.named_buffers()})
      for (const auto& [name, a] : group)
        h = distributed::fnv1a(std::string_view(static_cast<const char*>(a.raw()), a.nbytes()),
                               distributed::fnv1a(name, h));
    if (int r = distributed::first_rank_differing(h); r >= 0)
      fail(
          "{}: data parallel: rank {} starts from other parameters than rank 0 (at step {}): "
          "every process must start from the same state (the same --resume file and options)",
          o.name, r, t.steps_taken());
  }
  if (many) {  // who trains, and (ZeRO-1) how the optimizer state is split
    const auto held = t.state_elements_per_rank();
    std::string per;
    int64_t total = 0;
    for (int64_t h : held) per += (per.empty() ? "" : ", ") + std::to_string(h);
    for (int64_t h : held) total += h;
    fmt::print(o.out,
               "data parallel: {}; {}; optimizer state elements held per rank: {} ({} in all{})\n",
               distributed::world().describe(),
               t.splits_batches() || o.splits_in_program
                   ? fmt::format("each process takes 1/{} of every batch", held.size())
                   : std::string("every process runs the whole batch (this job does not split it)"),
               per, total, t.zero() ? ", ZeRO-1" : "");
  }
  auto report_collectives = [&] {
    if (many)
      fmt::print(o.out, "data parallel: {:.3f} s of {:.3f} s in all-reduce / all-gather (rank 0)\n",
                 distributed::world().collective_seconds(), seconds_since(run_start));
  };
  FitResult r;
  auto interrupted = [&](int sig) {
    if (o.save)
      fmt::print(o.out, "interrupted at step {}: continue with --resume {}\n", t.steps_taken(),
                 *o.save);
    else
      fmt::print(o.out, "interrupted at step {} (no --save: nothing saved)\n", t.steps_taken());
    r.interrupted = true;
    r.signal = sig;
    r.steps = t.steps_taken();
    return r;
  };
  if (cb.on_start) cb.on_start();

  auto out_of_time = [&] {
    if (!(o.time_limit_seconds > 0)) return false;
    return distributed::any(seconds_since(run_start) >= o.time_limit_seconds);
  };
  while (t.steps_taken() < o.steps && !r.out_of_time) {
    const int64_t epoch = t.steps_taken() / spe, first_b = t.steps_taken() % spe;
    const int64_t end_b = std::min(spe, o.steps - epoch * spe);
    // Items done after `b` batches: within the epoch, or since this process started.
    auto done = [&](int64_t b) {
      return by_epoch ? std::min(epoch_items, b * o.items_per_step)
                      : (b - first) * o.items_per_step;
    };
    std::unique_ptr<Progress> bar;  // (a pointer: GCC 12 warns of an optional's strings here)
    if (o.progress) {
      std::string label =
          by_epoch ? fmt::format("epoch {}/{}", epoch + 1, (o.steps + spe - 1) / spe)
                   : (first > 0 ? fmt::format("{} (from step {})", o.name, first) : o.name);
      bar = std::make_unique<Progress>(label, by_epoch ? epoch_items : done(o.steps), o.out);
      bar->set_value_name(o.progress_value);
    }
    const auto epoch_start = std::chrono::steady_clock::now();
    double loss_sum = 0, last = NAN, eval_seconds = 0;
    int64_t reads = 0;
    auto bar_value = [&] {
      return (o.progress_mean ? (reads ? loss_sum / double(reads) : NAN) : last) / o.progress_unit;
    };
    auto evaluate = [&](const char* kind, bool epoch_end, int64_t b) {
      if (!cb.evaluate) return;
      count_skips(true);
      const auto t0 = std::chrono::steady_clock::now();
      EvalPoint p{t.steps_taken(),
                  epoch,
                  epoch_end,
                  loss_sum / double(std::max<int64_t>(reads, 1)),
                  seconds_since(epoch_start) - eval_seconds,
                  done(b) - done(first_b)};
      const Metrics m = cb.evaluate(p);
      log.add(kind, p.step, epoch, reads ? p.train_loss : NAN, m, last_lr(),
              seconds_since(run_start));
      eval_seconds += seconds_since(t0);
    };
    for (int64_t b = first_b; b < end_b; ++b) {
      if (int sig = stop_signal()) {
        if (bar) bar->finish(done(b), bar_value());
        save();
        return interrupted(sig);
      }
      if (o.stop_after > 0 && t.steps_taken() >= o.stop_after) {
        save();
        fmt::print(o.out, "stopped after {} steps (--stop-after)\n", t.steps_taken());
        report_collectives();
        r.stopped = true;
        r.steps = t.steps_taken();
        return r;
      }
      t.step(batch(t.steps_taken()));
      count_skips(false);
      if ((b + 1) % o.log_every == 0 || b + 1 == end_b) {
        count_skips(true);
        StepLog read{t.steps_taken(), epoch, b, t.read_last()};
        check_loss(read.report.loss);
        if (read.report.found_inf && !warned_skip && root &&
            !t.loss_scaling()) {  // a finite loss, a non-finite gradient
          fmt::print(stderr,
                     "{}: warning: step {} skipped its update (a gradient held inf or NaN); the "
                     "run goes on, later skips are not reported\n",
                     o.name, read.step);
          warned_skip = true;
        }
        loss_sum += read.report.loss;
        last = read.report.loss;
        ++reads;
        if (bar) bar->update(done(b + 1), bar_value());
        log.add("step", t.steps_taken(), epoch, read.report.loss, {}, last_lr(),
                seconds_since(run_start));
        if (cb.on_log) cb.on_log(read);
      }
      if (o.eval_every > 0 && t.steps_taken() % o.eval_every == 0) evaluate("eval", false, b + 1);
      if (o.save_every > 0 && t.steps_taken() % o.save_every == 0) save();
      if (t.steps_taken() < o.steps && out_of_time()) {  // ends the run here, reported and saved
        r.out_of_time = r.stopped = true;
        if (bar) bar->finish(done(b + 1), bar_value());
        bar.reset();
        break;
      }
    }
    if (r.out_of_time) break;
    if (bar) bar->finish(done(end_b), bar_value());
    if (by_epoch) evaluate("epoch", true, end_b);
  }
  if (r.out_of_time)
    fmt::print(o.out, "stopped at step {} of {}: the time limit of {:.4g} minute{} is reached{}\n",
               t.steps_taken(), o.steps, o.time_limit_seconds / 60,
               o.time_limit_seconds == 60 ? "" : "s",
               o.save ? " (continue with --resume " + *o.save + ")" : "");
  // The checkpoint is written before the final evaluation, so a signal during it (which stops
  // the run at once) loses no step; its line is printed after the evaluation, as before.
  const bool unsaved = o.save && saved_at != t.steps_taken();
  save_checkpoint(false);
  if (int sig = stop_signal()) {
    if (unsaved && root) fmt::print(o.out, "saved {} (step {})\n", *o.save, t.steps_taken());
    write_plot();
    return interrupted(sig);
  }
  if (o.handle_signals) {
    // The picture too, so that a signal in the evaluation leaves one (redrawn, announced, after).
    write_plot(false);
    plotted_rows = 0;
    std::string where = " (no --save: nothing saved)";
    if (o.save && t.steps_taken() < o.steps)
      where = fmt::format("; {} holds step {} (continue with --resume {})", *o.save,
                          t.steps_taken(), *o.save);
    else if (o.save)
      where = fmt::format("; {} holds step {}, the run's last (only the final evaluation is lost)",
                          *o.save, t.steps_taken());
    set_exit_line(
        fmt::format("{}: interrupted in the final evaluation: stopped{}\n", o.name, where), true);
  }
  if (cb.on_end) cb.on_end(t.steps_taken() - first, seconds_since(run_start));
  if (const Metrics m = cb.final_metrics ? cb.final_metrics() : Metrics{}; !m.empty()) {
    log.add("final", t.steps_taken(), (t.steps_taken() - 1) / spe, NAN, m, last_lr(),
            seconds_since(run_start));
  }
  if (o.handle_signals) set_exit_line(kAgainLine, false);
  if (unsaved && root) fmt::print(o.out, "saved {} (step {})\n", *o.save, t.steps_taken());
  write_plot();
  report_collectives();
  r.steps = t.steps_taken();
  return r;
}

}  // namespace tlaloc::train
