// Trains an MLP 2 -> 32 -> 32 -> 3 to tell which of three rings a point lies in, from synthetic
// data drawn from one seed: mini-batches of shuffled rows, softmax cross-entropy and AdamW, the
// whole train step one compiled program, run by train::fit (epochs, batches by position; it
// also saves checkpoints and resumes when asked). Prints the loss per epoch and the held-out
// accuracy; exits 1 if training did not bring the loss down.
#include <fmt/format.h>

#include <cmath>

#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/random/random.h"
#include "tlaloc/train/fit.h"

using namespace tlaloc;

constexpr int64_t kPoints = 2048, kBatch = 64, kEpochs = 12;

// Points uniform in [-1, 1]²; label 0 inside radius 0.45, 1 inside 0.8, 2 outside.
struct Data {
  Array x;  // f32 [n, 2]
  Array y;  // s32 [n]
};
Data make_data(random::Key key, int64_t n) {
  Data d{random::uniform(key, Shape{n, 2}, DType::f32, -1.0, 1.0), Array(DType::s32, Shape{n})};
  const float* x = d.x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    double r = std::hypot(x[2 * i], x[2 * i + 1]);
    d.y.data<int32_t>()[i] = r < 0.45 ? 0 : r < 0.8 ? 1 : 2;
  }
  return d;
}

// Fraction of rows whose largest logit is at the label.
double accuracy(const Array& logits, const Array& labels) {
  const int64_t n = labels.numel(), classes = logits.shape()[1];
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.data<float>() + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) best = row[c] > row[best] ? c : best;
    right += best == labels.data<int32_t>()[i];
  }
  return double(right) / double(n);
}

int main() {
  auto keys = random::split(random::key(7), 4);
  Data train = make_data(keys[0], kPoints), test = make_data(keys[1], kPoints);
  auto model = nn::mlp({2, 32, 32, 3});
  model->init(keys[2]);

  // The step's data: the whole training set stays resident; each step takes a batch's row
  // indices and gathers its rows inside the program.
  std::vector<train::DataInput> data = {{"x", {DType::f32, Shape{kPoints, 2}}, true},
                                        {"y", {DType::s32, Shape{kPoints}}, true},
                                        {"idx", {DType::s32, Shape{kBatch}}, false}};
  train::LossFn loss = [](nn::Module& m, const train::Inputs& in) {
    trace::Tensor x = trace::take_rows(in["x"], in["idx"]),
                  y = trace::take_rows(in["y"], in["idx"]);
    return std::vector<trace::Tensor>{nn::cross_entropy(m(x), y)};
  };
  train::Trainer trainer(*model, loss, data, optim::AdamW{.lr = 1e-2, .weight_decay = 1e-4});
  trainer.set_resident("x", train.x);
  trainer.set_resident("y", train.y);
  // Evaluation: the model's logits on the held-out points, with the current parameters.
  int eval = trainer.add_eval(
      [](nn::Module& m, const train::Inputs& in) { return std::vector{m(in["x"])}; },
      {{"x", {DType::f32, Shape{kPoints, 2}}}});

  train::FitOptions fit;
  fit.steps_per_epoch = kPoints / kBatch;
  fit.steps = kEpochs * fit.steps_per_epoch;
  fit.log_every = 1;  // read every step's loss: the epoch's mean is over all of them
  fit.progress = false;
  train::FitCallbacks cb;
  cb.batch = [&](const train::StepPosition& p) {  // epoch p.epoch's shuffled rows, batch p.batch
    auto order =
        random::permutation_indices(random::fold_in(keys[3], uint32_t(p.epoch + 1)), kPoints);
    std::vector<int32_t> idx(order.begin() + p.batch * kBatch,
                             order.begin() + (p.batch + 1) * kBatch);
    return train::Batch{{"idx", Array::from(Shape{kBatch}, idx)}};
  };
  double first = 0, last = 0;
  cb.evaluate = [&](const train::EvalPoint& e) {
    last = e.train_loss;
    if (e.epoch == 0) first = last;
    fmt::print("epoch {:2d}  train loss {:.4f}\n", e.epoch + 1, last);
    return train::Metrics{};
  };
  train::fit(trainer, fit, cb);

  train::Batch held_out{{"x", test.x}};
  fmt::print("held-out accuracy {:.2f}%\n",
             100 * accuracy(trainer.run_eval(eval, held_out)[0], test.y));
  if (!(last < 0.5 * first)) {
    fmt::print("training failed: the loss went from {:.4f} to {:.4f}\n", first, last);
    return 1;
  }
  return 0;
}
