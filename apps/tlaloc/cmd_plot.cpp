// tlaloc plot METRICS.csv... -o FILE.png: the training curves of metrics files (the layout of
// io/metrics_csv.h, written by `tlaloc train ... --metrics`), several runs overlaid with a
// legend (plot/curves.h), written atomically.
#include <fmt/format.h>

#include <memory>

#include "apps/tlaloc/commands.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/metrics_csv.h"
#include "tlaloc/plot/curves.h"

namespace tlaloc::app {

namespace {

struct PlotArgs {
  std::vector<std::string> files;
  std::string output;
  bool log_y = false;
  std::string title;
  int width = 900, height = 600;
};

void run_plot(const PlotArgs& a) {
  io::check_output_file(a.output, "plot: -o", io::OutputMode::replace);  // before reading
  for (const auto& f : a.files)
    if (io::same_file(a.output, f))
      fail("plot: -o {} is one of the metrics files read; give the picture a file of its own",
           a.output);
  io::check_output_png(a.output, "plot: -o");
  const std::vector<std::string> labels = plot::labels_for(a.files);
  std::vector<plot::Run> runs;
  for (size_t i = 0; i < a.files.size(); ++i)
    runs.push_back({labels[i], a.files[i], io::read_metrics(a.files[i], "plot")});
  plot::CurveOptions o;
  o.width = a.width;
  o.height = a.height;
  o.log_y = a.log_y;
  o.title = a.title;
  plot::write_file(a.output, plot::render_curves(runs, o));
  fmt::print("wrote {} ({} x {} pixels, {} run{})\n", a.output, a.width, a.height, runs.size(),
             runs.size() == 1 ? "" : "s");
}

}  // namespace

void register_plot(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand(
      "plot", "draw the training curves of metrics files (train ... --metrics) as a PNG");
  cmd->add_option("METRICS", a->files, "metrics CSV files; several runs are overlaid")->required();
  cmd->add_option("-o,--output", a->output, "the PNG file to write (replaced atomically)")
      ->required();
  cmd->add_flag("--log-y", a->log_y, "the loss on a log scale");
  cmd->add_option("--title", a->title, "a title above the chart");
  cmd->add_option("--width", a->width, "picture width in pixels")
      ->capture_default_str()
      ->check(CLI::Range(320, 8192));
  cmd->add_option("--height", a->height, "picture height in pixels")
      ->capture_default_str()
      ->check(CLI::Range(240, 8192));
  cmd->callback([a] { run_plot(*a); });  // -o "" is refused by name (check_output_file)
}

}  // namespace tlaloc::app
