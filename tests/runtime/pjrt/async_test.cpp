// Asynchronous execution on the pjrt lane, through the executing fake plugin held by the test
// (fake_control().hold: an execution stays pending until released or waited on): a run
// returns before the device has run it, the Trainer keeps at most max_in_flight steps pending
// and waits for the oldest beyond that, and a failure injected into the n-th execution is
// reported once, naming its step, at the next wait or read. The evidence is the fake's count of
// pending and forced executions and the client's count of waits, never timing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include "disc_run.h"
#include "fake_client.h"
#include "support/train_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/runtime/pjrt/executable.h"
#include "tlaloc/train/fit.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;
using tlaloc::testing::fake_client;
using tlaloc::testing::fake_control;

namespace {

// The disc demo's trainer, K in flight, a new lr every step of 20.
struct Disc : tlaloc::testing::DiscRun {
  explicit Disc(runtime::pjrt::Client* client, int max_in_flight = 2)
      : DiscRun(client, 20, max_in_flight) {}
};

// step(w, g) = (w - g, sum(w)); output 0 aliases (donates) w.
ir::Function step_fn() {
  ir::Builder b("step");
  auto w = b.parameter({DType::f32, {4}}, "w");
  auto g = b.parameter({DType::f32, {4}}, "g");
  ir::Function f = b.build(
      {b.binary(ir::Op::subtract, w, g), b.reduce(w, ir::ReduceKind::sum, {0})}, {"w", "sum"});
  f.aliases.push_back({0, 0});
  return f;
}

// step_fn's arguments on the device: w = [1, 2, 3, 4], g = [1, 1, 1, 1].
std::vector<runtime::Buffer> device_args(runtime::Executable& exe) {
  std::vector<runtime::Buffer> args;
  args.push_back(exe.upload(Array::from<float>({4}, {1, 2, 3, 4})));
  args.push_back(exe.upload(Array::from<float>({4}, {1, 1, 1, 1})));
  return args;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// fit on the disc trainer with empty batches, quiet (no progress, no log lines, output to
// /dev/null, no signal handlers), saving to `save` every `save_every` steps when given; returns
// fit's error message or "(no error)".
std::string fit_quietly(Trainer& t, int64_t steps, CrossCheckMode check,
                        const std::string& save = "", int64_t save_every = 0) {
  FitOptions o;
  o.steps = steps;
  o.log_every = 100;
  if (!save.empty()) o.save = save;
  o.save_every = save_every;
  o.progress = false;
  o.cross_check = check;
  o.handle_signals = false;
  std::FILE* out = std::fopen("/dev/null", "w");
  o.out = out;
  FitCallbacks cb;
  cb.batch = [](const StepPosition&) { return Batch{}; };
  const std::string m = message_of([&] { fit(t, o, cb); });
  std::fclose(out);
  return m;
}

}  // namespace

// The runtime interface: run() on device buffers returns while the execution is pending; its
// outputs can feed the next run at once; done() waits, download() waits for its producer; a
// host buffer copied in for the run may be destroyed while the run is pending.
TEST(PjrtAsync, RunReturnsBeforeTheDeviceRunsIt) {
  auto c = fake_client();
  fake_pjrt::Control& k = fake_control();
  auto exe = runtime::pjrt::compile(step_fn(), *c);
  std::vector<runtime::Buffer> args;
  args.push_back(exe->upload(Array::from<float>({4}, {1, 2, 3, 4})));
  args.emplace_back(Array::from<float>({4}, {1, 1, 1, 1}));  // a host buffer: copied in per run
  k.hold = true;
  std::vector<runtime::Buffer> out = exe->run(args, true);
  EXPECT_EQ(k.pending(), 1u);
  EXPECT_FALSE(out[0].done().ready());
  EXPECT_EQ(c->call_times().waits, 0);
  args[0] = std::move(out[0]);
  std::vector<runtime::Buffer> out2 = exe->run(args, true);  // on the pending output
  EXPECT_EQ(k.pending(), 2u);
  EXPECT_FALSE(out2[0].done().ready());
  EXPECT_EQ(k.forced, 0);
  out2[1].done().wait();  // runs both, in order
  EXPECT_EQ(k.pending(), 0u);
  EXPECT_EQ(k.forced, 2);
  EXPECT_EQ(c->call_times().waits, 1);
  EXPECT_TRUE(out[1].done().ready());
  EXPECT_EQ(exe->download(out[1]).at(0), 10.0);
  EXPECT_EQ(exe->download(out2[1]).at(0), 6.0);
  EXPECT_EQ(exe->download(out2[0]).to_vector<float>(), (std::vector<float>{-1, 0, 1, 2}));
  // A download waits for the execution that produces its buffer.
  args[0] = std::move(out2[0]);
  std::vector<runtime::Buffer> out3 = exe->run(args, true);
  EXPECT_EQ(k.pending(), 1u);
  EXPECT_EQ(exe->download(out3[0]).to_vector<float>(), (std::vector<float>{-2, -1, 0, 1}));
  EXPECT_EQ(k.pending(), 0u);
}

// A plugin that gives no completion event: the first output's ready event stands for it.
TEST(PjrtAsync, WithoutACompletionEventTheOutputsReadyEventIsWaitedOn) {
  auto c = fake_client();
  fake_pjrt::Control& k = fake_control();
  auto exe = runtime::pjrt::compile(step_fn(), *c);
  std::vector<runtime::Buffer> args = device_args(*exe);
  k.hold = true;
  k.no_complete_events = true;
  std::vector<runtime::Buffer> out = exe->run(args, true);
  ASSERT_FALSE(out[1].done().empty());
  EXPECT_FALSE(out[1].done().ready());
  EXPECT_EQ(k.pending(), 1u);
  out[1].done().wait();
  EXPECT_EQ(k.pending(), 0u);
  EXPECT_EQ(c->call_times().waits, 1);
  EXPECT_EQ(exe->download(out[1]).at(0), 10.0);
}

// A failed execution's error reaches its event, its outputs and every run that reads them.
TEST(PjrtAsync, AFailedExecutionIsReportedByItsEventAndItsOutputs) {
  auto c = fake_client();
  fake_pjrt::Control& k = fake_control();
  auto exe = runtime::pjrt::compile(step_fn(), *c);
  std::vector<runtime::Buffer> args = device_args(*exe);
  k.hold = true;
  k.fail_execution = k.executions + 1;
  k.fail_message = "fake: illegal memory access";
  std::vector<runtime::Buffer> out = exe->run(args, true);  // queued: no error yet
  args[0] = std::move(out[0]);
  std::vector<runtime::Buffer> out2 = exe->run(args, true);
  const std::string want = "PJRT execution: fake: illegal memory access (INTERNAL)";
  EXPECT_EQ(message_of([&] { out[1].done().wait(); }), want);
  EXPECT_EQ(message_of([&] { out[1].done().wait(); }), want);   // kept: every wait says it
  EXPECT_EQ(message_of([&] { out2[1].done().wait(); }), want);  // read a failed output
  EXPECT_NE(message_of([&] { exe->download(out2[0]); }).find("fake: illegal memory access"),
            std::string::npos);
}

// step() dispatches and returns: the execution is still pending, nothing waited for it and
// nothing came back; the values are those of the host lane once read.
TEST(PjrtAsync, TrainerStepDoesNotWaitForTheDevice) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc host(nullptr), dev(client.get());
  k.hold = true;
  const int64_t down0 = client->downloads();
  for (int s = 1; s <= 2; ++s) {
    dev.trainer->step({});
    host.trainer->step({});
    EXPECT_EQ(k.pending(), size_t(s)) << "step " << s;  // not run yet
    EXPECT_EQ(dev.trainer->in_flight(), s);
    EXPECT_EQ(client->call_times().waits, 0) << "step " << s;  // no wait per step
    EXPECT_EQ(k.forced, 0);
    EXPECT_EQ(client->downloads(), down0);
  }
  EXPECT_EQ(host.trainer->in_flight(), 0);  // the host lane is synchronous
  k.release(-1);
  EXPECT_EQ(dev.trainer->read_last().loss, host.trainer->read_last().loss);
  EXPECT_EQ(dev.trainer->in_flight(), 0);
  train_test::expect_same_state(*host.trainer, *dev.trainer);
}

// At most K steps pending: step() waits for the oldest (and only it) when K are in flight.
// K = 0 waits for every step before step() returns. Reads wait for all of them, with one wait
// on the newest (each step reads the one before's outputs, so it is done last).
TEST(PjrtAsync, AtMostMaxInFlightStepsArePending) {
  for (int K : {0, 1, 2, 3}) {
    auto client = fake_client();
    fake_pjrt::Control& k = fake_control();
    Disc host(nullptr), dev(client.get(), K);
    k.hold = true;
    for (int s = 1; s <= 7; ++s) {
      dev.trainer->step({});
      host.trainer->step({});
      EXPECT_EQ(k.pending(), size_t(std::min(s, K))) << "K " << K << " step " << s;
      EXPECT_EQ(dev.trainer->in_flight(), std::min(s, K));
      // Waited for: the steps beyond K, one each (K = 0: every step, its own).
      EXPECT_EQ(k.forced, std::max(0, s - K)) << "K " << K << " step " << s;
      EXPECT_EQ(client->call_times().waits, std::max(0, s - K));
    }
    EXPECT_EQ(k.max_pending, size_t(std::max(K, 1)));  // the execution being waited on at K = 0
    const int64_t waits = client->call_times().waits;
    EXPECT_EQ(dev.trainer->read_last().loss, host.trainer->read_last().loss) << "K " << K;
    EXPECT_EQ(k.pending(), 0u);
    EXPECT_EQ(client->call_times().waits - waits, K > 0 ? 1 : 0) << "K " << K;
    train_test::expect_same_state(*host.trainer, *dev.trainer);
  }
  EXPECT_THROW(Disc(fake_client().get(), -1), Error);
}

// f16 (loss scaling) on pjrt: fit counts skipped updates from the flags of finished steps, so
// before each step K are still in flight (reading last_skipped() every step left none).
TEST(PjrtAsync, FitUnderLossScalingKeepsStepsInFlight) {
  auto client = fake_client();
  tlaloc::testing::DiscRun dev(client.get(), 20, 2, DType::f16);
  ASSERT_TRUE(dev.trainer->loss_scaling());
  FitOptions o;
  o.steps = 12;
  o.log_every = 100;
  o.progress = false;
  o.cross_check = CrossCheckMode::off;
  o.handle_signals = false;
  std::FILE* out = std::fopen("/dev/null", "w");
  o.out = out;
  FitCallbacks cb;
  std::vector<int> in_flight;
  cb.batch = [&](const StepPosition&) {
    in_flight.push_back(dev.trainer->in_flight());
    return Batch{};
  };
  EXPECT_EQ(message_of([&] { fit(*dev.trainer, o, cb); }), "(no error)");
  std::fclose(out);
  ASSERT_EQ(in_flight.size(), 12u);
  for (size_t s = 2; s < in_flight.size(); ++s) EXPECT_EQ(in_flight[s], 2) << "step " << s;
  // Every flag was read by the end: none is left for a later count.
  EXPECT_TRUE(dev.trainer->take_skips(false).empty());
  EXPECT_EQ(dev.trainer->steps_taken(), 12);
}

// Every read waits for the steps in flight first: checkpoint reads, evaluation, optimizer step.
TEST(PjrtAsync, ReadsWaitForTheStepsInFlight) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc host(nullptr), dev(client.get());
  int de = dev.trainer->add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{20, 2}}}});
  int he = host.trainer->add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{20, 2}}}});
  k.hold = true;
  const std::vector<std::function<void(Trainer&)>> reads = {
      [](Trainer& t) { t.named_parameters(); },
      [](Trainer& t) { t.optimizer_state(); },
      [](Trainer& t) { t.optimizer_step(); },
      [](Trainer& t) { t.sync_to_model(); },
      [](Trainer& t) { t.wait(); },
  };
  for (const auto& read : reads) {
    dev.trainer->step({});
    dev.trainer->step({});
    host.trainer->step({});
    host.trainer->step({});
    EXPECT_EQ(k.pending(), 2u);
    read(*dev.trainer);
    EXPECT_EQ(k.pending(), 0u);
    EXPECT_EQ(dev.trainer->in_flight(), 0);
  }
  dev.trainer->step({});
  host.trainer->step({});
  Batch grid{{"x", disc::grid_points(4, 5)}}, grid2 = grid;
  Array dp = dev.trainer->run_eval(de, grid)[0];
  EXPECT_EQ(dev.trainer->in_flight(), 0);
  EXPECT_TRUE(dp.bitwise_equal(host.trainer->run_eval(he, grid2)[0]));
  train_test::expect_same_state(*host.trainer, *dev.trainer);
}

// A device failure of step 3, found when the loss is read after step 4: one line naming step 3,
// then every step and read refuses with the same line; the state is never read nor replaced.
TEST(PjrtAsync, ADeviceFailureNamesItsStepAtTheNextRead) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc dev(client.get());
  k.hold = true;
  k.fail_execution = k.executions + 3;  // the third step's execution
  k.fail_message = "fake: device lost (injected)";
  for (int s = 1; s <= 4; ++s) dev.trainer->step({});  // steps 1 and 2 are waited for: fine
  EXPECT_EQ(dev.trainer->in_flight(), 2);
  const std::string want =
      "Trainer: step 3 failed on the device: PJRT execution: fake: device lost (injected) "
      "(INTERNAL) (the parameters and optimizer state after step 2 are lost: start again from a "
      "checkpoint)";
  EXPECT_EQ(message_of([&] { dev.trainer->read_last(); }), want);
  EXPECT_EQ(want.find('\n'), std::string::npos);
  const int64_t executions = k.executions, uploads = client->uploads();
  Batch grid{{"x", disc::grid_points(4, 5)}};
  int de = dev.trainer->add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{20, 2}}}});
  auto params = dev.model->named_parameters();
  std::vector<Array> p, st;
  for (auto& n : params) p.push_back(n.param->value);
  for (auto& [name, type] : dev.trainer->state_specs()) st.emplace_back(type.dtype, type.shape);
  const std::vector<std::function<void()>> later = {
      [&] { dev.trainer->step({}); },
      [&] { dev.trainer->read_last(); },
      [&] { dev.trainer->wait(); },
      [&] { dev.trainer->named_parameters(); },
      [&] { dev.trainer->optimizer_state(); },
      [&] { dev.trainer->optimizer_step(); },
      [&] { dev.trainer->sync_to_model(); },
      [&] { dev.trainer->run_eval(de, grid); },
      [&] { dev.trainer->load_state(p, st, 0); },
  };
  for (size_t i = 0; i < later.size(); ++i) EXPECT_EQ(message_of(later[i]), want) << i;
  EXPECT_EQ(k.executions, executions);    // nothing ran after the failure was known
  EXPECT_EQ(client->uploads(), uploads);  // nor was anything put in place of the state
  EXPECT_EQ(dev.trainer->steps_taken(), 4);
  for (size_t i = 0; i < params.size(); ++i)  // the model keeps its last synced values
    EXPECT_TRUE(dev.model->named_parameters()[i].param->value.bitwise_equal(p[i]));
}

// The failure found by step() itself, waiting for the oldest of K = 2: that step is not
// dispatched; with K = 0 the failing step reports itself.
TEST(PjrtAsync, ADeviceFailureStopsTheNextStep) {
  for (int K : {0, 2}) {
    auto client = fake_client();
    fake_pjrt::Control& k = fake_control();
    Disc dev(client.get(), K);
    k.hold = true;
    k.fail_execution = k.executions + 1;
    k.fail_message = "fake: out of memory";
    const int64_t before = k.executions;
    std::string m;
    int s = 0;
    while (m.empty() && s < 5) {
      ++s;
      try {
        dev.trainer->step({});
      } catch (const Error& e) {
        m = e.what();
      }
    }
    EXPECT_EQ(s, K + 1) << "K " << K;
    EXPECT_EQ(
        m.rfind("Trainer: step 1 failed on the device: PJRT execution: fake: out of memory", 0), 0u)
        << m;
    EXPECT_EQ(k.executions - before, std::max(K, 1)) << "K " << K;
    EXPECT_EQ(dev.trainer->steps_taken(), std::max(K, 1));
  }
}

// train::fit saving every 2 steps: step 5 fails on the device, step 6 is dispatched on its lost
// outputs, and the save after it is refused with the failure, so the checkpoint on disk stays
// the one of step 4 and fit ends with the one-line error.
TEST(PjrtAsync, FitKeepsTheLastGoodCheckpointWhenAStepFailsOnTheDevice) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tlaloc_async_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "disc.safetensors").string();
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc dev(client.get());
  k.hold = true;
  k.fail_execution = k.executions + 5;
  k.fail_message = "fake: ECC error";
  const std::string m = fit_quietly(*dev.trainer, 8, CrossCheckMode::off, path, 2);
  EXPECT_EQ(m.rfind("Trainer: step 5 failed on the device: PJRT execution: fake: ECC error", 0), 0u)
      << m;
  EXPECT_EQ(dev.trainer->steps_taken(), 6);
  EXPECT_EQ(io::load_checkpoint(path).step, 4);
  std::filesystem::remove_all(dir);
}

// Hostile: a failure in an evaluation's own execution is that evaluation's error, not a step's:
// the trainer goes on stepping and evaluating.
TEST(PjrtAsyncHostile, AnEvaluationThatFailsOnTheDeviceLeavesTheTrainerUsable) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc dev(client.get());
  int de = dev.trainer->add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{20, 2}}}});
  for (int s = 1; s <= 2; ++s) dev.trainer->step({});
  dev.trainer->wait();
  k.hold = true;
  k.fail_execution = k.executions + 1;
  k.fail_message = "fake: eval lost";
  Batch grid{{"x", disc::grid_points(4, 5)}};
  const std::string m = message_of([&] { dev.trainer->run_eval(de, grid); });
  EXPECT_NE(m.find("fake: eval lost"), std::string::npos) << m;
  EXPECT_EQ(m.find("Trainer: step"), std::string::npos) << m;
  EXPECT_EQ(message_of([&] { dev.trainer->step({}); }), "(no error)");
  EXPECT_EQ(message_of([&] { dev.trainer->read_last(); }), "(no error)");
  Batch grid2{{"x", disc::grid_points(4, 5)}};
  EXPECT_EQ(message_of([&] { dev.trainer->run_eval(de, grid2); }), "(no error)");
  EXPECT_EQ(dev.trainer->steps_taken(), 3);
}

// Hostile: a Trainer destroyed with a failed step and later ones pending neither throws nor
// hangs.
TEST(PjrtAsyncHostile, DestroyingATrainerWithAFailedStepPending) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  auto dev = std::make_unique<Disc>(client.get(), 8);
  k.hold = true;
  k.fail_execution = k.executions + 2;
  k.fail_message = "fake: gone";
  for (int s = 1; s <= 5; ++s) dev->trainer->step({});
  EXPECT_EQ(dev->trainer->in_flight(), 5);
  EXPECT_NO_THROW(dev.reset());
  k.hold = false;
}

// Hostile: max_in_flight far beyond the steps taken: nothing is waited for until a read.
TEST(PjrtAsyncHostile, AHugeMaxInFlight) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc dev(client.get(), std::numeric_limits<int>::max());
  k.hold = true;
  for (int s = 1; s <= 12; ++s) dev.trainer->step({});
  EXPECT_EQ(dev.trainer->in_flight(), 12);
  EXPECT_TRUE(std::isfinite(dev.trainer->read_last().loss));
  EXPECT_EQ(dev.trainer->in_flight(), 0);
  k.hold = false;
}

// Hostile: the cross-check's first device run fails: fit stops with the device's error (warn
// does not cover over a device failure), and the trainer, whose state the check only lent, can
// still step.
TEST(PjrtAsyncHostile, ACrossCheckThatFailsOnTheDevice) {
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  Disc dev(client.get());
  k.fail_execution = k.executions + 1;
  k.fail_message = "fake: cross-check lost";
  const std::string m = fit_quietly(*dev.trainer, 3, CrossCheckMode::warn);
  EXPECT_NE(m.find("fake: cross-check lost"), std::string::npos) << m;
  EXPECT_EQ(dev.trainer->steps_taken(), 0);
  EXPECT_EQ(message_of([&] { dev.trainer->step({}); }), "(no error)");
  EXPECT_TRUE(std::isfinite(dev.trainer->read_last().loss));
}

// Hostile: the last step fails on the device and fit saves only at the end: the save is
// refused, the checkpoint already on disk (of an earlier run) is left as it was.
TEST(PjrtAsyncHostile, TheFinalSaveIsRefusedWhenTheLastStepFails) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tlaloc_async_final_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "disc.safetensors").string();
  auto client = fake_client();
  fake_pjrt::Control& k = fake_control();
  {
    Disc first(client.get());
    ASSERT_EQ(fit_quietly(*first.trainer, 2, CrossCheckMode::off, path), "(no error)");
  }
  ASSERT_EQ(io::load_checkpoint(path).step, 2);
  Disc dev(client.get());
  k.hold = true;
  k.fail_execution = k.executions + 3;
  k.fail_message = "fake: last step lost";
  const std::string m = fit_quietly(*dev.trainer, 3, CrossCheckMode::off, path);
  k.hold = false;
  EXPECT_EQ(m.rfind("Trainer: step 3 failed on the device", 0), 0u) << m;
  EXPECT_EQ(io::load_checkpoint(path).step, 2);
  std::filesystem::remove_all(dir);
}
