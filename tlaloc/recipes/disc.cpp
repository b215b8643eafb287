#include "tlaloc/recipes/disc.h"

#include <fmt/format.h>

#include <algorithm>

#include "tlaloc/nn/losses.h"
#include "tlaloc/plot/boundary.h"
#include "tlaloc/plot/canvas.h"
#include "tlaloc/random/random.h"

namespace tlaloc::recipes::disc {

using train::DataInput;
using train::Inputs;
using train::LossFn;

float label(double x, double y) {
  double dx = x - kCenterX, dy = y - kCenterY;
  return dx * dx + dy * dy <= kRadius * kRadius ? 1.0f : -1.0f;
}

Data make_data(random::Key key, int64_t n) {
  Data d;
  d.x = random::uniform(key, Shape{n, 2}, DType::f32, -1.0, 1.0);
  d.y = Array(DType::f32, Shape{n, 1});
  const float* x = d.x.data<float>();
  float* y = d.y.data<float>();
  for (int64_t i = 0; i < n; ++i) y[i] = label(x[2 * i], x[2 * i + 1]);
  return d;
}

std::shared_ptr<nn::Sequential> make_model() { return nn::mlp({2, 16, 16, 1}); }

LossFn mse_loss_fn() {
  return [](nn::Module& m, const Inputs& d) {
    return std::vector<trace::Tensor>{nn::mse_loss(m(d["x"]), d["y"])};
  };
}

LossFn predict_fn() {
  return [](nn::Module& m, const Inputs& d) { return std::vector<trace::Tensor>{m(d["x"])}; };
}

std::vector<DataInput> data_inputs(int64_t n) {
  return {{"x", {DType::f32, Shape{n, 2}}, true}, {"y", {DType::f32, Shape{n, 1}}, true}};
}

optim::TrainStep train_step(int64_t points, DType precision, bool flat_state) {
  auto model = make_model();
  model->init(random::key(20260921));
  optim::UpdateOptions u;
  u.flat_state = flat_state;
  return train::build_train_step(*model, mse_loss_fn(), data_inputs(points),
                                 optim::Adam{.lr = 0.02}, u, nullptr, nullptr, nullptr, precision);
}

double mse(const Array& pred, const Array& y) {
  if (pred.numel() != y.numel() || pred.numel() == 0)
    fail("disc::mse: {} predictions for {} labels", pred.numel(), y.numel());
  const float* p = pred.data<float>();
  const float* t = y.data<float>();
  double sum = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) sum += (double(p[i]) - t[i]) * (double(p[i]) - t[i]);
  return sum / double(pred.numel());
}

double accuracy(const Array& pred, const Array& y) {
  if (pred.numel() != y.numel() || pred.numel() == 0)
    fail("disc::accuracy: {} predictions for {} labels", pred.numel(), y.numel());
  const float* p = pred.data<float>();
  const float* t = y.data<float>();
  int64_t ok = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) ok += (p[i] >= 0) == (t[i] > 0);
  return double(ok) / double(pred.numel());
}

Array grid_points(int rows, int cols) {
  Array g(DType::f32, Shape{int64_t(rows) * cols, 2});
  float* p = g.data<float>();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      size_t i = size_t(r) * size_t(cols) + size_t(c);
      p[2 * i] = float(-1.0 + (c + 0.5) * 2.0 / cols);
      p[2 * i + 1] = float(1.0 - (r + 0.5) * 2.0 / rows);
    }
  return g;
}

std::string ascii_boundary(const Array& pred, int rows, int cols, int* disagreeing) {
  Array g = grid_points(rows, cols);
  const float* p = pred.data<float>();
  const float* xy = g.data<float>();
  std::string out = std::string("  learned") + std::string(size_t(cols) - 5, ' ') + "true\n";
  int bad = 0;
  for (int r = 0; r < rows; ++r) {
    std::string left = "  ", right;
    for (int c = 0; c < cols; ++c) {
      size_t i = size_t(r) * size_t(cols) + size_t(c);
      bool truth = label(xy[2 * i], xy[2 * i + 1]) > 0;
      bool learned = p[i] >= 0;
      if (truth != learned) ++bad;
      left += truth != learned ? 'X' : (learned ? '#' : '.');
      right += truth ? '#' : '.';
    }
    out += left + "   " + right + "\n";
  }
  if (disagreeing) *disagreeing = bad;
  return out;
}

std::string boundary_png(const Array& pred, int n, const std::string& title) {
  if (pred.numel() != int64_t(n) * n)
    fail("disc::boundary_png: {} predictions for a grid of {} x {}", pred.numel(), n, n);
  Array g = grid_points(n, n);
  const float* xy = g.data<float>();
  plot::Field learned{n, n, {}}, truth{n, n, {}};
  learned.values.assign(pred.data<float>(), pred.data<float>() + pred.numel());
  for (int64_t i = 0; i < int64_t(n) * n; ++i)
    truth.values.push_back(label(xy[2 * i], xy[2 * i + 1]));
  plot::BoundaryOptions o;
  o.title = title;
  o.truth_title =
      fmt::format("true: the disc centred ({}, {}), radius {}", kCenterX, kCenterY, kRadius);
  return plot::render_boundary(learned, truth, o);
}

train::FitResult run(const Config& c) {
  using namespace tlaloc::train;
  std::FILE* out = c.common.out;
  check_picture_output(c.common, "train disc", "--boundary",
                       c.boundary);  // before the lock: a refused run leaves no file
  const io::WriteLock lock = check_options(c.common, "train disc");
  auto schedule = make_schedule(c.common, "train disc", c.steps, c.common.warmup);
  TrainerOptions topt = trainer_options(c.common);  // first: a lane that cannot start fails now
  topt.schedule = schedule;
  auto keys = random::split(random::key(c.common.seed), 3);
  Data train_data = make_data(keys[0], c.points);
  Data test_data = make_data(keys[2], c.heldout);
  auto model = make_model();
  model->init(keys[1]);
  fmt::print(out, "{}\nparameters: {}\n", model->to_string(), model->num_parameters());

  const int64_t compiled_before = compiled_executables(topt.lane);
  Trainer trainer(*model, mse_loss_fn(), data_inputs(c.points), optim::Adam{.lr = c.lr}, topt);
  const int64_t train_executables = compiled_executables(topt.lane) - compiled_before;
  fmt::print(out, "IR: forward {} ops, gradient {} ops, train step (with Adam) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  trainer.set_resident("x", std::move(train_data.x));
  trainer.set_resident("y", std::move(train_data.y));

  FitOptions f = fit_options(c.common, "train disc", c.steps,
                             {{"recipe", "disc"}, {"points", std::to_string(c.points)}});
  f.progress = false;  // a line per loss read instead
  FitCallbacks cb;
  cb.on_start = [&] {
    fmt::print(out, "training on the {} lane: {} points, full-batch Adam(lr={}), {} steps\n",
               lane_name(trainer.lane()), c.points, c.lr, c.steps);
  };
  cb.on_log = [&](const StepLog& l) {
    fmt::print(out, "step {:4d}  loss {:.6f}{}\n", l.step, l.report.loss,
               l.report.found_inf ? "  (skipped: non-finite)" : "");
  };
  Metrics held_out;           // the held-out points' loss and accuracy, for the metrics' final row
  std::string picture_error;  // --boundary, reported after the save
  cb.on_end = [&](int64_t steps_run, double secs) {
    fmt::print(out, "wall time {:.3f} s, {:.3f} ms/step\n", secs,
               1e3 * secs / double(std::max<int64_t>(steps_run, 1)));
    const int rows = 20, cols = 40;
    int grid_eval = trainer.add_eval(predict_fn(), {{"x", {DType::f32, Shape{rows * cols, 2}}}});
    int test_eval = trainer.add_eval(predict_fn(), {{"x", {DType::f32, Shape{c.heldout, 2}}}});
    Batch grid{{"x", grid_points(rows, cols)}};
    Array grid_pred = trainer.run_eval(grid_eval, grid)[0];
    int bad = 0;
    std::string pic = ascii_boundary(grid_pred, rows, cols, &bad);
    fmt::print(out, "\n{}", pic);
    fmt::print(out, "disagreeing grid cells: {} of {}\n", bad, rows * cols);
    Batch test{{"x", std::move(test_data.x)}};
    Array test_pred = trainer.run_eval(test_eval, test)[0];
    held_out = {{"val_loss", mse(test_pred, test_data.y)},
                {"val_accuracy", accuracy(test_pred, test_data.y)}};
    fmt::print(out, "held-out accuracy: {:.2f}% on {} fresh points\n", 100 * held_out[1].second,
               c.heldout);
    if (!c.boundary.empty()) {
      const int n = kBoundaryGrid;
      int fine = trainer.add_eval(predict_fn(), {{"x", {DType::f32, Shape{n * n, 2}}}});
      Batch cells{{"x", grid_points(n, n)}};
      try {  // a picture that cannot be written must not cost the run its checkpoint
        plot::write_file(
            c.boundary, boundary_png(trainer.run_eval(fine, cells)[0], n,
                                     fmt::format("train disc, step {}: held-out accuracy {:.2f}%",
                                                 trainer.steps_taken(), 100 * held_out[1].second)));
        fmt::print(out, "wrote {} (the learned boundary beside the true disc)\n", c.boundary);
      } catch (const Error& e) {
        picture_error = fmt::format("train disc: --boundary {}: {}", c.boundary, e.what());
      }
    }
    fmt::print(out, "compiled executables: {} for training ({} in all, with evaluation)\n",
               train_executables, compiled_executables(topt.lane) - compiled_before);
  };
  cb.final_metrics = [&] { return held_out; };
  train::FitResult r = fit(trainer, f, cb);
  if (!picture_error.empty())
    fail("{} (the run itself is finished{})", picture_error, f.save ? " and saved" : "");
  return r;
}

train::StepBenchCase bench_case(int threads) {
  train::StepBenchCase c;
  auto keys = random::split(random::key(20260921), 3);
  c.title = "disc demo step (MLP 2-16-16-1, 512 points full batch, Adam lr 0.02 in the program)";
  c.make_model = [k = keys[1]] {
    auto m = make_model();
    m->init(k);
    return std::shared_ptr<nn::Module>(m);
  };
  c.loss = mse_loss_fn();
  c.data = data_inputs(512);
  Data d = make_data(keys[0], 512);
  c.resident = {{"x", std::move(d.x)}, {"y", std::move(d.y)}};
  c.opt = optim::Adam{.lr = 0.02};
  c.num_threads = threads;
  return c;
}

}  // namespace tlaloc::recipes::disc
