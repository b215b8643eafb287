// tlaloc train disc: the seed demo. See tlaloc/train/disc.h.
#include <fmt/format.h>

#include <chrono>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/disc.h"

namespace tlaloc::app {

namespace {

struct DiscOptions {
  CommonTrainOptions common;
  int steps = 600;
  double lr = 0.02;
  int64_t points = 512;
  int64_t heldout = 1024;
};

void run_disc(const DiscOptions& o) {
  using namespace tlaloc::train;
  auto schedule = resolve_common(o.common, o.steps);
  TrainerOptions topt;
  apply_lane(o.common, topt);  // first: a lane that cannot start fails before any work
  auto keys = random::split(random::key(o.common.seed), 3);
  disc::Data train_data = disc::make_data(keys[0], o.points);
  disc::Data test_data = disc::make_data(keys[2], o.heldout);
  auto model = disc::make_model();
  model->init(keys[1]);
  fmt::print("{}\nparameters: {}\n", model->to_string(), model->num_parameters());

  topt.schedule = schedule;
  topt.num_threads = o.common.threads;
  int64_t compiled_before = compiled_executables(topt.lane);
  Trainer trainer(*model, disc::mse_loss_fn(), disc::data_inputs(o.points), optim::Adam{.lr = o.lr},
                  topt);
  int64_t train_executables = compiled_executables(topt.lane) - compiled_before;
  fmt::print("IR: forward {} ops, gradient {} ops, train step (with Adam) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  trainer.set_resident(0, train_data.x);
  trainer.set_resident(1, train_data.y);
  print_cross_check(trainer, {});
  fmt::print("training on the {} lane: {} points, full-batch Adam(lr={}), {} steps\n",
             train::lane_name(trainer.lane()), o.points, o.lr, o.steps);
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 1; s <= o.steps; ++s) {
    trainer.step({});
    if (s % o.common.log_every == 0 || s == o.steps) {
      auto r = trainer.read_last();
      fmt::print("step {:4d}  loss {:.6f}{}\n", s, r.loss,
                 r.found_inf ? "  (skipped: non-finite)" : "");
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wall time {:.3f} s, {:.3f} ms/step\n", secs, 1e3 * secs / o.steps);

  auto pred_fn = [](nn::Module& m, std::span<const trace::Tensor> d) {
    return std::vector<trace::Tensor>{m(d[0])};
  };
  const int rows = 20, cols = 40;
  int grid_eval = trainer.add_eval(pred_fn, {{DType::f32, Shape{rows * cols, 2}}});
  int test_eval = trainer.add_eval(pred_fn, {{DType::f32, Shape{o.heldout, 2}}});
  std::vector<Array> grid{disc::grid_points(rows, cols)};
  Array grid_pred = trainer.run_eval(grid_eval, grid)[0];
  int bad = 0;
  std::string pic = disc::ascii_boundary(grid_pred, rows, cols, &bad);
  fmt::print("\n{}", pic);
  fmt::print("disagreeing grid cells: {} of {}\n", bad, rows * cols);
  std::vector<Array> test{test_data.x};
  Array test_pred = trainer.run_eval(test_eval, test)[0];
  fmt::print("held-out accuracy: {:.2f}% on {} fresh points\n",
             100 * disc::accuracy(test_pred, test_data.y), o.heldout);
  fmt::print("compiled executables: {} for training ({} in all, with evaluation)\n",
             train_executables, compiled_executables(topt.lane) - compiled_before);
}

}  // namespace

void register_train_disc(CLI::App& train) {
  static DiscOptions o;
  auto* cmd = train.add_subcommand("disc", "MLP 2-16-16-1 learns a disc (the seed demo)");
  add_common_options(cmd, o.common);
  cmd->add_option("--steps", o.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--lr", o.lr, "Adam learning rate")
      ->capture_default_str()
      ->check(finite_non_negative());
  cmd->add_option("--points", o.points, "training points")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->callback([] { run_disc(o); });
  add_export_recipe({"disc", "the disc demo's train step (MLP 2-16-16-1, Adam in the program)",
                     [] { return train::disc::train_step().fn; }});
}

}  // namespace tlaloc::app
