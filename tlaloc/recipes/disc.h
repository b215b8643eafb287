// The disc demo (the seed case study every lane reproduces): an MLP 2 -> 16 -> 16 -> 1 with ReLU
// learns "+1 inside the disc centred (0.15, -0.10) of radius 0.70, -1 outside" from points in
// [-1, 1]², MSE loss, full-batch Adam (lr 0.02). `tlaloc train disc` is run().
#pragma once

#include <memory>
#include <string>

#include "tlaloc/nn/layers.h"
#include "tlaloc/random/key.h"
#include "tlaloc/recipes/common.h"
#include "tlaloc/train/step_bench.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::recipes::disc {

inline constexpr double kCenterX = 0.15, kCenterY = -0.10, kRadius = 0.70;

// +1 inside the disc, -1 outside (the boundary counts as inside).
float label(double x, double y);

struct Data {
  Array x;  // f32 [n, 2], uniform in [-1, 1]²
  Array y;  // f32 [n, 1], label(x)
};
// n points drawn with random::uniform from `key`.
Data make_data(random::Key key, int64_t n);

// Sequential(Linear(2,16), ReLU, Linear(16,16), ReLU, Linear(16,1)).
std::shared_ptr<nn::Sequential> make_model();

// mean((model(x) - y)²) of data inputs "x" f32 [n,2] and "y" f32 [n,1], both resident (full
// batch).
train::LossFn mse_loss_fn();
std::vector<train::DataInput> data_inputs(int64_t n);
// model(x): predictions f32 [n,1] of data input "x" f32 [n,2] (for evaluation).
train::LossFn predict_fn();

// The demo's train step (512 points, Adam lr 0.02 inside the program), for export and tests.
// `precision`: the dots' compute type (train::TrainerOptions::precision); `flat_state`: the
// optimizer state in buckets (optim::UpdateOptions::flat_state, the pjrt lane's default).
optim::TrainStep train_step(int64_t points = 512, DType precision = DType::f32,
                            bool flat_state = false);

// Mean of (pred - y)² (the training loss, in f64), pred and y f32 [n,1].
double mse(const Array& pred, const Array& y);
// Fraction of points where sign(pred) equals the label; pred f32 [n,1].
double accuracy(const Array& pred, const Array& y);

// ASCII pictures of the learned sign (pred at grid cell centres, f32 [rows*cols, 1]) beside the
// true disc; '#' inside, '.' outside, 'X' in the learned picture where they disagree.
std::string ascii_boundary(const Array& pred, int rows, int cols, int* disagreeing);
// The grid cell centres, f32 [rows*cols, 2], row-major from the top (y = +1) left (x = -1).
Array grid_points(int rows, int cols);

// `tlaloc train disc`: `points` training points and `heldout` test points drawn from the seed's
// keys, `steps` full-batch Adam steps (lr `lr`) through train::fit (checkpoints only with
// common.save; Ctrl-C / SIGTERM stop it), then the ASCII picture of the learned boundary,
// the held-out accuracy and the number of compiled executables, printed to common.out; the
// held-out loss and accuracy are the metrics' final row. With `boundary`, the learned boundary
// beside the true disc as a PNG there (boundary_png; the file is checked before any work).
struct Config {
  Common common;
  int64_t steps = 600;
  double lr = 0.02;
  int64_t points = 512;
  int64_t heldout = 1024;
  std::string boundary;  // PNG of the learned boundary beside the true disc; empty: none
};

// The learned boundary (pred: the model at grid_points(n, n), f32 [n*n, 1]) beside the true
// disc over [-1, 1]² (plot::render_boundary), PNG bytes; `title` above it.
std::string boundary_png(const Array& pred, int n, const std::string& title);
inline constexpr int kBoundaryGrid = 120;  // the picture's cells per side
train::FitResult run(const Config& c);

// `tlaloc bench step`'s disc case: the demo's step (512 points, seed 20260921).
train::StepBenchCase bench_case(int threads);

}  // namespace tlaloc::recipes::disc
