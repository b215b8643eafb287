#include "tlaloc/train/step_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "tlaloc/optim/optimizer.h"
#include "tlaloc/runtime/pjrt/executable.h"

namespace tlaloc::train {

namespace {

const char* kNames[3] = {"(a) host lane, optimizer in the program",
                         "(b) pjrt lane, gradients downloaded + AdamW on the host",
                         "(c) pjrt lane, optimizer in the program, state donated"};

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Runs warm-up (recording kLossSteps losses via `loss_of`), then `at_timed` (if any), then
// `steps` timed steps.
LaneTiming run_lane(int lane, int64_t steps, int64_t warmup,
                    const std::function<void(int64_t)>& step,
                    const std::function<double()>& loss_of,
                    const std::function<void()>& at_timed = {}) {
  LaneTiming t;
  t.name = kNames[lane];
  warmup = std::max<int64_t>(warmup, kLossSteps);
  for (int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup && at_timed) at_timed();
    double t0 = now_ms();
    step(s);
    double t1 = now_ms();
    if (s < kLossSteps) t.losses.push_back(loss_of());
    if (s >= warmup) t.ms.push_back(t1 - t0);
  }
  std::sort(t.ms.begin(), t.ms.end());
  return t;
}

std::unique_ptr<Trainer> make_trainer(const StepBenchCase& c, nn::Module& m, Lane lane,
                                      runtime::pjrt::Client* client,
                                      int max_in_flight = TrainerOptions{}.max_in_flight) {
  TrainerOptions o;
  o.num_threads = c.num_threads;
  o.precision = c.precision;
  o.lane = lane;
  o.client = client;
  o.max_in_flight = max_in_flight;
  o.flat_state = c.flat_state;
  auto t = std::make_unique<Trainer>(m, c.loss, c.data, c.opt, o);
  for (const auto& [name, value] : c.resident) t->set_resident(name, value);
  return t;
}

Batch per_step(const StepBenchCase& c, int64_t s) { return c.per_step ? c.per_step(s) : Batch{}; }

// run_lane on a pjrt lane, with the step split into the client's uploads / executions /
// downloads ("per step: 1.00 uploads 0.031 ms, 1.00 executions ... ms, 0.03 downloads ... ms").
LaneTiming run_pjrt_lane(int lane, runtime::pjrt::Client& client, int64_t steps, int64_t warmup,
                         const std::function<void(int64_t)>& step,
                         const std::function<double()>& loss_of) {
  const auto a = client.call_times();
  int64_t timed_waits = 0;
  LaneTiming t = run_lane(lane, steps, warmup, step, loss_of,
                          [&] { timed_waits = client.call_times().waits; });
  const auto b = client.call_times();
  t.latency_waits = steps > 0 ? b.waits - timed_waits : 0;
  const double k = 1.0 / double(std::max<int64_t>(warmup, kLossSteps) + steps);
  // Executions are asynchronous: their call is the dispatch; the device time shows in the waits
  // (lane (c) waits for every step it times) and in downloads (which wait for their producer).
  t.detail = fmt::format(
      "per step: {:.2f} uploads {:.4f} ms, {:.2f} executions (dispatch) {:.4f} ms, {:.2f} waits "
      "for the device {:.4f} ms, {:.2f} downloads {:.4f} ms",
      double(b.uploads - a.uploads) * k, (b.upload_ms - a.upload_ms) * k,
      double(b.executes - a.executes) * k, (b.execute_ms - a.execute_ms) * k,
      double(b.waits - a.waits) * k, (b.wait_ms - a.wait_ms) * k,
      double(b.downloads - a.downloads) * k, (b.download_ms - a.download_ms) * k);
  return t;
}

}  // namespace

LaneTiming skipped_lane(char lane, std::string reason) {
  LaneTiming t;
  t.name = kNames[lane - 'a'];
  t.skipped = std::move(reason);
  return t;
}

LaneTiming bench_host_lane(const StepBenchCase& c, int64_t steps, int64_t warmup) {
  auto m = c.make_model();
  auto t = make_trainer(c, *m, Lane::host, nullptr);
  return run_lane(
      0, steps, warmup, [&](int64_t s) { t->step(per_step(c, s)); },
      [&] { return t->read_last().loss; });
}

StepBenchMode parse_step_bench_mode(const std::string& s) {
  if (s == "latency") return StepBenchMode::latency;
  if (s == "throughput") return StepBenchMode::throughput;
  if (s == "both") return StepBenchMode::both;
  fail("bench step: --mode must be latency, throughput or both, got '{}'", s);
}

LaneTiming bench_pjrt_in_program(const StepBenchCase& c, runtime::pjrt::Client& client,
                                 int64_t steps, int64_t warmup, StepBenchMode mode,
                                 int64_t repeats) {
  const bool latency = mode != StepBenchMode::throughput;
  const bool throughput = mode != StepBenchMode::latency && steps > 0 && repeats > 0;
  auto m = c.make_model();
  // A throughput run keeps all its steps in flight (JAX too dispatches without a bound); the
  // latency steps wait for each.
  const int default_in_flight = TrainerOptions{}.max_in_flight;
  auto t = make_trainer(
      c, *m, Lane::pjrt, &client,
      throughput ? int(std::clamp<int64_t>(steps, default_in_flight, 1 << 30)) : default_in_flight);
  // Latency: each timed step is waited for, so its time includes the device's work (step()
  // alone would only dispatch it).
  const int64_t timed = latency ? steps : 0;
  LaneTiming r = run_pjrt_lane(
      2, client, timed, warmup,
      [&](int64_t s) {
        t->step(per_step(c, s));
        t->wait();
      },
      [&] { return t->read_last().loss; });
  if (!throughput) return r;
  // Throughput: `repeats` runs of `steps` steps dispatched back to back, one wait at the end.
  int64_t s = std::max<int64_t>(warmup, kLossSteps) + timed;
  const auto a = client.call_times();
  for (int64_t k = 0; k < repeats; ++k) {
    const double t0 = now_ms();
    for (int64_t i = 0; i < steps; ++i) t->step(per_step(c, s++));
    t->wait();
    r.throughput_ms.push_back((now_ms() - t0) / double(steps));
  }
  const auto b = client.call_times();
  std::sort(r.throughput_ms.begin(), r.throughput_ms.end());
  r.throughput_steps = steps;
  r.throughput_waits = b.waits - a.waits;
  const double k = 1.0 / double(repeats);
  r.throughput_detail = fmt::format(
      "per run of {} steps: {:.2f} uploads {:.4f} ms, {:.2f} executions (dispatch) {:.4f} ms, "
      "{:.2f} waits for the device {:.4f} ms, {:.2f} downloads {:.4f} ms",
      steps, double(b.uploads - a.uploads) * k, (b.upload_ms - a.upload_ms) * k,
      double(b.executes - a.executes) * k, (b.execute_ms - a.execute_ms) * k,
      double(b.waits - a.waits) * k, (b.wait_ms - a.wait_ms) * k,
      double(b.downloads - a.downloads) * k, (b.download_ms - a.download_ms) * k);
  return r;
}

LaneTiming bench_pjrt_host_optimizer(const StepBenchCase& c, runtime::pjrt::Client& client,
                                     int64_t steps, int64_t warmup) {
  auto m = c.make_model();
  if (c.precision == DType::f16) fail("bench step: lane (b) has no loss scaling for f16");
  ir::Function grad = build_gradient(*m, c.loss, c.data, nullptr, nullptr, c.precision);
  auto exe = runtime::pjrt::compile(grad, client);
  std::vector<Array> params;
  std::vector<ir::TensorType> types;
  for (auto& p : m->named_parameters()) {
    params.push_back(p.param->value);
    types.push_back(optim::master_type({p.param->value.dtype(), p.param->value.shape()}));
  }
  std::vector<Array> state = optim::init_state(optim::state_layout(c.opt, types));
  double lr = std::visit([](const auto& o) { return o.lr; }, c.opt);
  const size_t nd = c.data.size(), np = params.size();
  const size_t first_grad = size_t(grad.num_outputs()) - np;
  std::vector<runtime::Buffer> args(nd + np);
  auto find = [&](Batch& b, const std::string& name) -> Array& {
    for (auto& [n, a] : b)
      if (n == name) return a;
    fail("step bench '{}': input '{}' missing", c.title, name);
  };
  Batch resident = c.resident;
  for (size_t i = 0; i < nd; ++i)  // resident data: on the device once
    if (c.data[i].resident) args[i] = exe->upload(std::move(find(resident, c.data[i].name)));
  double last_loss = 0;
  auto step = [&](int64_t s) {
    // Per-step data and the parameters go as host buffers: the run uploads them.
    Batch in = per_step(c, s);
    for (size_t i = 0; i < nd; ++i)
      if (c.data[i].step_index)  // the Trainer's rule: the step's 0-based index
        args[i] = runtime::Buffer(Array::scalar<int32_t>(int32_t(uint32_t(s))));
      else if (!c.data[i].resident)
        args[i] = runtime::Buffer(std::move(find(in, c.data[i].name)));
    for (size_t i = 0; i < np; ++i) args[nd + i] = runtime::Buffer(std::move(params[i]));
    std::vector<runtime::Buffer> out = exe->run(args, false);
    for (size_t i = 0; i < np; ++i) params[i] = args[nd + i].take_array();
    out[0].done().wait();  // the device's time shows as a wait, the downloads as transfers
    last_loss = exe->download(out[0]).at(0);
    std::vector<Array> grads;
    for (size_t i = 0; i < np; ++i) grads.push_back(exe->download(std::move(out[first_grad + i])));
    double lrs[1] = {lr};
    optim::reference_step(c.opt, {}, params, grads, state, lrs);
  };
  return run_pjrt_lane(1, client, steps, warmup, step, [&] { return last_loss; });
}

std::string lane_table(const std::vector<LaneTiming>& lanes) {
  constexpr int w = 64;  // the lane column
  std::string s = fmt::format("{:<{}} {:>10} {:>10} {:>10}  {}\n", "lane", w, "median ms", "min ms",
                              "max ms", "loss vs (a), 10 steps");
  auto find = [&](char c) -> const LaneTiming* {
    for (const auto& l : lanes)
      if (l.name[1] == c && l.skipped.empty()) return &l;
    return nullptr;
  };
  const LaneTiming *la = find('a'), *lb = find('b'), *lc = find('c');
  // One row of sorted times; "key" names its RESULT fields (lane_c_latency_median_ms, ...).
  std::string result = "RESULT tlaloc";
  auto row = [&](const std::string& name, const std::vector<double>& ms, const std::string& cmp,
                 const std::string& key) {
    if (ms.empty()) {
      s += fmt::format("{:<{}} not run\n", name, w);
      return;
    }
    const double med = ms[ms.size() / 2];
    s += fmt::format("{:<{}} {:>10.4f} {:>10.4f} {:>10.4f}  {}\n", name, w, med, ms.front(),
                     ms.back(), cmp);
    if (!key.empty())
      result += fmt::format(" {0}_median_ms={1:.4f} {0}_min_ms={2:.4f} {0}_max_ms={3:.4f}", key,
                            med, ms.front(), ms.back());
  };
  for (const auto& l : lanes) {
    if (!l.skipped.empty()) {
      s += fmt::format("{:<{}} skipped: {}\n", l.name, w, l.skipped);
      continue;
    }
    std::string cmp = "-";
    if (la && &l != la && l.losses.size() == la->losses.size()) {
      double rel = 0;
      for (size_t i = 0; i < l.losses.size(); ++i)
        rel = std::max(rel, std::fabs(l.losses[i] - la->losses[i]) /
                                std::max(std::fabs(la->losses[i]), 1e-30));
      cmp = fmt::format("max rel diff {:.2e}", rel);
    }
    if (&l != lc) {  // synchronous: one measurement for both modes
      row(l.name, l.ms, cmp, "");
      if (!l.ms.empty()) result += fmt::format(" lane_{}_median_ms={:.4f}", l.name[1], l.median());
      continue;
    }
    if (!l.ms.empty()) result += fmt::format(" lane_c_median_ms={:.4f}", l.median());
    if (!l.ms.empty() || l.throughput_ms.empty()) {
      row(l.name + ", latency", l.ms, cmp, "lane_c_latency");
      cmp = "-";
    }
    if (!l.throughput_ms.empty()) {
      row(fmt::format("(c) throughput: {} runs of {} steps in flight, time / steps",
                      l.throughput_ms.size(), l.throughput_steps),
          l.throughput_ms, cmp, "lane_c_throughput");
      result += fmt::format(" lane_c_throughput_steps={} lane_c_throughput_repeats={}",
                            l.throughput_steps, l.throughput_ms.size());
    }
  }
  if (la || lb)
    s += fmt::format(
        "{}: synchronous (a step is done when it returns), one measurement is both latency and "
        "throughput\n",
        la && lb ? "(a), (b)"
        : la     ? "(a)"
                 : "(b)");
  if (lc)
    s += "(c) latency: each step waited for, from dispatch to its results ready; throughput: the "
         "steps of a run dispatched back to back, one wait at the end\n";
  for (const LaneTiming* l : {lb, lc})
    if (l && !l->detail.empty()) s += fmt::format("{} {}\n", l->name.substr(0, 3), l->detail);
  if (lc && !lc->throughput_detail.empty())
    s += fmt::format("(c) throughput {}\n", lc->throughput_detail);
  const bool lat = lc && !lc->ms.empty(), thr = lc && !lc->throughput_ms.empty();
  if (lb && lat) s += fmt::format("(b) / (c): {:.2f}x (latency)\n", lb->median() / lc->median());
  if (la && lat) s += fmt::format("(a) / (c): {:.2f}x (latency)\n", la->median() / lc->median());
  if (la && thr)
    s += fmt::format("(a) / (c) throughput: {:.2f}x\n", la->median() / lc->throughput_median());
  if (la && lb) s += fmt::format("(a) / (b): {:.2f}x\n", la->median() / lb->median());
  if (la) {
    s += "(loss vs (a): the largest relative difference of a lane's first 10 losses from lane "
         "(a)'s)\nlosses (a):";
    for (double v : la->losses) s += fmt::format(" {:.6f}", v);
    s += "\n";
  }
  return s + result + "\n";
}

}  // namespace tlaloc::train
