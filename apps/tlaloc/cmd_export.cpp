// tlaloc export RECIPE: prints the recipe's whole train step as StableHLO (stablehlo::emit), the
// program the pjrt lane compiles, so a user can read it or hand it to any PJRT client.
#include <cstdio>
#include <fstream>
#include <map>
#include <span>

#include "apps/tlaloc/commands.h"
#include "tlaloc/core/error.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/stablehlo/parse.h"

namespace tlaloc::app {
namespace {

std::map<std::string, ExportRecipe>& recipes() {
  static std::map<std::string, ExportRecipe> r;
  return r;
}

struct ExportArgs {
  std::string recipe;
  std::string output;  // "-" or not given: stdout
  bool output_given = false;
  std::string precision = "f32";             // the dots' compute type
  std::string matmul_precision = "default";  // dot_general's precision_config
  bool no_names = false;
  int replicas = 1;
  std::string flat_state = "on";  // the pjrt lane's default layout
};

// Atomically (io::AtomicFile): a unique temporary beside the target, renamed over it, so two
// exports at once never splice a file and a full disk leaves neither a cut file nor the
// temporary; only a regular file is replaced.
void write_file(const std::string& path, const std::string& text) {
  io::AtomicFile f(path);
  f.write(std::as_bytes(std::span<const char>(text)));
  f.commit();
}

void run_export(const ExportArgs& a) {
  auto it = recipes().find(a.recipe);
  if (it == recipes().end()) {
    std::string known;
    for (auto& [name, r] : recipes()) known += (known.empty() ? "" : ", ") + name;
    fail("tlaloc export: unknown recipe '{}' (known: {})", a.recipe,
         known.empty() ? "none registered in this build" : known);
  }
  stablehlo::EmitOptions o;
  o.precision = stablehlo::parse_precision(a.matmul_precision, "tlaloc export: --matmul-precision");
  if (a.precision != "f32" && a.precision != "bf16" && a.precision != "f16")
    fail(
        "tlaloc export: --precision '{}': use f32, bf16 or f16 (the dots' precision_config is "
        "--matmul-precision default|high|highest)",
        a.precision);
  if (a.flat_state != "on" && a.flat_state != "off")
    fail("tlaloc export: --flat-state '{}': use on or off", a.flat_state);
  o.names = !a.no_names;
  const bool to_stdout = !a.output_given || a.output == "-";
  if (!to_stdout) {  // before the work
    io::check_output_file(a.output, "export: --output");
    // Only an earlier export is replaced: a checkpoint, a dataset or a text would be lost.
    std::ifstream in(a.output, std::ios::binary);
    char head[8] = {};
    if (in && in.read(head, sizeof head).gcount() > 0 && std::string_view(head, 8) != "module @")
      fail(
          "export: --output {} exists and is not a StableHLO module (an earlier export); give a "
          "new name, or remove the file first",
          a.output);
  }
  std::string text = stablehlo::emit(
      it->second.step(a.replicas, dtype_from_name(a.precision), a.flat_state == "on"), o);
  stablehlo::parse(text);  // what tlaloc exports, tlaloc reads back
  if (to_stdout)
    std::fwrite(text.data(), 1, text.size(), stdout);
  else {
    write_file(a.output, text);
    fmt::print("wrote {} ({} bytes of StableHLO)\n", a.output, text.size());
  }
}

}  // namespace

void add_export_recipe(ExportRecipe recipe) {
  if (recipe.name.empty() || !recipe.step)
    fail("add_export_recipe: a recipe needs a name and a step");
  std::string name = recipe.name;
  recipes()[name] = std::move(recipe);
}

void register_export(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand(
      "export", "print a recipe's train step as StableHLO (MLIR text for any PJRT client)");
  cmd->add_option("recipe", args->recipe,
                  "recipe whose train step to export (disc, fmnist, fmnist-cnn, lm)")
      ->required();
  cmd->add_option("-o,--output", args->output,
                  "write to this file (a regular file, replaced atomically) instead of stdout (-)");
  cmd->add_option("--precision", args->precision,
                  "compute type of matmuls: f32 | bf16 | f16 (f32 accumulation; f16 with loss "
                  "scaling)")
      ->capture_default_str();
  cmd->add_option("--matmul-precision", args->matmul_precision,
                  "dot_general precision: default (XLA may use TF32), high, highest (full f32)")
      ->capture_default_str();
  cmd->add_option("--flat-state", args->flat_state,
                  "optimizer state in one tensor per parameter group and moment, updated by one "
                  "op (on, as the pjrt lane runs it) or per parameter (off)")
      ->capture_default_str();
  cmd->add_flag("--no-names", args->no_names, "omit tlaloc.name attributes");
  cmd->add_option("--replicas", args->replicas,
                  "data parallelism over N replicas: each takes batch / N rows, the program "
                  "all-reduces loss and gradients (mhlo.num_replicas = N)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  CLI::Option* output = cmd->get_option("--output");
  cmd->callback([args, output] {
    args->output_given = output->count() > 0;  // -o "" (an unset variable) is refused
    run_export(*args);
  });
}

}  // namespace tlaloc::app
