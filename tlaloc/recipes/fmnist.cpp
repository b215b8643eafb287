#include "tlaloc/recipes/fmnist.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "tlaloc/distributed/communicator.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/plot/heatmap.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::recipes::fmnist {

using train::DataInput;
using train::Inputs;
using train::LossFn;

std::vector<int64_t> parse_sizes(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string_view tok = std::string_view(s).substr(pos, end - pos);
    int64_t v = 0;  // digits only: no sign, space or hex, and no silent clamping
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size() || v <= 0 ||
        v > (int64_t(1) << 30))
      fail("{} '{}': expected sizes in [1, 2^30] separated by commas, e.g. 512,256", what, s);
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

std::shared_ptr<nn::Sequential> make_model(const std::vector<int64_t>& hidden) {
  std::vector<int64_t> sizes{kPixels};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(kClasses);
  return nn::mlp(sizes);
}

std::shared_ptr<nn::Sequential> make_cnn(const std::vector<int64_t>& channels) {
  if (channels.empty() || channels.size() > 4)
    fail("--channels: {} conv blocks; 1 to 4 fit 28 x 28 images (each halves them)",
         channels.size());
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Unflatten>(1, std::vector<int64_t>{1, 28, 28}));
  int64_t prev = 1, side = 28;
  for (int64_t c : channels) {
    m->add(std::make_shared<nn::Conv2d>(prev, c, 3, 1, 1));
    m->add(std::make_shared<nn::BatchNorm2d>(c));
    m->add(std::make_shared<nn::ReLU>());
    m->add(std::make_shared<nn::MaxPool2d>(2));
    prev = c;
    side /= 2;
  }
  m->add(std::make_shared<nn::Flatten>());
  m->add(std::make_shared<nn::Linear>(prev * side * side, kClasses));
  return m;
}

std::vector<DataInput> data_inputs(int64_t n, int64_t batch, bool drop_last, int procs) {
  if (procs == 0) procs = distributed::world_size();
  DataInput step{"step", {DType::s32, Shape{}}};
  step.step_index = true;
  std::vector<DataInput> in = {
      {"images", {DType::f32, Shape{n, kPixels}}, true},
      {"labels", {DType::s32, Shape{n}}, true},
      {"order", {DType::s32, Shape{steps_per_epoch(n, batch, drop_last) * batch}}, true},
      step};
  if (procs > 1) in.push_back({"rank", {DType::s32, Shape{}}, true});
  return in;
}

// The mean cross-entropy of the batch's real rows (weight 1, padding 0). `summed`: the weights
// are 1 / (the global batch's real rows), so each process's loss is its part of the sum (data
// parallelism: a last partial batch splits unevenly over the processes). The step's rows and
// weights are the values the host built and fed per step before: the same bits.
LossFn loss_fn(int64_t n, int64_t batch, bool drop_last, bool summed, int procs) {
  if (procs == 0) procs = distributed::world_size();
  if (batch < 1 || batch % procs)
    fail("fmnist: a batch of {} does not split over {} processes", batch, procs);
  const int64_t spe = steps_per_epoch(n, batch, drop_last);
  if (n < 1 || spe < 1) fail("fmnist: {} rows make no batch of {}", n, batch);
  if (spe * batch > INT32_MAX)
    fail("fmnist: {} steps of {} rows exceed the s32 row positions", spe, batch);
  return [=](nn::Module& m, const Inputs& d) {
    using trace::Tensor;
    auto s32 = [](int64_t v) { return trace::scalar(double(v), DType::s32); };
    const int64_t rows = batch / procs;
    const Tensor pos = trace::remainder(d["step"], s32(spe)) * s32(batch);  // the batch's start
    const Tensor start = procs > 1 ? pos + d["rank"] * s32(rows) : pos;
    const Tensor idx = trace::dynamic_slice(d["order"], {start}, {rows});
    Tensor w = trace::astype(trace::iota(Shape{rows}) + start < s32(n), DType::f32);
    if (summed) w = w / trace::astype(trace::minimum(s32(batch), s32(n) - pos), DType::f32);
    Tensor x = trace::take_rows(d["images"], idx), y = trace::take_rows(d["labels"], idx);
    if (summed) return std::vector<Tensor>{trace::sum(nn::cross_entropy_per_row(m(x), y) * w)};
    return std::vector<Tensor>{nn::cross_entropy(m(x), y, w)};
  };
}

LossFn logits_fn() {
  return [](nn::Module& m, const Inputs& d) { return std::vector<trace::Tensor>{m(d["images"])}; };
}

namespace {

// The step of `model` for one of `replicas` processes (batch / replicas rows each, the process
// named by the "rank" input).
optim::TrainStep replica_step(nn::Module& model, int64_t rows, int64_t batch, int replicas,
                              bool drop_last, bool summed, DType precision, bool flat_state) {
  if (replicas < 1 || batch % replicas)
    fail("fmnist: a batch of {} does not split over {} replicas", batch, replicas);
  optim::UpdateOptions u;
  u.replicas = replicas;
  u.flat_state = flat_state;
  if (summed) u.replica_loss = optim::UpdateOptions::ReplicaLoss::sum;
  return train::build_train_step(model, loss_fn(rows, batch, drop_last, summed, replicas),
                                 data_inputs(rows, batch, drop_last, replicas),
                                 optim::AdamW{.lr = 1e-3, .weight_decay = 1e-2}, u, nullptr,
                                 nullptr, nullptr, precision);
}

}  // namespace

optim::TrainStep train_step_cnn(int64_t rows, int64_t batch, const std::vector<int64_t>& channels,
                                int replicas, DType precision, bool flat_state) {
  auto model = make_cnn(channels);
  model->init(random::key(20260921));
  return replica_step(*model, rows, batch, replicas, true, false, precision, flat_state);
}

optim::TrainStep train_step(int64_t rows, int64_t batch, const std::vector<int64_t>& hidden,
                            int replicas, DType precision, bool flat_state) {
  auto model = make_model(hidden);
  model->init(random::key(20260921));
  return replica_step(*model, rows, batch, replicas, false, replicas > 1, precision, flat_state);
}

std::vector<int32_t> epoch_order(random::Key key, int64_t epoch, int64_t n) {
  return random::permutation_indices(random::fold_in(key, uint32_t(epoch)), n);
}

int64_t steps_per_epoch(int64_t n, int64_t batch, bool drop_last) {
  return drop_last ? n / batch : (n + batch - 1) / batch;
}

Array epoch_indices(const std::vector<int32_t>& order, int64_t batch, bool drop_last) {
  const int64_t n = int64_t(order.size()), len = steps_per_epoch(n, batch, drop_last) * batch;
  Array out(DType::s32, Shape{len});  // zeros past n: row 0, weight 0 in the step
  std::memcpy(out.raw(), order.data(), size_t(std::min(n, len)) * sizeof(int32_t));
  return out;
}

Metrics evaluate(const Array& logits, const Array& labels) {
  if (logits.shape().rank() != 2 || logits.shape()[1] != kClasses ||
      labels.numel() != logits.shape()[0])
    fail("fmnist::evaluate: logits {} and labels {} disagree", describe(logits), describe(labels));
  Metrics m;
  m.confusion.assign(kClasses, std::vector<int64_t>(kClasses, 0));
  const float* z = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  int64_t n = labels.numel(), correct = 0;
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * kClasses;
    int best = 0;
    double mx = row[0];
    for (int c = 1; c < kClasses; ++c)
      if (row[c] > mx) mx = row[c], best = c;
    double s = 0;
    for (int c = 0; c < kClasses; ++c) s += std::exp(double(row[c]) - mx);
    loss += std::log(s) + mx - row[y[i]];
    correct += best == y[i];
    m.confusion[size_t(y[i])][size_t(best)]++;
  }
  m.loss = loss / double(n);
  m.accuracy = double(correct) / double(n);
  return m;
}

std::string format_confusion(const Metrics& m) {
  std::string out = fmt::format("{:>14} |", "true \\ pred");
  for (int c = 0; c < kClasses; ++c) out += fmt::format(" {:>5}", c);
  out += " | accuracy\n" + std::string(15, '-') + "+" + std::string(6 * kClasses, '-') +
         "-+---------\n";
  for (int t = 0; t < kClasses; ++t) {
    int64_t total = 0;
    for (int64_t v : m.confusion[size_t(t)]) total += v;
    out += fmt::format("{:>11} {:>2} |", io::kFashionMnistClasses[size_t(t)], t);
    for (int c = 0; c < kClasses; ++c)
      out += fmt::format(" {:>5}", m.confusion[size_t(t)][size_t(c)]);
    double acc = total ? double(m.confusion[size_t(t)][size_t(t)]) / double(total) : 0;
    out += fmt::format(" | {:6.2f}%\n", 100 * acc);
  }
  return out;
}

std::string confusion_png(const Metrics& m, const std::string& title) {
  const std::vector<std::string> names(io::kFashionMnistClasses.begin(),
                                       io::kFashionMnistClasses.end());
  plot::ConfusionOptions o;
  o.title = title;
  return plot::render_confusion(m.confusion, names, o);
}

namespace {

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

// The model a `tlaloc train fmnist` checkpoint was trained with, from its metadata.
std::shared_ptr<nn::Sequential> model_of(const io::Checkpoint& c) {
  auto it = c.user.find("hidden");
  if (c.user.count("recipe") == 0 || c.user.at("recipe") != "fmnist" || it == c.user.end())
    fail("{}: not a `tlaloc train fmnist` checkpoint (no recipe=fmnist / hidden metadata)",
         c.source);
  auto kind = c.user.find("model");
  if (kind == c.user.end() || kind->second == "mlp")
    return make_model(parse_sizes(it->second, c.source + ": metadata user.hidden"));
  auto ch = c.user.find("channels");
  if (kind->second != "cnn" || ch == c.user.end())
    fail("{}: metadata user.model '{}' is not mlp or cnn (with user.channels)", c.source,
         kind->second);
  return make_cnn(parse_sizes(ch->second, c.source + ": metadata user.channels"));
}

// Rows [r0, r0 + rows) of images [n, 784], zero rows past n.
Array image_rows(const Array& images, int64_t r0, int64_t rows) {
  Array out(DType::f32, Shape{rows, kPixels});
  const int64_t n = images.shape()[0], have = std::max<int64_t>(0, std::min(rows, n - r0));
  std::memcpy(out.raw(), images.data<float>() + r0 * kPixels, size_t(have * kPixels) * 4);
  return out;
}

// Logits [n, 10] of images [n, 784] through `run` on chunks of `chunk` rows (the last one
// padded with zero rows, their logits dropped).
// Under data parallelism process r scores chunks r, r + N, ...; the others' rows are zeros in
// its array, and a sum over the processes (x + 0 is x) gives each of them all the logits.
Array logits_in_chunks(const Array& images, int64_t chunk, const std::function<Array(Array)>& run) {
  const int64_t n = images.shape()[0];
  const int procs = distributed::world_size(), rank = distributed::rank();
  Array out(DType::f32, Shape{n, kClasses});
  for (int64_t r0 = 0, k = 0; r0 < n; r0 += chunk, ++k) {
    if (k % procs != rank) continue;
    Array z = run(image_rows(images, r0, chunk));
    const int64_t rows = std::min(chunk, n - r0);
    std::memcpy(out.data<float>() + r0 * kClasses, z.data<float>(), size_t(rows * kClasses) * 4);
  }
  if (procs > 1)
    distributed::world().all_reduce(out.raw(), out.numel(), DType::f32,
                                    distributed::Reduction::sum);
  return out;
}

// Test images scored per call by the CNN (its activations for 10000 images would take GBs).
constexpr int64_t kCnnEvalChunk = 1000;

}  // namespace

train::FitResult run(const Config& c) {
  std::FILE* out = c.common.out;
  if (c.model != "mlp" && c.model != "cnn") fail("--model '{}': expected mlp or cnn", c.model);
  const bool cnn = c.model == "cnn";
  if (c.other_model_flag)
    fail("train fmnist: {} is for --model {}; this run is --model {}", *c.other_model_flag,
         cnn ? "mlp" : "cnn", c.model);
  auto sizes = cnn ? parse_sizes(c.channels, "--channels") : parse_sizes(c.hidden, "--hidden");
  const std::string sizes_text = fmt::format("{}", fmt::join(sizes, ","));  // "0256" is 256
  if (cnn) make_cnn(sizes);  // its size checks, before any work
  check_picture_output(c.common, "train fmnist", "--confusion",
                       c.confusion);  // before the lock: a refused run leaves no file
  const io::WriteLock lock = check_options(c.common, "train fmnist");
  if (c.batch <= 0) fail("--batch must be positive, got {}", c.batch);
  io::ImageSet all_rows = io::load_fashion_mnist(c.data, true);
  if (c.limit > all_rows.labels.numel())
    fail("train fmnist: --limit {} is more than the {} training images of {}", c.limit,
         all_rows.labels.numel(), c.data);
  io::ImageSet train_set = first_rows(std::move(all_rows), c.limit);
  io::ImageSet test_set = io::load_fashion_mnist(c.data, false);
  const int64_t n = train_set.labels.numel();
  // Batch norm takes batch statistics: a padded batch would skew them, so the CNN drops the
  // last partial batch of an epoch (PyTorch's drop_last).
  if (cnn && n < c.batch)
    fail("train fmnist --model cnn: {} training rows make no full batch of {}", n, c.batch);
  const int64_t spe = steps_per_epoch(n, c.batch, cnn);
  const int64_t total_steps = spe * c.epochs;
  // The default warm-up (one epoch, shortened for short runs) goes with warmup-cosine only; a
  // run of one step has no room for it and is plain cosine. An explicit --warmup is checked as
  // given.
  int64_t warmup = c.common.warmup;
  Common common = c.common;
  if (!c.warmup_given) {
    warmup = common.schedule == "warmup-cosine" ? std::min(spe, total_steps - 1) : 0;
    if (common.schedule == "warmup-cosine" && warmup == 0) common.schedule = "cosine";
  }
  auto schedule = make_schedule(common, "train fmnist", total_steps, warmup);
  train::TrainerOptions topt = trainer_options(c.common);  // fails before the model is built
  topt.schedule = schedule;
  // Data parallelism (mpirun): each process takes batch / N rows of every batch. The MLP's
  // last partial batch splits unevenly, so its processes sum losses divided by the global count.
  const int procs = distributed::world_size();
  if (c.batch % procs)
    fail("train fmnist: --batch {} does not split over {} processes", c.batch, procs);
  const bool summed = procs > 1 && !cnn;
  if (summed) topt.update.replica_loss = optim::UpdateOptions::ReplicaLoss::sum;

  auto keys = random::split(random::key(c.common.seed), 2);  // [init, shuffle]
  auto model = cnn ? make_cnn(sizes) : make_model(sizes);
  model->init(keys[0]);
  fmt::print(out, "{}\nparameters: {}\n", model->to_string(), model->num_parameters());
  fmt::print(out, "data: {} training rows, {} test rows from {}\n", n, test_set.labels.numel(),
             c.data);
  if (cnn && n % c.batch)
    fmt::print(out, "each epoch drops its last {} rows (a partial batch: batch norm)\n",
               n % c.batch);

  const int64_t compiled_before = train::compiled_executables(topt.lane);
  std::optional<train::Activity> compiling(std::in_place, "compiling the train step", out);
  train::Trainer trainer(*model, loss_fn(n, c.batch, cnn, summed, procs),
                         data_inputs(n, c.batch, cnn, procs),
                         optim::AdamW{.lr = c.lr, .weight_decay = c.wd}, topt);
  compiling.reset();
  const int64_t train_executables = train::compiled_executables(topt.lane) - compiled_before;
  fmt::print(out, "IR: forward {} ops, gradient {} ops, train step (with AdamW) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  // Evaluation in eval mode (batch norm's running statistics); the CNN in chunks, and every
  // model in chunks shared by the processes under data parallelism.
  const int64_t eval_rows = cnn || procs > 1 ? kCnnEvalChunk : test_set.labels.numel();
  model->eval();
  int eval_id =
      trainer.add_eval(logits_fn(), {{"images", {DType::f32, Shape{eval_rows, kPixels}}}});
  model->train();
  trainer.set_resident("images", std::move(train_set.images));
  trainer.set_resident("labels", std::move(train_set.labels));
  if (procs > 1) trainer.set_resident("rank", Array::scalar<int32_t>(distributed::rank()));

  train::FitOptions f = fit_options(c.common, "train fmnist", total_steps,
                                    {{"recipe", "fmnist"},
                                     {"model", c.model},
                                     {"hidden", cnn ? std::string("-") : sizes_text},
                                     {"channels", cnn ? sizes_text : std::string("-")},
                                     {"batch", std::to_string(c.batch)},
                                     {"train_rows", std::to_string(n)}});
  f.steps_per_epoch = spe;
  f.splits_in_program = true;
  f.items_per_step = c.batch;
  f.items_per_epoch = spe * c.batch;
  train::FitCallbacks cb;
  int64_t order_epoch = -1;  // the epoch whose order is on the lane
  // Each epoch's order goes on the lane once; the step takes its rows of it by its index.
  cb.batch = [&](const train::StepPosition& p) {
    if (p.epoch != order_epoch)
      trainer.set_resident("order", epoch_indices(epoch_order(keys[1], p.epoch, n), c.batch, cnn));
    order_epoch = p.epoch;
    return train::Batch{};
  };
  Metrics last{};
  train::Batch test_in{{"images", std::move(test_set.images)}};
  auto evaluate_test = [&] {
    train::Activity a(fmt::format("evaluating on {} test images", test_set.labels.numel()), out);
    if (eval_rows == test_set.labels.numel())
      return evaluate(trainer.run_eval(eval_id, test_in)[0], test_set.labels);
    Array logits = logits_in_chunks(test_in[0].second, eval_rows, [&](Array rows) {
      train::Batch in{{"images", std::move(rows)}};
      return trainer.run_eval(eval_id, in)[0];
    });
    return evaluate(logits, test_set.labels);
  };
  cb.evaluate = [&](const train::EvalPoint& p) -> train::Metrics {
    last = evaluate_test();
    fmt::print(out,
               "epoch {}: train loss {:.4f}  test loss {:.4f}  test accuracy {:.2f}%  ({:.2f} s, "
               "{:.0f} samples/s)\n",
               p.epoch + 1, p.train_loss, last.loss, 100 * last.accuracy, p.seconds,
               double(p.items) / p.seconds);
    return {{"val_loss", last.loss}, {"val_accuracy", last.accuracy}};
  };
  std::string picture_error;  // --confusion, reported after the save
  cb.on_end = [&](int64_t, double) {
    if (last.confusion.empty()) last = evaluate_test();
    fmt::print(out, "\nconfusion matrix (test set, rows: true class, columns: predicted):\n{}",
               format_confusion(last));
    fmt::print(out, "test accuracy {:.2f}%\n", 100 * last.accuracy);
    if (!c.confusion.empty() && distributed::is_root()) {
      try {  // a picture that cannot be written must not cost the run its checkpoint
        plot::write_file(
            c.confusion,
            confusion_png(last, fmt::format("Fashion-MNIST test set, step {}: accuracy {:.2f}%",
                                            trainer.steps_taken(), 100 * last.accuracy)));
        fmt::print(out, "wrote {} (the confusion matrix)\n", c.confusion);
      } catch (const Error& e) {
        picture_error = fmt::format("train fmnist: --confusion {}: {}", c.confusion, e.what());
      }
    }
    fmt::print(out, "compiled executables: {} for training ({} in all, with evaluation)\n",
               train_executables, train::compiled_executables(topt.lane) - compiled_before);
  };
  train::FitResult r = train::fit(trainer, f, cb);
  if (!picture_error.empty())
    fail("{} (the run itself is finished{})", picture_error, f.save ? " and saved" : "");
  return r;
}

CheckpointEval evaluate_checkpoint(const std::string& path, const std::string& data) {
  io::Checkpoint c = io::load_checkpoint(path);
  auto model = model_of(c);
  train::restore_model(*model, c);
  // NaN / inf parameters (a diverged or damaged file) would score a meaningless 10%.
  train::require_finite(c.params, c.source, "parameter");
  io::ImageSet test = io::load_fashion_mnist(data, false);
  model->eval();
  auto named = model->named_parameters();
  auto buffers = model->named_buffers();
  const bool cnn = c.user.count("model") && c.user.at("model") == "cnn";
  const int64_t rows = cnn ? kCnnEvalChunk : test.labels.numel();
  std::vector<ir::TensorType> types{{DType::f32, Shape{rows, kPixels}}};
  for (auto& p : named) types.push_back({p.param->value.dtype(), p.param->value.shape()});
  for (auto& b : buffers) types.push_back({b.buffer->value.dtype(), b.buffer->value.shape()});
  ir::Function f = trace::capture(
      [&](std::span<const trace::Tensor> in) {
        model->bind(in.subspan(1, named.size()));
        model->bind_buffers(in.subspan(1 + named.size()));
        return std::vector<trace::Tensor>{(*model)(in[0])};
      },
      types);
  auto exe = runtime::host::compile(f);
  auto run_rows = [&](Array images) {
    std::vector<Array> inputs;
    inputs.push_back(std::move(images));
    for (auto& p : named) inputs.push_back(p.param->value);
    for (auto& b : buffers) inputs.push_back(b.buffer->value);
    return exe->run(inputs)[0];
  };
  CheckpointEval e;
  e.step = c.step;
  e.parameters = model->num_parameters();
  e.images = test.labels.numel();
  e.metrics = evaluate(
      cnn ? logits_in_chunks(test.images, rows, run_rows) : run_rows(std::move(test.images)),
      test.labels);
  return e;
}

}  // namespace tlaloc::recipes::fmnist
