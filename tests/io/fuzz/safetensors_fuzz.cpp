// libFuzzer target for the safetensors reader (built with clang -fsanitize=fuzzer,address,
// undefined by tests/io/fuzz/CMakeLists.txt). Properties checked on every input:
//  * parse() either throws tlaloc::Error or returns views that lie inside the input;
//  * an accepted file re-serializes, and the writer's output parses back to the same tensors
//    and metadata (the writer never produces what the reader refuses).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tlaloc/io/safetensors.h"

using namespace tlaloc;
using namespace tlaloc::io;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly sized heap block so ASan sees any read past the end.
  std::byte* buf = static_cast<std::byte*>(std::malloc(size ? size : 1));
  if (size) std::memcpy(buf, data, size);
  std::span<const std::byte> in(buf, size);
  try {
    SafetensorsFile f = SafetensorsFile::parse(in, "fuzz");
    std::vector<TensorRef> refs;
    for (const TensorView& v : f.tensors()) {
      if (!v.data.empty() && (v.data.data() < buf || v.data.data() + v.data.size() > buf + size))
        std::abort();
      if (v.numel() < 0 || (v.numel() == 0) != v.data.empty()) std::abort();
      refs.push_back({v.name, v.dtype, v.shape, v.data});
      if (to_tlaloc(v.dtype)) {
        try {
          Array a = to_array(v);
          if (a.nbytes() != v.data.size()) std::abort();
        } catch (const Error&) {  // BOOL bytes other than 0/1
        }
      }
    }
    std::vector<std::byte> out = serialize(refs, f.metadata());
    SafetensorsFile g = SafetensorsFile::parse(out, "fuzz-rewritten");
    if (g.tensors().size() != f.tensors().size() || g.metadata() != f.metadata()) std::abort();
    for (size_t i = 0; i < g.tensors().size(); ++i) {
      const TensorView &a = f.tensors()[i], &b = g.tensors()[i];
      if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape ||
          a.data.size() != b.data.size() ||
          (!a.data.empty() && std::memcmp(a.data.data(), b.data.data(), a.data.size()) != 0))
        std::abort();
    }
  } catch (const Error&) {
  }
  std::free(buf);
  return 0;
}
