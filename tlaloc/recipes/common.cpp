#include "tlaloc/recipes/common.h"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include "tlaloc/distributed/communicator.h"
#include "tlaloc/io/atomic_file.h"

namespace tlaloc::recipes {

train::TrainerOptions trainer_options(const Common& c) {
  // Data parallelism (mpirun) runs on the host lane: automatic picks it, pjrt is refused.
  const int procs = distributed::world_size();
  if (procs > 1 && c.lane == train::Lane::pjrt)
    fail(
        "--lane pjrt: data parallelism over {} processes runs on the host lane (a multi-device "
        "pjrt run is not built); use --lane host",
        procs);
  train::LaneChoice lane =
      procs > 1 && c.lane == train::Lane::automatic
          ? train::LaneChoice{train::Lane::host,
                              fmt::format("lane: host (data parallelism over {} processes)", procs)}
          : train::choose_lane(c.lane);
  fmt::print(c.out, "{}\n", lane.line);
  if (c.zero == 1 && procs == 1)
    fmt::print(c.out,
               "note: --zero 1 shards the optimizer state over the processes of an mpirun; with "
               "one process it changes nothing\n");
  train::TrainerOptions t;
  t.lane = lane.lane;
  t.pjrt.emit.precision = c.matmul_precision;
  if (c.deterministic) t.pjrt.compile.overrides.push_back({"xla_gpu_deterministic_ops", true});
  t.num_threads = c.threads;
  t.zero = c.zero;
  t.flat_state = c.flat_state;
  t.precision = c.precision;
  if (c.precision != DType::f32)
    fmt::print(c.out, "precision: {} matmuls (f32 accumulation, f32 master weights{})\n",
               tlaloc::name(c.precision),
               c.precision == DType::f16 ? ", dynamic loss scaling" : "");
  return t;
}

train::FitOptions fit_options(const Common& c, std::string name, int64_t steps,
                              std::map<std::string, std::string> metadata) {
  train::FitOptions f;
  f.name = std::move(name);
  f.steps = steps;
  f.log_every = c.log_every;
  f.save = c.save;
  f.save_every = c.save_every;
  f.stop_after = c.stop_after;
  f.time_limit_seconds = c.minutes * 60;
  f.resume = c.resume;
  f.seed = c.seed;
  f.metadata = std::move(metadata);
  f.metadata["precision"] = std::string(tlaloc::name(c.precision));  // resume keeps it
  f.metrics = c.metrics;
  f.plot = c.plot;
  f.cross_check = c.cross_check;
  f.out = c.out;
  return f;
}

io::WriteLock check_options(const Common& c, const std::string& name) {
  const train::FitOptions f = fit_options(c, name, 1, {});
  train::check(f);
  return train::lock_outputs(f);
}

void check_picture_output(const Common& c, const std::string& name, const std::string& flag,
                          const std::string& path) {
  if (path.empty()) return;
  io::check_output_file(path, name + ": " + flag, io::OutputMode::replace);
  const std::pair<const char*, std::optional<std::string>> others[] = {
      {"--save", c.save},
      {"--resume", c.resume},
      {"--metrics", c.metrics.empty() ? std::nullopt : std::optional(c.metrics)},
      {"--plot", c.plot.empty() ? std::nullopt : std::optional(c.plot)}};
  for (const auto& [other, p] : others)
    if (p && io::same_file(path, *p))
      fail("{}: {} {} is the {} file too; give it a file of its own", name, flag, path, other);
  io::check_output_png(path, name + ": " + flag, c.save);  // after those, whose messages say more
}

optim::Schedule make_schedule(const Common& c, const std::string& name, int64_t steps,
                              int64_t warmup) {
  const bool warms_up = c.schedule == "constant" || c.schedule == "warmup-cosine";
  if (warms_up && warmup > 0 && warmup >= steps)
    fail(
        "{}: --warmup {} is not shorter than the run ({} steps): the lr would never leave its "
        "warm-up",
        name, warmup, steps);
  return optim::parse_schedule(c.schedule, steps, warmup);
}

void check_fits_in_memory(double n, double bytes_per_parameter, const std::string& what) {
  const double need = n * bytes_per_parameter;
  const double have = physical_memory_bytes();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (have > 0 && need > have)
    fail(
        "{}: a model of {:.4g} parameters needs about {:.1f} GiB ({} bytes each), more than this "
        "machine's {:.1f} GiB of memory",
        what, n, need / kGiB, bytes_per_parameter, have / kGiB);
}

double physical_memory_bytes() {
  const double pages = double(sysconf(_SC_PHYS_PAGES)), size = double(sysconf(_SC_PAGESIZE));
  return pages > 0 && size > 0 ? pages * size : 0;
}

void check_step_fits_in_memory(int64_t batch, int64_t context, int64_t vocab, int64_t layers,
                               int64_t d_model, int64_t d_ff, DType precision,
                               const std::string& what) {
  const double tokens = double(batch) / distributed::world_size() * double(context);
  const double per_layer = (2.0 * double(d_model) + double(d_ff)) * double(size_of(precision));
  const double need = tokens * (double(vocab) * 4.0 + double(layers) * per_layer);
  const double have = physical_memory_bytes();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (have > 0 && need > have)
    fail(
        "{}: a step of --batch {} x --context {} tokens needs at least {:.4g} GiB of activations "
        "(each token's logits, norm inputs and MLP activations), more than this machine's {:.1f} "
        "GiB of memory: lower --batch or --context",
        what, batch, context, need / kGiB, have / kGiB);
}

std::string bytes_digest(std::string_view bytes) {
  const uLong crc =
      crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  return fmt::format("crc32:{:08x}:{}", crc, bytes.size());
}

}  // namespace tlaloc::recipes
