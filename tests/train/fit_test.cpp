// train::fit on a small regression whose batches (row indices, a per-step input by name) are
// shuffled per epoch: the log / evaluation / metrics cadence, a stopped-and-resumed run equal
// bit for bit to an uninterrupted one, a diverged run that keeps the good checkpoint, SIGTERM
// and SIGINT (saved, stopped, handlers restored), and options refused before any work.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/captured_output.h"
#include "support/error_of.h"
#include "support/file_size_limit.h"
#include "support/train_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/metrics_csv.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/plot/canvas.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/fit.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;

using tlaloc::testing::error_of;

namespace {

constexpr int64_t kRows = 48, kBatch = 8, kPerEpoch = kRows / kBatch;

struct TrainRun {
  std::shared_ptr<nn::Sequential> model = disc::make_model();
  std::unique_ptr<Trainer> trainer;
};

TrainRun make_run(uint64_t init_seed, double lr = 0.02) {
  TrainRun r;
  r.model->init(random::key(init_seed));
  LossFn loss = [](nn::Module& m, const Inputs& d) {
    trace::Tensor x = trace::take_rows(d["x"], d["idx"]), y = trace::take_rows(d["y"], d["idx"]);
    return std::vector<trace::Tensor>{nn::mse_loss(m(x), y)};
  };
  std::vector<DataInput> data{{"x", {DType::f32, Shape{kRows, 2}}, true},
                              {"y", {DType::f32, Shape{kRows, 1}}, true},
                              {"idx", {DType::s32, Shape{kBatch}}, false}};
  TrainerOptions o;
  o.schedule = optim::parse_schedule("cosine", 3 * kPerEpoch);
  r.trainer = std::make_unique<Trainer>(*r.model, loss, data, optim::Adam{.lr = lr}, o);
  disc::Data d = disc::make_data(random::key(2), kRows);
  r.trainer->set_resident("x", d.x);
  r.trainer->set_resident("y", d.y);
  return r;
}

// Batch p.batch of epoch p.epoch's shuffled order.
Batch batch_at(const StepPosition& p) {
  auto order =
      random::permutation_indices(random::fold_in(random::key(3), uint32_t(p.epoch)), kRows);
  std::vector<int32_t> idx(order.begin() + p.batch * kBatch,
                           order.begin() + (p.batch + 1) * kBatch);
  return {{"idx", Array::from(Shape{kBatch}, idx)}};
}

using Output = tlaloc::testing::CapturedOutput;

struct Scratch {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tlaloc_fit_" + std::to_string(getpid()));
  Scratch() { std::filesystem::create_directories(dir); }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string operator()(const std::string& name) const { return (dir / name).string(); }
};

FitOptions options(std::FILE* out) {
  FitOptions o;
  o.name = "test fit";
  o.steps = 3 * kPerEpoch;
  o.steps_per_epoch = kPerEpoch;
  o.items_per_step = kBatch;
  o.items_per_epoch = kRows;
  o.log_every = 4;
  o.progress = false;
  o.seed = 5;
  o.metadata = {{"recipe", "test"}};
  o.out = out;
  return o;
}

std::string file_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST(Fit, EpochsLogEvaluateAndWriteMetricsOnTheirCadence) {
  Scratch tmp;
  Output out;
  TrainRun r = make_run(1);
  FitOptions o = options(out.f);
  o.eval_every = 9;
  o.metrics = tmp("m.csv");
  FitCallbacks cb;
  cb.batch = batch_at;
  std::vector<int64_t> logged;
  std::vector<double> losses;
  cb.on_log = [&](const StepLog& l) {
    logged.push_back(l.step);
    losses.push_back(l.report.loss);
  };
  std::vector<EvalPoint> evals;
  cb.evaluate = [&](const EvalPoint& p) {
    evals.push_back(p);
    return Metrics{{"val_loss", double(p.step)}};
  };
  int ends = 0;
  cb.on_end = [&](int64_t steps_run, double) { ends += steps_run == 3 * kPerEpoch; };
  FitResult res = fit(*r.trainer, o, cb);
  EXPECT_EQ(res.steps, 3 * kPerEpoch);
  EXPECT_FALSE(res.interrupted || res.stopped);
  EXPECT_EQ(ends, 1);
  // Every 4 batches of an epoch and at its last batch.
  EXPECT_EQ(logged, (std::vector<int64_t>{4, 6, 10, 12, 16, 18}));
  // Epoch ends at steps 6, 12, 18; eval_every at 9 and 18 (before that epoch's end).
  ASSERT_EQ(evals.size(), 5u);
  std::vector<int64_t> at;
  for (const auto& p : evals) at.push_back(p.step);
  EXPECT_EQ(at, (std::vector<int64_t>{6, 9, 12, 18, 18}));
  EXPECT_TRUE(evals[0].epoch_end);
  EXPECT_EQ(evals[0].items, kRows);
  EXPECT_FALSE(evals[1].epoch_end);
  EXPECT_EQ(evals[1].epoch, 1);
  EXPECT_EQ(evals[1].items, 3 * kBatch);  // 3 batches into the second epoch
  EXPECT_TRUE(evals[2].epoch_end);
  EXPECT_EQ(evals[2].epoch, 1);
  EXPECT_EQ(evals[2].train_loss, (losses[2] + losses[3]) / 2);  // steps 10 and 12
  EXPECT_FALSE(evals[3].epoch_end);
  EXPECT_TRUE(evals[4].epoch_end);
  EXPECT_EQ(out.text(), "");  // no --save: nothing printed without a progress bar

  std::istringstream csv(file_text(tmp("m.csv")));
  std::vector<std::string> rows;
  for (std::string line; std::getline(csv, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 1u + 6 + 5);
  EXPECT_EQ(rows[0], "kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s");
  auto fields = [](const std::string& row) {
    std::vector<std::string> f;
    std::istringstream in(row);
    for (std::string x; std::getline(in, x, ',');) f.push_back(x);
    return f;
  };
  auto step = fields(rows[1]), epoch = fields(rows[3]), eval = fields(rows[4]);
  ASSERT_EQ(step.size(), 8u);
  EXPECT_EQ(step[0] + step[1] + step[2], "step41");
  EXPECT_EQ(std::stod(step[3]), losses[0]);  // shortest text that reads back exactly
  EXPECT_EQ(step[4] + step[5], "");          // no evaluation in a step row
  // The lr of step 4 (0-based 3) of the cosine schedule over 18 steps, base 0.02.
  EXPECT_EQ(std::stod(step[6]), 0.02 * optim::parse_schedule("cosine", 3 * kPerEpoch).factor(3));
  EXPECT_GT(std::stod(step[7]), 0);  // wall time
  EXPECT_EQ(epoch[0] + epoch[1] + epoch[2] + epoch[4], "epoch616");
  EXPECT_EQ(eval[0] + eval[1] + eval[2] + eval[4], "eval929");
  EXPECT_EQ(eval[3], "");  // no loss read yet in this epoch at step 9 (the next at step 10)
  EXPECT_EQ(std::stod(epoch[3]), losses[0] / 2 + losses[1] / 2);  // the epoch's mean
  EXPECT_EQ(epoch[5], "");                                        // no accuracy reported

  // A full disk is an error, not a cut file (the header fits, the first row does not).
  TrainRun r2 = make_run(1);
  o.metrics = tmp("full.csv");
  std::string e;
  {
    tlaloc::testing::FileSizeLimit full(48);
    e = error_of([&] { fit(*r2.trainer, o, cb); });
  }
  EXPECT_EQ(e, "test fit: --metrics " + o.metrics + ": cannot write: File too large");
}

// --plot: the curves of the rows so far at every save point and at the end, after the final
// row of the held-out values (FitCallbacks::final_metrics); an evaluation reporting a value that
// is not a column is an error.
TEST(Fit, PlotsAtEverySavePointAndAtTheEndAfterTheFinalRow) {
  Scratch tmp;
  Output out;
  TrainRun r = make_run(1);
  FitOptions o = options(out.f);
  o.save = tmp("p.st");
  o.save_every = 5;
  o.metrics = tmp("p.csv");
  o.plot = tmp("curves.png");
  FitCallbacks cb;
  cb.batch = batch_at;
  cb.evaluate = [](const EvalPoint& p) {
    return Metrics{{"val_loss", 1.0 / double(p.step)}, {"val_accuracy", 0.5}};
  };
  cb.final_metrics = [] { return Metrics{{"val_loss", 0.25}}; };
  fit(*r.trainer, o, cb);
  const std::string text = out.text();
  // Save points at steps 5, 10, 15, the end at 18; the first loss is read at step 4.
  for (int step : {5, 10, 15, 18})
    EXPECT_NE(text.find("plotted " + o.plot + " (step " + std::to_string(step) + ")\n"),
              std::string::npos)
        << step << text;
  size_t plotted = 0;
  for (size_t at = text.find("plotted "); at != std::string::npos;
       at = text.find("plotted ", at + 1))
    ++plotted;
  EXPECT_EQ(plotted, 4u) << text;
  const plot::Image img = plot::decode_png(file_text(o.plot));
  EXPECT_EQ(img.width, 900);
  EXPECT_EQ(img.height, 600);
  // The rows read back through the plot's reader; the last one is the final row.
  const std::vector<io::MetricsRow> rows = io::read_metrics(o.metrics, "test");
  ASSERT_EQ(rows.size(), 6u + 3 + 1);
  EXPECT_EQ(rows.back().kind, "final");
  EXPECT_EQ(rows.back().step, 18);
  EXPECT_EQ(rows.back().epoch, 3);
  EXPECT_TRUE(std::isnan(rows.back().train_loss));
  EXPECT_EQ(rows.back().val_loss, 0.25);
  EXPECT_TRUE(std::isnan(rows.back().val_accuracy));
  EXPECT_EQ(rows[2].kind, "epoch");
  EXPECT_EQ(rows[2].val_accuracy, 0.5);
  EXPECT_EQ(rows[2].val_loss, 1.0 / 6);

  TrainRun r2 = make_run(1);
  cb.evaluate = [](const EvalPoint&) { return Metrics{{"accuracy", 1.0}}; };
  o.save.reset();
  o.metrics = tmp("p2.csv");
  EXPECT_EQ(error_of([&] { fit(*r2.trainer, o, cb); }),
            "test fit: the evaluation reported 'accuracy', which is not a metrics column "
            "(val_loss, val_accuracy)");
}

TEST(Fit, AStoppedAndResumedRunEqualsAnUninterruptedOneBitwise) {
  Scratch tmp;
  Output out;
  FitCallbacks cb;
  cb.batch = batch_at;
  std::vector<double> full_losses, resumed_losses;
  TrainRun full = make_run(1);
  cb.on_log = [&](const StepLog& l) { full_losses.push_back(l.report.loss); };
  fit(*full.trainer, options(out.f), cb);

  // Stopped inside the second epoch, saved, resumed into a differently initialised model.
  TrainRun part = make_run(1);
  FitOptions o = options(out.f);
  o.save = tmp("a.safetensors");
  o.stop_after = 8;
  cb.on_log = nullptr;
  FitResult stopped = fit(*part.trainer, o, cb);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.steps, 8);
  EXPECT_EQ(io::load_checkpoint(*o.save).step, 8);

  TrainRun resumed = make_run(99);
  o.stop_after = 0;
  o.resume = o.save;
  o.save = tmp("b.safetensors");
  cb.on_log = [&](const StepLog& l) { resumed_losses.push_back(l.report.loss); };
  FitResult res = fit(*resumed.trainer, o, cb);
  EXPECT_EQ(res.steps, 3 * kPerEpoch);
  train_test::expect_same_state(*full.trainer, *resumed.trainer);
  // Logged after the resume: steps 10, 12, 16, 18 (the last four of the full run's six).
  ASSERT_EQ(resumed_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(resumed_losses[i], full_losses[2 + i]) << i;
  std::string text = out.text();
  EXPECT_NE(text.find("stopped after 8 steps (--stop-after)"), std::string::npos) << text;
  EXPECT_NE(text.find("resumed from " + tmp("a.safetensors") + " at step 8"), std::string::npos);
  EXPECT_NE(text.find("saved " + tmp("b.safetensors") + " (step 18)"), std::string::npos);

  // Another seed, another recipe, a finished run: refused by name.
  TrainRun again = make_run(1);
  o.seed = 6;
  EXPECT_NE(error_of([&] { fit(*again.trainer, o, cb); }).find("it was trained with --seed 5"),
            std::string::npos);
  o.seed = 5;
  o.metadata = {{"recipe", "other"}};
  EXPECT_NE(error_of([&] {
              fit(*again.trainer, o, cb);
            }).find("it is a `tlaloc train test` checkpoint, this is `tlaloc train other`"),
            std::string::npos);
  o.metadata = {{"recipe", "test"}};
  o.resume = tmp("b.safetensors");
  EXPECT_NE(error_of([&] {
              fit(*again.trainer, o, cb);
            }).find("it is at step 18 already; this run ends at step 18: nothing to train"),
            std::string::npos);
  EXPECT_EQ(again.trainer->steps_taken(), 0);
}

// A time limit ends the run after the step that reaches it, as its last step would: the report
// (on_end), then the save; a checkpoint format of the caller's writes and reads it, and the
// resumed run equals an uninterrupted one.
TEST(Fit, ATimeLimitEndsTheRunWithItsReportAndSaveThroughTheFormat) {
  Scratch tmp;
  Output out;
  FitCallbacks cb;
  TrainRun full = make_run(1);
  cb.batch = batch_at;
  fit(*full.trainer, options(out.f), cb);

  std::vector<std::string> calls;
  FitOptions::CheckpointFormat format;
  format.check_output = [&](const std::string& p, const std::string& what) {
    calls.push_back("check " + p + " " + what);
  };
  format.save = [&](const std::string& p, const io::Checkpoint& c) {
    calls.push_back("save " + p);
    io::save_checkpoint(p, c);
  };
  format.load = [&](const std::string& p) {
    calls.push_back("load " + p);
    return io::load_checkpoint(p);
  };
  TrainRun part = make_run(1);
  FitOptions o = options(out.f);
  o.save = tmp("c");
  o.format = format;
  o.time_limit_seconds = 0.2;
  int ends = 0;
  cb.batch = [](const StepPosition& p) {
    if (p.step == 4) usleep(300000);  // step 5 runs past the limit
    return batch_at(p);
  };
  cb.on_end = [&](int64_t steps_run, double) {
    ++ends;
    EXPECT_EQ(steps_run, 5);
  };
  FitResult r = fit(*part.trainer, o, cb);
  EXPECT_TRUE(r.stopped && r.out_of_time);
  EXPECT_EQ(r.steps, 5);
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(calls, (std::vector<std::string>{"check " + tmp("c") + " test fit: --save",
                                             "save " + tmp("c")}));
  EXPECT_NE(out.text().find("stopped at step 5 of 18: the time limit of 0.003333 minutes is "
                            "reached (continue with --resume " +
                            tmp("c") + ")"),
            std::string::npos)
      << out.text();

  TrainRun resumed = make_run(7);
  o.resume = tmp("c");
  o.time_limit_seconds = 0;
  cb.batch = batch_at;
  cb.on_end = nullptr;
  calls.clear();
  fit(*resumed.trainer, o, cb);
  EXPECT_EQ(calls[1], "load " + tmp("c"));
  train_test::expect_same_state(*full.trainer, *resumed.trainer);
  // A format reads folders: a --resume file is refused then, and a folder without one.
  o.format->folder = true;
  EXPECT_NE(error_of([&] { check(o); }).find("is not a folder (a model directory)"),
            std::string::npos);
  o.format = std::nullopt;
  o.resume = tmp("");
  EXPECT_NE(error_of([&] { check(o); }).find("is a folder, not a checkpoint"), std::string::npos);
  o.resume = std::nullopt;
  o.time_limit_seconds = -1;
  EXPECT_NE(error_of([&] { check(o); }).find("the time limit -1 s must be finite and >= 0"),
            std::string::npos);
}

TEST(Fit, ANonFiniteLossStopsTheRunAndKeepsTheGoodCheckpoint) {
  Scratch tmp;
  Output out;
  FitCallbacks cb;
  cb.batch = batch_at;
  TrainRun good = make_run(1);
  FitOptions o = options(out.f);
  o.steps = kPerEpoch;
  o.save = tmp("good.safetensors");
  fit(*good.trainer, o, cb);
  const std::string saved = file_text(*o.save);

  TrainRun wild = make_run(1, 1e30);  // diverges at once
  o.steps = 3 * kPerEpoch;
  o.log_every = 1;
  o.resume = o.save;
  std::string e = error_of([&] { fit(*wild.trainer, o, cb); });
  EXPECT_NE(e.find("test fit: the training loss is "), std::string::npos) << e;
  EXPECT_NE(e.find("no checkpoint written"), std::string::npos) << e;
  EXPECT_EQ(file_text(*o.save), saved);

  // A checkpoint holding NaN is refused on resume, naming the tensor.
  io::Checkpoint c = io::load_checkpoint(*o.save);
  c.params[0].second.data<float>()[0] = NAN;
  io::save_checkpoint(tmp("nan.safetensors"), c);
  TrainRun r = make_run(1);
  o.resume = tmp("nan.safetensors");
  e = error_of([&] { fit(*r.trainer, o, cb); });
  EXPECT_NE(e.find("tensor '" + c.params[0].first + "' holds 1 NaN or inf values"),
            std::string::npos)
      << e;
}

TEST(Fit, SigtermAndSigintSaveStopAndRestoreTheHandlers) {
  Scratch tmp;
  for (int sig : {SIGTERM, SIGINT}) {
    Output out;
    TrainRun r = make_run(1);
    FitOptions o = options(out.f);
    if (sig == SIGTERM) o.save = tmp("s.safetensors");
    FitCallbacks cb;
    cb.batch = [&](const StepPosition& p) {
      if (p.step == 3) std::raise(sig);  // arrives during step 4
      return batch_at(p);
    };
    struct sigaction before {};
    sigaction(sig, nullptr, &before);
    FitResult res = fit(*r.trainer, o, cb);
    EXPECT_TRUE(res.interrupted);
    EXPECT_EQ(res.signal, sig);
    EXPECT_EQ(res.steps, 4);
    std::string text = out.text();
    if (sig == SIGTERM) {
      EXPECT_EQ(io::load_checkpoint(*o.save).step, 4);
      EXPECT_NE(text.find("interrupted at step 4: continue with --resume " + *o.save),
                std::string::npos)
          << text;
    } else {
      EXPECT_NE(text.find("interrupted at step 4 (no --save: nothing saved)"), std::string::npos)
          << text;
    }
    struct sigaction now {};
    sigaction(sig, nullptr, &now);
    EXPECT_EQ(now.sa_handler, before.sa_handler);
  }
}

TEST(Fit, OptionsAreCheckedBeforeAnyWork) {
  Scratch tmp;
  Output out;
  TrainRun r = make_run(1);
  auto refused = [&](const std::function<void(FitOptions&)>& edit) {
    FitOptions o = options(out.f);
    edit(o);
    std::string e = error_of([&] { fit(*r.trainer, o, {}); });
    EXPECT_EQ(r.trainer->steps_taken(), 0) << e;
    return e;
  };
  EXPECT_EQ(refused([](FitOptions& o) { o.resume = ""; }),
            "test fit: --resume is empty (an unset variable?); omit it to train from scratch");
  EXPECT_EQ(refused([](FitOptions& o) { o.save = ""; }), "test fit: --save is empty");
  EXPECT_EQ(refused([&](FitOptions& o) { o.resume = tmp("missing.st"); }),
            "test fit: --resume " + tmp("missing.st") + ": No such file or directory");
  EXPECT_EQ(refused([&](FitOptions& o) { o.resume = tmp.dir.string(); }),
            "test fit: --resume " + tmp.dir.string() + " is a folder, not a checkpoint");
  EXPECT_EQ(
      refused([&](FitOptions& o) { o.save = tmp("no/x.safetensors"); }),
      "test fit: --save " + tmp("no/x.safetensors") + ": folder " + tmp("no") + " does not exist");
  EXPECT_EQ(refused([&](FitOptions& o) { o.save = tmp(""); }),
            "test fit: --save " + tmp("") + " is a folder; give a file name");
  EXPECT_EQ(refused([&](FitOptions& o) { o.metrics = tmp.dir.string(); }),
            "test fit: --metrics " + tmp.dir.string() + " is a folder; give a file name");
  // Devices and FIFOs are refused before any work, never replaced or opened.
  ASSERT_EQ(mkfifo(tmp("fifo").c_str(), 0644), 0);
  EXPECT_EQ(refused([&](FitOptions& o) { o.save = tmp("fifo"); }),
            "test fit: --save " + tmp("fifo") +
                " is a FIFO (named pipe), not a regular file (tlaloc writes only regular files)");
  EXPECT_EQ(refused([&](FitOptions& o) { o.metrics = tmp("fifo"); }),
            "test fit: --metrics " + tmp("fifo") +
                " is a FIFO (named pipe), not a regular file (tlaloc writes only regular files)");
  EXPECT_EQ(refused([](FitOptions& o) { o.save = "/dev/null"; }),
            "test fit: --save /dev/null is a character device, not a regular file (tlaloc writes "
            "only regular files)");
  EXPECT_TRUE(std::filesystem::is_fifo(tmp("fifo")));
  EXPECT_EQ(refused([](FitOptions& o) { o.save_every = -1; }),
            "test fit: --save-every -1 must be >= 0");
  EXPECT_EQ(refused([](FitOptions& o) { o.steps = 0; }),
            "test fit: the run has 0 steps; it needs at least 1");
  // Metrics rows appended to the checkpoint would make it unreadable.
  EXPECT_EQ(refused([&](FitOptions& o) { o.save = o.metrics = tmp("same.st"); }),
            "test fit: --metrics " + tmp("same.st") + " is the checkpoint file " + tmp("same.st") +
                " too; give it a file of its own");
  // The picture: a regular file of its own, checked like the others.
  EXPECT_EQ(refused([&](FitOptions& o) { o.plot = tmp.dir.string(); }),
            "test fit: --plot " + tmp.dir.string() + " is a folder; give a file name");
  EXPECT_EQ(refused([&](FitOptions& o) { o.plot = tmp("no/c.png"); }),
            "test fit: --plot " + tmp("no/c.png") + ": folder " + tmp("no") + " does not exist");
  EXPECT_EQ(refused([&](FitOptions& o) { o.save = o.plot = tmp("same.st"); }),
            "test fit: --plot " + tmp("same.st") + " is the checkpoint file " + tmp("same.st") +
                " too; give it a file of its own");
  EXPECT_EQ(refused([&](FitOptions& o) { o.metrics = o.plot = tmp("m.csv"); }),
            "test fit: --plot " + tmp("m.csv") +
                " is the --metrics file too; give the picture a file of its own");
  // Rows of this layout appended to a file of another would make neither readable.
  std::ofstream(tmp("old.csv")) << "kind,step,epoch,train_loss,test_loss,seconds\nstep,1,1,2,,3\n";
  EXPECT_EQ(refused([&](FitOptions& o) { o.metrics = tmp("old.csv"); }),
            "test fit: --metrics " + tmp("old.csv") +
                " holds another layout (its header is \"kind,step,epoch,train_loss,test_loss,"
                "seconds\", this version writes kind,step,epoch,train_loss,val_loss,val_accuracy,"
                "lr,wall_s); give a new file");
  EXPECT_EQ(refused([](FitOptions& o) { o.items_per_step = -1; }),
            "test fit: items per step -1 and per epoch 48 must be >= 0 (per step > 0)");
  EXPECT_EQ(refused([](FitOptions& o) { o.progress_unit = 0; }),
            "test fit: the progress unit 0 must be finite and > 0");
  // A batch without its per-step input: Trainer::step names it; nothing ran.
  FitCallbacks cb;
  cb.batch = [](const StepPosition&) { return Batch{{"rows", Array::scalar(1)}}; };
  std::string e = error_of([&] { fit(*r.trainer, options(out.f), cb); });
  EXPECT_EQ(e, "Trainer::step: no input is named 'rows' (it takes idx)");
  EXPECT_EQ(r.trainer->steps_taken(), 0);
}

// fit holds the advisory lock of --save while it runs (another process's flock on the lock file
// fails) and releases it when it returns.
TEST(Fit, TheSaveIsLockedWhileTheRunLasts) {
  Scratch tmp;
  Output out;
  TrainRun r = make_run(1);
  FitOptions o = options(out.f);
  o.save = tmp("locked.safetensors");
  const std::string lock = io::lock_path(*o.save);
  auto other_can_lock = [&] {  // as another process would: its own open file
    const int fd = open(lock.c_str(), O_RDONLY | O_CLOEXEC);
    const bool ok = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (fd >= 0) close(fd);
    return ok;
  };
  FitCallbacks cb;
  cb.batch = batch_at;
  int checked = 0;
  cb.on_start = [&] { checked += !other_can_lock(); };
  fit(*r.trainer, o, cb);
  EXPECT_EQ(checked, 1);
  EXPECT_TRUE(other_can_lock());
}
