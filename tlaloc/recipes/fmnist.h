// The Fashion-MNIST recipe: an MLP classifier (784 -> hidden... -> 10, ReLU) trained with AdamW
// inside the compiled step. The training set is resident on the lane; each step takes only its
// batch's row indices (s32 [batch]) and row weights (f32 [batch]: 1, or 0 for the padding of
// the last partial batch, so the step never recompiles). `tlaloc train fmnist` is run(),
// `tlaloc eval` is evaluate_checkpoint().
#pragma once

#include <memory>
#include <vector>

#include "tlaloc/io/idx.h"
#include "tlaloc/nn/batch_norm.h"
#include "tlaloc/nn/conv.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/pooling.h"
#include "tlaloc/random/key.h"
#include "tlaloc/recipes/common.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::recipes::fmnist {

inline constexpr int64_t kPixels = 784, kClasses = 10;

// "512,256" -> {512, 256}. Throws tlaloc::Error naming `what` unless every entry is a positive
// integer.
std::vector<int64_t> parse_sizes(const std::string& s, const std::string& what);

// nn::mlp({784, hidden..., 10}).
std::shared_ptr<nn::Sequential> make_model(const std::vector<int64_t>& hidden);
// The CNN of `--model cnn` on rows of 784 pixels: Unflatten to [N, 1, 28, 28], then per
// entry c of `channels` a block Conv2d(prev, c, 3, padding=1), BatchNorm2d(c), ReLU,
// MaxPool2d(2), then Flatten and Linear(c_last * (28 / 2^blocks)^2, 10). Throws tlaloc::Error
// for more than 4 blocks (28 halves to under 2 pixels).
std::shared_ptr<nn::Sequential> make_cnn(const std::vector<int64_t>& channels);

// Data inputs of the step, all resident or fed by the Trainer, so nothing goes up per step:
// "images" f32 [n, 784], "labels" s32 [n], "order" s32 [steps_per_epoch(n, batch, drop_last) ·
// batch] (the epoch's order of the rows, epoch_indices: put on the lane once per epoch), then
// "step", the step's index (train::DataInput::step_index), and with procs > 1 (0:
// distributed::world()'s size) "rank", the s32 scalar naming this process (resident: each
// process, or each replica of an exported step, is given its own).
std::vector<train::DataInput> data_inputs(int64_t n, int64_t batch, bool drop_last = false,
                                          int procs = 0);
// Weighted mean softmax cross-entropy of model(images[idx]) against labels[idx], where idx is
// step s's batch: order[b·batch, (b + 1)·batch) with b = s mod steps_per_epoch, under data
// parallelism the batch / procs rows of it at "rank" (procs 0: distributed::world()). Rows
// past n (the last batch's padding) weigh 0, the others 1. `summed`: the loss is sum(weight ·
// per-row loss) with the weights 1 / (the global batch's real rows): under data parallelism
// each process's loss is then its part of the global mean
// (optim::UpdateOptions::ReplicaLoss::sum), a last partial batch too. Throws tlaloc::Error
// when batch does not split over procs or the rows make no batch.
train::LossFn loss_fn(int64_t n, int64_t batch, bool drop_last = false, bool summed = false,
                      int procs = 0);
// Logits f32 [n, 10] of the model for "images" f32 [n, 784] (for evaluation).
train::LossFn logits_fn();

// The default job's train step (60000 resident rows, batch 128, MLP 784-256-10, AdamW lr 1e-3
// wd 1e-2 inside the program), for export and tests.
// `replicas` > 1: one process's step of data parallelism over that many (batch / replicas rows
// each, the loss summed over them as `train fmnist` does under mpirun). `precision`: the dots'
// compute type (train::TrainerOptions::precision).
optim::TrainStep train_step(int64_t rows = 60000, int64_t batch = 128,
                            const std::vector<int64_t>& hidden = {256}, int replicas = 1,
                            DType precision = DType::f32, bool flat_state = false);

// The same for `--model cnn` (make_cnn(channels); each epoch drops its last partial batch).
optim::TrainStep train_step_cnn(int64_t rows = 60000, int64_t batch = 128,
                                const std::vector<int64_t>& channels = {32, 64}, int replicas = 1,
                                DType precision = DType::f32, bool flat_state = false);

// The order of the training rows in `epoch` (0-based): a permutation of [0, n) drawn from
// fold_in(key, epoch), so any epoch's order is recomputed exactly on resume.
std::vector<int32_t> epoch_order(random::Key key, int64_t epoch, int64_t n);
// ceil(n / batch), or with drop_last (the CNN: batch norm takes batch statistics, PyTorch's
// drop_last) n / batch.
int64_t steps_per_epoch(int64_t n, int64_t batch, bool drop_last = false);
// An epoch's order as the step's "order" input: s32 [steps_per_epoch(n, batch, drop_last) ·
// batch], padded with row 0 (weight 0 in the step) or cut (drop_last).
Array epoch_indices(const std::vector<int32_t>& order, int64_t batch, bool drop_last = false);

struct Metrics {
  double loss = 0;                              // mean cross-entropy (nats)
  double accuracy = 0;                          // fraction
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted], 10 x 10
};
// Metrics of logits f32 [n, 10] against labels s32 [n], computed on the host in f64.
Metrics evaluate(const Array& logits, const Array& labels);
// The confusion matrix with class names and per-class accuracy, as text.
std::string format_confusion(const Metrics& m);
// The confusion matrix as a heat map (plot::render_confusion, the class names of
// io::kFashionMnistClasses), PNG bytes; `title` above it.
std::string confusion_png(const Metrics& m, const std::string& title);

// `tlaloc train fmnist`: the MLP `hidden` (or, with model "cnn", make_cnn(channels): its batch
// norms take batch statistics, so the last partial batch of an epoch is dropped, as PyTorch's
// drop_last, and the test set is scored in eval mode in chunks) trained with AdamW (lr, wd) in
// batches of `batch` for `epochs` epochs over the training set of `data` (its first `limit` rows
// when > 0) through train::fit, the test set evaluated after every epoch; prints the model, each
// epoch's losses and test accuracy, the confusion matrix (and, with `confusion`, its heat map as a
// PNG written there; the file is checked before any work) and the compiled executables to
// common.out. The default schedule is warm-up (one epoch's steps, shortened to the run) then
// cosine; an explicit --warmup (warmup_given) is used as given. Throws tlaloc::Error for bad sizes,
// unreadable data and fit's errors.
struct Config {
  Config() {
    common.schedule = "warmup-cosine";
    common.warmup = 0;  // unless warmup_given: one epoch's steps
    common.save = "fmnist.safetensors";
  }
  Common common;
  std::string data = io::kFashionMnistDir;
  std::string model = "mlp";       // "mlp" or "cnn"
  std::string hidden = "256";      // mlp: hidden layer sizes
  std::string channels = "32,64";  // cnn: channels of the conv blocks
  int64_t epochs = 5;
  int64_t batch = 128;
  double lr = 3e-3, wd = 1e-2;
  int64_t limit = 0;  // use only the first N training rows (tests, quick runs)
  bool warmup_given = false;
  // The command line gave the other model's size flag (--hidden with cnn, --channels with mlp):
  // its name, refused (it would be ignored).
  std::optional<std::string> other_model_flag;
  std::string confusion;  // the test set's confusion matrix as a PNG at the end; empty: none
};
train::FitResult run(const Config& c);

// `tlaloc eval`: the test-set metrics of a `tlaloc train fmnist` checkpoint (its hidden sizes
// read from its metadata), computed on the host lane. Throws tlaloc::Error for another
// recipe's checkpoint, mismatched tensors, a parameter holding NaN or inf (named) or
// unreadable data.
struct CheckpointEval {
  int64_t step = 0;
  int64_t parameters = 0;
  int64_t images = 0;
  Metrics metrics;
};
CheckpointEval evaluate_checkpoint(const std::string& path, const std::string& data);

}  // namespace tlaloc::recipes::fmnist
