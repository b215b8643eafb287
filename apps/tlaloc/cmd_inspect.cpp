// tlaloc inspect FILE: lists a safetensors file's tensors (name, dtype, shape, elements, bytes)
// and metadata. A bad file raises tlaloc::Error, which main prints as one line (exit 1).
#include <cstdio>
#include <memory>

#include "apps/tlaloc/commands.h"
#include "tlaloc/io/inspect.h"

namespace tlaloc::app {

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect", "List the tensors (name, dtype, shape, bytes) and metadata of a safetensors file");
  auto file = std::make_shared<std::string>();
  cmd->add_option("FILE", *file, "a .safetensors file (e.g. a tlaloc checkpoint)")->required();
  cmd->callback([file] {
    std::string text;
    try {
      text = io::inspect_text(io::SafetensorsFile::open(*file));
    } catch (const Error& e) {
      // One line even when a hostile file puts control characters into a tensor name.
      std::string msg = e.what();
      for (char& c : msg)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
      throw Error(msg);
    }
    std::fputs(text.c_str(), stdout);
  });
}

}  // namespace tlaloc::app
