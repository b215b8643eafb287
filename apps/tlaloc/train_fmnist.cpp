// tlaloc train fmnist: an MLP on Fashion-MNIST with AdamW inside the compiled step.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/fmnist.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::app {

namespace {

struct FmnistOptions {
  CommonTrainOptions common;
  std::string data = io::kFashionMnistDir;
  std::string hidden = "256";
  int epochs = 5;
  int64_t batch = 128;
  double lr = 3e-3;
  double wd = 1e-2;
  int64_t limit = 0;  // use only the first N training rows (tests, quick runs)
  int64_t save_every = 0;
  int64_t stop_after = 0;  // stop after this many steps in all (simulates an interrupted run)
  std::string save = "fmnist.safetensors";
  std::string resume;
  std::string metrics;
  bool warmup_given = false;
};

io::ImageSet first_rows(io::ImageSet s, int64_t n) {
  if (n <= 0 || n >= s.labels.numel()) return s;
  Array img(DType::f32, Shape{n, s.images.shape()[1]});
  Array lab(DType::s32, Shape{n});
  std::memcpy(img.raw(), s.images.raw(), img.nbytes());
  std::memcpy(lab.raw(), s.labels.raw(), lab.nbytes());
  s.images = std::move(img);
  s.labels = std::move(lab);
  return s;
}

void run_fmnist(const FmnistOptions& o) {
  using namespace tlaloc::train;
  auto hidden = fmnist::parse_sizes(o.hidden, "--hidden");
  if (o.batch <= 0) fail("--batch must be positive, got {}", o.batch);
  io::ImageSet train_set = first_rows(io::load_fashion_mnist(o.data, true), o.limit);
  io::ImageSet test_set = io::load_fashion_mnist(o.data, false);
  const int64_t n = train_set.labels.numel();
  const int64_t spe = fmnist::steps_per_epoch(n, o.batch);
  const int64_t total_steps = spe * o.epochs;
  CommonTrainOptions common = o.common;
  // The default warm-up (one epoch, shortened for short runs) goes with warmup-cosine only; an
  // explicit --warmup is checked as given.
  if (!o.warmup_given)
    common.warmup =
        common.schedule == "warmup-cosine" ? std::min(common.warmup, total_steps - 1) : 0;
  auto schedule = resolve_common(common, total_steps);
  TrainerOptions topt;
  apply_lane(o.common, topt);  // a lane that cannot start fails before the model is built

  auto keys = random::split(random::key(o.common.seed), 2);  // [init, shuffle]
  auto model = fmnist::make_model(hidden);
  model->init(keys[0]);
  fmt::print("{}\nparameters: {}\n", model->to_string(), model->num_parameters());
  fmt::print("data: {} training rows, {} test rows from {}\n", n, test_set.labels.numel(), o.data);

  topt.schedule = schedule;
  topt.num_threads = o.common.threads;
  int64_t compiled_before = compiled_executables(topt.lane);
  Trainer trainer(*model, fmnist::loss_fn(), fmnist::data_inputs(n, o.batch),
                  optim::AdamW{.lr = o.lr, .weight_decay = o.wd}, topt);
  int64_t train_executables = compiled_executables(topt.lane) - compiled_before;
  fmt::print("IR: forward {} ops, gradient {} ops, train step (with AdamW) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  int eval_id = trainer.add_eval(fmnist::logits_fn(), {{DType::f32, test_set.images.shape()}});

  std::map<std::string, std::string> user{{"recipe", "fmnist"},
                                          {"hidden", o.hidden},
                                          {"batch", std::to_string(o.batch)},
                                          {"train_rows", std::to_string(n)}};
  if (!o.resume.empty()) {
    io::Checkpoint c = load_resume(o.resume, user, o.common.seed);
    restore(trainer, c);
    fmt::print("resumed from {} at step {}\n", o.resume, trainer.steps_taken());
  }
  trainer.set_resident(0, std::move(train_set.images));
  trainer.set_resident(1, std::move(train_set.labels));
  if (trainer.lane() == Lane::pjrt) {  // one step of both lanes on the next batch
    auto order = fmnist::epoch_order(keys[1], trainer.steps_taken() / spe, n);
    auto [idx, w] = fmnist::make_batch(order, trainer.steps_taken() % spe, o.batch);
    print_cross_check(trainer, {std::move(idx), std::move(w)});
  }

  std::unique_ptr<std::ofstream> csv;
  if (!o.metrics.empty()) {
    bool fresh = !std::filesystem::exists(o.metrics) || std::filesystem::file_size(o.metrics) == 0;
    csv = std::make_unique<std::ofstream>(o.metrics, std::ios::app);
    if (!*csv) fail("--metrics {}: cannot open for writing", o.metrics);
    if (fresh) *csv << "kind,step,epoch,train_loss,test_loss,test_accuracy,seconds\n";
  }
  // A loss that turned NaN / inf stops the run: that checkpoint could not be resumed.
  auto check_loss = [&](double l) {
    if (!std::isfinite(l))
      fail(
          "train fmnist: the training loss is {} at step {} (diverged; try a lower --lr); no "
          "checkpoint written",
          l, trainer.steps_taken());
  };
  const int64_t started_at = trainer.steps_taken();
  auto save = [&](const std::string& path) {
    if (trainer.steps_taken() > started_at) check_loss(trainer.read_last().loss);
    io::save_checkpoint(path, to_checkpoint(trainer, o.common.seed, trainer.steps_taken(), user));
    fmt::print("saved {} (step {})\n", path, trainer.steps_taken());
  };

  install_interrupt_handler();
  fmnist::Metrics last{};
  std::vector<Array> eval_in{test_set.images};
  while (trainer.steps_taken() < total_steps) {
    int64_t epoch = trainer.steps_taken() / spe;
    auto order = fmnist::epoch_order(keys[1], epoch, n);
    Progress bar(fmt::format("epoch {}/{}", epoch + 1, o.epochs), n);
    double loss_sum = 0;
    int64_t loss_reads = 0;
    const int64_t first_b = trainer.steps_taken() % spe;  // > 0 when resuming mid-epoch
    for (int64_t b = first_b; b < spe; ++b) {
      if (interrupted()) {
        bar.finish(b * o.batch, loss_reads ? loss_sum / double(loss_reads) : NAN);
        save(o.save);
        fmt::print("interrupted at step {}: continue with --resume {}\n", trainer.steps_taken(),
                   o.save);
        std::exit(130);
      }
      if (o.stop_after > 0 && trainer.steps_taken() >= o.stop_after) {
        save(o.save);
        fmt::print("stopped after {} steps (--stop-after)\n", trainer.steps_taken());
        return;
      }
      auto [idx, w] = fmnist::make_batch(order, b, o.batch);
      trainer.step({std::move(idx), std::move(w)});
      if ((b + 1) % o.common.log_every == 0 || b + 1 == spe) {
        double l = trainer.read_last().loss;
        check_loss(l);
        loss_sum += l;
        ++loss_reads;
        bar.update(std::min(n, (b + 1) * o.batch), loss_sum / double(loss_reads));
        if (csv)
          *csv << fmt::format("step,{},{},{},,,{}\n", trainer.steps_taken(), epoch + 1, l,
                              bar.elapsed());
      }
      if (o.save_every > 0 && trainer.steps_taken() % o.save_every == 0) save(o.save);
    }
    double train_loss = loss_sum / double(std::max<int64_t>(loss_reads, 1));
    bar.finish(n, train_loss);
    double secs = bar.elapsed();
    double samples = double(std::min(n, spe * o.batch) - std::min(n, first_b * o.batch));
    last = fmnist::evaluate(trainer.run_eval(eval_id, eval_in)[0], test_set.labels);
    fmt::print(
        "epoch {}: train loss {:.4f}  test loss {:.4f}  test accuracy {:.2f}%  ({:.2f} s, {:.0f} "
        "samples/s)\n",
        epoch + 1, train_loss, last.loss, 100 * last.accuracy, secs, samples / secs);
    if (csv)
      *csv << fmt::format("epoch,{},{},{},{},{},{}\n", trainer.steps_taken(), epoch + 1, train_loss,
                          last.loss, last.accuracy, secs);
  }
  if (last.confusion.empty())
    last = fmnist::evaluate(trainer.run_eval(eval_id, eval_in)[0], test_set.labels);
  fmt::print("\nconfusion matrix (test set, rows: true class, columns: predicted):\n{}",
             fmnist::format_confusion(last));
  fmt::print("test accuracy {:.2f}%\n", 100 * last.accuracy);
  fmt::print("compiled executables: {} for training ({} in all, with evaluation)\n",
             train_executables, compiled_executables(topt.lane) - compiled_before);
  save(o.save);
}

}  // namespace

void register_train_fmnist(CLI::App& train) {
  static FmnistOptions o;
  // Defaults that reach >= 88% in 5 epochs: linear warm-up over the first epoch, then cosine.
  o.common.schedule = "warmup-cosine";
  o.common.warmup = 469;
  auto* cmd = train.add_subcommand("fmnist", "MLP classifier on Fashion-MNIST (AdamW in the step)");
  add_common_options(cmd, o.common);
  cmd->add_option("--data", o.data, "folder with the idx .gz files")->capture_default_str();
  cmd->add_option("--hidden", o.hidden, "hidden layer sizes, e.g. 512,256")->capture_default_str();
  cmd->add_option("--epochs", o.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--batch", o.batch, "batch size (fixed: the step compiles once)")
      ->capture_default_str();
  add_adamw_options(cmd, o.lr, o.wd);
  cmd->add_option("--limit", o.limit, "use only the first N training rows")->capture_default_str();
  cmd->add_option("--save", o.save, "checkpoint path (safetensors)")->capture_default_str();
  cmd->add_option("--save-every", o.save_every, "also save every N steps")->capture_default_str();
  cmd->add_option("--stop-after", o.stop_after, "save and stop after N steps in all");
  cmd->add_option("--resume", o.resume, "continue from this checkpoint");
  cmd->add_option("--metrics", o.metrics, "append per-step and per-epoch metrics to this CSV");
  CLI::Option* warmup = cmd->get_option("--warmup");
  cmd->callback([warmup] {
    o.warmup_given = warmup->count() > 0;
    run_fmnist(o);
  });
  add_export_recipe({"fmnist", "the fmnist job's train step (MLP 784-256-10, AdamW in the program)",
                     [] { return train::fmnist::train_step().fn; }});
}

}  // namespace tlaloc::app
