#include "tlaloc/optim/schedule.h"

#include <charconv>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "tlaloc/core/error.h"

namespace tlaloc::optim {

namespace {
double cosine(int64_t step, int64_t horizon, double min_factor) {
  const double t = double(std::min(step, horizon)) / double(horizon);
  return min_factor + (1 - min_factor) * 0.5 * (1 + std::cos(std::numbers::pi * t));
}

template <class T>
T parse_number(std::string_view s, std::string_view spec, const char* what) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    fail("schedule '{}': {} '{}' is not a number", spec, what, s);
  return v;
}
}  // namespace

std::string_view name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::constant:
      return "constant";
    case ScheduleKind::cosine:
      return "cosine";
    case ScheduleKind::warmup_cosine:
      return "warmup-cosine";
    case ScheduleKind::step:
      return "step";
  }
  return "?";
}

std::string describe(const Schedule& s) {
  std::string d(name(s.kind));
  const std::string floor = s.min_factor > 0 ? fmt::format(" to {} of the lr", s.min_factor) : "";
  switch (s.kind) {
    case ScheduleKind::constant:
      if (s.warmup_steps > 0) d += fmt::format(", {} warm-up steps", s.warmup_steps);
      break;
    case ScheduleKind::cosine:
      d += fmt::format(" over {} steps{}", s.total_steps, floor);
      break;
    case ScheduleKind::warmup_cosine:
      d += fmt::format(" over {} steps{}, {} warm-up", s.total_steps, floor, s.warmup_steps);
      break;
    case ScheduleKind::step:
      d += fmt::format(": x{} every {} steps", s.gamma, s.step_size);
      break;
  }
  return d;
}

void Schedule::check() const {
  if (total_steps < 1) fail("schedule {}: total_steps {} must be >= 1", name(kind), total_steps);
  if (warmup_steps < 0) fail("schedule {}: warmup {} must be >= 0", name(kind), warmup_steps);
  if (kind == ScheduleKind::warmup_cosine && warmup_steps >= total_steps)
    fail("schedule warmup-cosine: warmup {} must be < total steps {}", warmup_steps, total_steps);
  if (step_size < 1) fail("schedule step: step_size {} must be >= 1", step_size);
  if (!(min_factor >= 0 && min_factor <= 1))
    fail("schedule {}: min_factor {} must be in [0, 1]", name(kind), min_factor);
  if (!(gamma > 0)) fail("schedule step: gamma {} must be > 0", gamma);
}

double Schedule::factor(int64_t step) const {
  check();
  if (step < 0) fail("schedule {}: negative step {}", name(kind), step);
  const bool warming = warmup_steps > 0 && step < warmup_steps &&
                       (kind == ScheduleKind::constant || kind == ScheduleKind::warmup_cosine);
  if (warming) return double(step + 1) / double(warmup_steps);
  switch (kind) {
    case ScheduleKind::constant:
      return 1;
    case ScheduleKind::cosine:
      return cosine(step, total_steps, min_factor);
    case ScheduleKind::warmup_cosine:
      return cosine(step - warmup_steps, total_steps - warmup_steps, min_factor);
    case ScheduleKind::step:
      return std::pow(gamma, double(step / step_size));
  }
  return 1;
}

Schedule parse_schedule(std::string_view spec, int64_t total_steps, int64_t warmup) {
  Schedule s;
  s.total_steps = total_steps;
  s.warmup_steps = warmup;
  std::string_view head = spec.substr(0, spec.find(':'));
  if (head == "constant") {
    s.kind = ScheduleKind::constant;
  } else if (head == "cosine") {
    s.kind = ScheduleKind::cosine;
  } else if (head == "warmup-cosine") {
    s.kind = ScheduleKind::warmup_cosine;
    if (warmup <= 0) fail("schedule warmup-cosine needs --warmup STEPS > 0 (got {})", warmup);
  } else if (head == "step") {
    s.kind = ScheduleKind::step;
    s.step_size = std::max<int64_t>(1, total_steps / 3);
    if (head.size() < spec.size()) {
      std::string_view rest = spec.substr(head.size() + 1);
      size_t colon = rest.find(':');
      s.step_size = parse_number<int64_t>(rest.substr(0, colon), spec, "step size");
      if (colon != std::string_view::npos)
        s.gamma = parse_number<double>(rest.substr(colon + 1), spec, "gamma");
    }
  } else {
    fail("unknown schedule '{}' (expected constant, cosine, warmup-cosine or step)", spec);
  }
  if (head != "step" && head.size() < spec.size())
    fail("schedule '{}': only step takes ':' arguments", spec);
  if (warmup != 0 && (s.kind == ScheduleKind::cosine || s.kind == ScheduleKind::step))
    fail("schedule {} takes no warm-up (got --warmup {}); use warmup-cosine or constant",
         name(s.kind), warmup);
  s.check();
  return s;
}

trace::Tensor Schedule::factor_in_program(const trace::Tensor& step) const {
  using trace::Tensor;
  check();
  if (step.dtype() != DType::s32 || step.rank() != 0)
    fail("schedule {}: the step must be an s32 scalar, got {}", name(kind),
         ir::to_string(step.type()));
  auto f64 = [](double v) { return trace::scalar(v, DType::f64); };
  auto s32 = [](int64_t v) { return trace::scalar(double(v), DType::s32); };
  auto to_f64 = [](const Tensor& t) { return trace::astype(t, DType::f64); };
  auto cos_factor = [&](const Tensor& s, int64_t horizon) {  // cosine() above
    Tensor t = to_f64(trace::minimum(s, s32(horizon))) / f64(double(horizon));
    return f64(min_factor) +
           f64((1 - min_factor) * 0.5) * (f64(1) + trace::cos(f64(std::numbers::pi) * t));
  };
  Tensor f = f64(1);
  switch (kind) {
    case ScheduleKind::constant:
      break;
    case ScheduleKind::cosine:
      f = cos_factor(step, total_steps);
      break;
    case ScheduleKind::warmup_cosine:
      f = cos_factor(step - s32(warmup_steps), total_steps - warmup_steps);
      break;
    case ScheduleKind::step:
      f = trace::pow(f64(gamma), to_f64(step / s32(step_size)));
      break;
  }
  const bool warms =
      warmup_steps > 0 && (kind == ScheduleKind::constant || kind == ScheduleKind::warmup_cosine);
  if (warms)
    f = trace::where(step < s32(warmup_steps), to_f64(step + s32(1)) / f64(double(warmup_steps)),
                     f);
  return f;
}

}  // namespace tlaloc::optim
