// Training curves: the loss of one or more runs against the step (the rows of metrics files,
// io/metrics_csv.h), several runs overlaid in their own colours with a legend; the training
// loss as a solid line, the validation loss dashed with a marker at each evaluation; the
// validation accuracy, when a run has one, in a second panel below sharing the step axis.
// `tlaloc plot` and `tlaloc train ... --plot` draw with it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tlaloc/io/metrics_csv.h"
#include "tlaloc/plot/axes.h"

namespace tlaloc::plot {

struct Run {
  std::string label;   // in the legend (with several runs)
  std::string source;  // names the run in errors (a file name)
  std::vector<io::MetricsRow> rows;
};

struct CurveOptions {
  int width = 900, height = 600;
  bool log_y = false;  // the loss on a log scale (every loss must be > 0)
  std::string title;   // above the chart; empty: none
};

// The points a run draws. A series holds one point per step, in step order; where rows repeat
// a step (a resumed run appends rows for steps an earlier process already wrote), the later
// row's value is drawn.
struct SeriesPoint {
  double step = 0, value = 0;
  int64_t line = 0;  // the row's line in its file
};
struct RunSeries {
  // "step" rows' train_loss (or, when a run has none, the other rows' train_loss), val_loss,
  // and val_accuracy in percent.
  std::vector<SeriesPoint> train, val, accuracy;
};
RunSeries series_of(const Run& r);

// The colour of the i-th run (ten colours, then again).
Color run_color(size_t i);

// Where the chart goes: the loss panel, and the accuracy panel when any run has accuracy.
struct CurvesLayout {
  int width = 0, height = 0;
  Frame loss;
  std::optional<Frame> accuracy;
};
// Throws one tlaloc::Error line for: no runs; a run with no loss to draw ("plot: F: no
// train_loss or val_loss values"); with log_y, a loss <= 0 ("plot: F line 7: train_loss 0 cannot
// go on a log scale").
CurvesLayout layout_curves(const std::vector<Run>& runs, const CurveOptions& o);
// The chart as PNG bytes (same input, same bytes).
std::string render_curves(const std::vector<Run>& runs, const CurveOptions& o);

// Legend labels for files: each file's name without its folder and ".csv", or its whole path
// without ".csv" when two files share a name.
std::vector<std::string> labels_for(const std::vector<std::string>& paths);

}  // namespace tlaloc::plot
