// The metrics file (`tlaloc train ... --metrics FILE.csv`): one CSV layout for every recipe,
// written by train::fit and read back by `tlaloc plot` (tlaloc/plot). The header line names the
// columns, then one row per line:
//
//   kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s
//
//   kind          step (a training loss read), epoch (an evaluation at an epoch's end), eval (an
//                 evaluation every --eval-every steps) or final (the held-out figures a recipe
//                 computes once at the end of its run: lm's and llama's validation, disc's
//                 held-out points)
//   step          steps taken (resumed steps included)
//   epoch         the 1-based epoch the row is in (1 for recipes without epochs)
//   train_loss    step rows: the loss of that step; epoch / eval rows: the mean of the losses
//                 read in the epoch so far; final rows: empty
//   val_loss      the held-out loss (fmnist: the test set's mean cross-entropy; lm: nats per
//                 byte; llama: nats per token; disc: mean squared error); empty where none
//   val_accuracy  the held-out accuracy as a fraction (fmnist, disc); empty where none
//   lr            the learning rate of the row's last step (parameter group 0)
//   wall_s        seconds since the run started in this process (training and evaluation)
//
// An empty cell is a value the row does not have. Numbers are written as the shortest text that
// reads back exactly. A resumed run appends its rows to the same file.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tlaloc::io {

inline constexpr std::array<std::string_view, 8> kMetricsColumns = {
    "kind", "step", "epoch", "train_loss", "val_loss", "val_accuracy", "lr", "wall_s"};
inline constexpr std::array<std::string_view, 4> kMetricsKinds = {"step", "epoch", "eval", "final"};

struct MetricsRow {
  std::string kind = "step";  // one of kMetricsKinds
  int64_t step = 0;
  int64_t epoch = 1;
  // NaN: an empty cell.
  double train_loss = NAN, val_loss = NAN, val_accuracy = NAN, lr = NAN, wall_s = NAN;
  int64_t line = 0;  // read_metrics: the row's line in its file (1: the header)
};

// "kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s\n".
std::string metrics_header();
// One row as a line of the file (ending in '\n').
std::string format_metrics_row(const MetricsRow& r);

// The rows of a metrics file (text read from `source`). Throws one tlaloc::Error line starting
// with `what` (e.g. "plot") that names the file and the line:
//   "<what>: <source> line 1: no column 'val_loss' (the header is ...)", an unknown or repeated
//   column, "<what>: <source>: no rows (only a header)", "... is empty (no header)",
//   "<what>: <source> line 7: \"abc\" in column train_loss is not a number", "... is not a
//   finite number" (nan, inf), a step or epoch that is not a whole number >= 0, an unknown kind,
//   a row with more or fewer cells than the header, an empty line.
// The columns may come in any order; a '\r' before the line end is dropped.
std::vector<MetricsRow> parse_metrics(std::string_view text, const std::string& source,
                                      const std::string& what);
// parse_metrics of a file's bytes; a file that cannot be read is "<what>: <path>: <reason>".
std::vector<MetricsRow> read_metrics(const std::string& path, const std::string& what);

// Throws tlaloc::Error "<what> <path> holds another layout (its header is ...); give a new
// file" when `path` exists, is not empty and its first line is not metrics_header(): appending
// to it would mix two layouts; with `fresh_run` (not a resumed one), also when it holds rows
// (another run's: the two would be drawn as one curve). Absent and empty files pass.
void check_metrics_header(const std::string& path, const std::string& what, bool fresh_run = false);

}  // namespace tlaloc::io
