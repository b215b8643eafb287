// fit: the training loop every recipe shares. It runs a Trainer for a number of steps (or of
// epochs of a fixed number of steps), asking a callback for each step's per-step inputs; reads
// the loss every `log_every` batches (the only per-step download) for the progress bar, the
// log callback and the metrics CSV; evaluates at each epoch's end and / or every N steps;
// saves checkpoints every N steps, at the end and when interrupted; resumes from a checkpoint.
//
// Guarantees:
//   * Resume is a bitwise continuation: the checkpoint restores parameters, optimizer state and
//     the schedule position (steps taken), and the batch callback is asked for the same
//     positions an uninterrupted run asks for, so the data order and the trajectory are the same.
//   * A NaN / inf training loss stops the run with a tlaloc::Error (when it is read, and before
//     every save): a checkpoint holding a diverged run is never written over a good one.
//   * SIGINT and SIGTERM (while fit runs): the first one stops the run before its next step,
//     saves a checkpoint (when `save` is set) and fit returns with `interrupted` set; a second
//     one exits the process at once with status 130, removing the temporary of a save in
//     progress first (io::remove_live_temporaries).
//   * Outputs are checked before any work (check()) and `save` is locked against other runs
//     for the whole run (lock_outputs()).
//   * Every write of the metrics CSV is checked: a full disk is a tlaloc::Error, not a cut file.
//   * The metrics rows are kept in memory too: `plot` draws them (plot/curves.h) at every save
//     point (save_every, Ctrl-C, stop_after; one at the last step leaves it to the end) and at
//     the end, with or without `metrics`, atomically (never a cut picture).
//
// Output (to FitOptions::out): "resumed from F at step N", the pjrt lane's cross-check line
// (CrossCheckReport::summary, and a "warning: ..." line when it failed),
// the progress bar, "saved F (step N)", "plotted F (step N)", "interrupted at step N: continue with
// --resume F", "stopped after N steps (--stop-after)". Messages name the options after `tlaloc
// train`'s flags (--save, --resume, ...), which the options below mirror.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/write_lock.h"
#include "tlaloc/train/cross_check.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// Where a step is in the run. step: steps taken before it (0-based, counted from the start of
// the run, resumed steps included); with epochs, epoch = step / steps_per_epoch and batch =
// step % steps_per_epoch; without, epoch = 0 and batch = step.
struct StepPosition {
  int64_t step = 0, epoch = 0, batch = 0;
};

// A step whose outputs were read (every log_every batches and at the last batch of an epoch /
// of the run). step: steps taken after it (1-based).
struct StepLog {
  int64_t step = 0, epoch = 0, batch = 0;
  StepReport report;
};

// An evaluation point: an epoch's end (epoch_end) or every eval_every steps.
struct EvalPoint {
  int64_t step = 0;   // steps taken
  int64_t epoch = 0;  // 0-based epoch the point is in (the one that ended)
  bool epoch_end = false;
  double train_loss = 0;  // mean of the losses read in this epoch by this process
  double seconds = 0;     // this epoch's training time so far (evaluation excluded)
  int64_t items = 0;      // items (FitOptions::items_per_step) trained in this epoch so far
};

// Named values an evaluation reports: "val_loss" and / or "val_accuracy", the metrics file's
// columns of the same names (io/metrics_csv.h; e.g. {"val_loss", 0.33}, {"val_accuracy", 0.88}).
// Another name is an error.
using Metrics = std::vector<std::pair<std::string, double>>;

struct FitOptions {
  std::string name = "fit";     // names the run in errors ("train fmnist: ...") and its bar
  int64_t steps = 0;            // the run ends when the trainer has taken this many steps (>= 1)
  int64_t steps_per_epoch = 0;  // > 0: the run is epochs of this many steps; 0: one pass
  int64_t log_every = 50;       // read the loss every N batches of an epoch (>= 1)
  // With loss scaling (f16): the run stops with an error when this many steps in a row skipped
  // their update (inf / NaN gradients even after as many halvings of the scale).
  int64_t max_consecutive_skips = 40;
  // Data parallelism: the loss function takes this process's share of each batch itself, from
  // the step's index (lm::sampled_loss_fn, fmnist::loss_fn), as DataInput::batched inputs are
  // split; only the line that starts a data-parallel run reads it.
  bool splits_in_program = false;

  // Progress bar (progress.h). With epochs: one bar per epoch, "epoch E/N", counting
  // items_per_epoch items (a step trains items_per_step of them, the last batch what is left);
  // without: one bar for the run, `name` (" (from step N)" when resumed), counting steps.
  bool progress = true;
  int64_t items_per_step = 1, items_per_epoch = 0;
  std::string progress_value = "loss";  // the value's name in the bar
  double progress_unit = 1;             // the bar shows loss / unit (e.g. ln 2: bits)
  bool progress_mean = true;            // the epoch's mean of the read losses, else the last one

  // Checkpoints (train/checkpointing.h): written to `save` every save_every steps (0: never),
  // at the end and when interrupted; none at all when `save` is unset. `seed` and `metadata`
  // (the recipe's fields, e.g. {"recipe", "fmnist"}) go into them and are checked on resume.
  std::optional<std::string> save;
  int64_t save_every = 0;
  int64_t stop_after = 0;  // > 0: save and stop once this many steps are taken
  // > 0: a time budget. Once this many seconds of training (the loop's wall time in this
  // process, evaluations included) have passed, the run ends as if it had reached its last
  // step: on_end (the report), the checkpoint, and FitResult::stopped; it can go on with
  // --resume. Checked after each step, so a step is never cut.
  double time_limit_seconds = 0;
  std::optional<std::string> resume;
  uint64_t seed = 0;
  std::map<std::string, std::string> metadata;
  // How `save` and `resume` are written and read; unset: one safetensors file
  // (io::save_checkpoint / io::load_checkpoint, io::check_output_file). A recipe whose
  // checkpoint is something else (an HF model directory with its training state beside it,
  // io/hf_dir.h) sets all three; fit still does everything else (metadata and seed checks,
  // check_resumable, restore, the lock on `save`).
  struct CheckpointFormat {
    // Throws tlaloc::Error starting with `what` when `path` cannot be written (before any work).
    std::function<void(const std::string& path, const std::string& what)> check_output;
    std::function<void(const std::string& path, const io::Checkpoint& c)> save;
    // The checkpoint at `path` (parameters, optimizer state, metadata); c.source names it.
    std::function<io::Checkpoint(const std::string& path)> load;
    bool folder = false;  // `resume` is a folder (else a folder is refused)
  };
  std::optional<CheckpointFormat> format;

  // Evaluation: FitCallbacks::evaluate at each epoch's end and every eval_every steps (0: not
  // by steps). Metrics CSV: appended to `metrics` (empty: none) in the layout of
  // io/metrics_csv.h: one "step" row per loss read, one "epoch" / "eval" row per evaluation, a
  // "final" row for FitCallbacks::final_metrics. A new or empty file gets the header first; a
  // file with another header is refused (check()).
  int64_t eval_every = 0;
  std::string metrics;
  // Training curves of this process's metrics rows as a PNG (plot::render_curves), written
  // atomically at every save point and at the end; empty: none.
  std::string plot;

  // pjrt lane: the gradient and the update compared with the host lane's before the first step
  // (train/cross_check.h: what is scored, the thresholds, why warn is the default).
  CrossCheckMode cross_check = CrossCheckMode::warn;
  bool handle_signals = true;  // SIGINT / SIGTERM as described at the top
  std::FILE* out = stdout;
};

struct FitCallbacks {
  // The per-step inputs of the step at `p` (Trainer::step's Batch). Must depend on p only:
  // cross-checks and resumed runs ask again. Null: the step takes no per-step inputs.
  std::function<Batch(const StepPosition& p)> batch;
  // After resume and cross-check, just before the first step (e.g. a "training on ..." line).
  std::function<void()> on_start;
  // Each loss read (after the progress bar is updated).
  std::function<void(const StepLog&)> on_log;
  // Evaluation points; returns the held-out values (Metrics: val_loss, val_accuracy; may print).
  std::function<Metrics(const EvalPoint&)> evaluate;
  // After the last step, before the final checkpoint: the final report. `seconds`: the
  // training loop's wall time in this process. An exception stops fit before saving.
  std::function<void(int64_t steps_run, double seconds)> on_end;
  // Right after on_end: the held-out values of the finished run (e.g. a validation on_end ran),
  // the "final" row of the metrics; null, or empty Metrics: no such row.
  std::function<Metrics()> final_metrics;
};

struct FitResult {
  int64_t steps = 0;         // steps taken at the end (trainer.steps_taken())
  bool interrupted = false;  // by a signal: saved (when `save` is set) and stopped early
  int signal = 0;            // SIGINT or SIGTERM when interrupted
  bool stopped = false;      // by stop_after or the time limit
  bool out_of_time = false;  // by the time limit (time_limit_seconds)
};

// Checks the options before any work: steps >= 1, log_every >= 1, save_every / stop_after /
// eval_every / steps_per_epoch >= 0; `save` and `resume` not empty strings (an unset shell
// variable must not train afresh over a checkpoint); `resume` exists and is not a folder;
// `save`, `metrics` and `plot` writable regular
// files or absent, in a writable folder (io::check_output_file: a device such as /dev/null, a
// FIFO or a folder is refused, never replaced), none of them the same file as another or as
// `resume`; `metrics` empty or in this layout (io::check_metrics_header). Throws tlaloc::Error
// "<name>: --save ...".
void check(const FitOptions& o);
// The advisory lock of `save` (io::WriteLock "<name>: --save"): a second run writing the same
// checkpoint fails here, at its start, naming the file and the other process. fit() takes it
// for its whole run; a caller that takes it before its own work (loading data, compiling)
// shares it with fit's. An empty lock when `save` is unset.
io::WriteLock lock_outputs(const FitOptions& o);

// Runs the loop described at the top on `t` (its resident inputs set, its lane chosen).
// Resuming: loads o.resume (io::load_checkpoint), refuses another recipe's or seed's
// checkpoint (metadata and seed compared, train::load_resume), one at or past o.steps (nothing
// to train) and one that fails check_resumable (NaN / inf, a negative second moment, a step
// count that disagrees with itself), then restores it into `t`. Throws tlaloc::Error for
// those, for a bad batch (Trainer::step's errors), a non-finite loss and I/O failures.
FitResult fit(Trainer& t, const FitOptions& o, const FitCallbacks& cb = {});

}  // namespace tlaloc::train
