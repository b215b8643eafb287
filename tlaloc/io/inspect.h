// A human-readable listing of a safetensors file, for `tlaloc inspect FILE`.
#pragma once

#include <string>

#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

// One summary line (file, tensor count, parameter count, data bytes, header bytes), the
// metadata as "key = value" lines (sorted by key; control characters escaped; a JSON array of
// strings too long for one line as its count, then one string per indented line), then one
// aligned row per tensor: name, dtype, shape, elements, bytes (sorted by name).
std::string inspect_text(const SafetensorsFile& f);

}  // namespace tlaloc::io
