// The `tlaloc inspect` listing, checked against text written out by hand.
#include "tlaloc/io/inspect.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"

namespace tlaloc::io {
namespace {

TEST(Inspect, ListsTensorsAndMetadata) {
  testing::ScratchDir dir;
  std::string p = dir.file("m.safetensors");
  std::vector<std::byte> b8(8);
  save_safetensors(
      p,
      {tensor_ref("0.weight", Array(DType::f32, Shape{16, 2})),
       tensor_ref("0.bias", Array(DType::bf16, Shape{16})), TensorRef{"ids", StDType::I64, {1}, b8},
       tensor_ref("empty", Array(DType::f16, Shape{0, 3}))},
      {{"step", "600"}, {"note", "two\nlines"}});
  SafetensorsFile f = SafetensorsFile::open(p);
  std::string want = p + ": 4 tensors, 49 elements, 168 data bytes, " +
                     std::to_string(f.header_size()) +
                     " header bytes\n"
                     "metadata:\n"
                     "  note = two\\nlines\n"
                     "  step = 600\n"
                     "tensors:\n"
                     "  name      dtype  shape    elements  bytes\n"
                     "  0.bias    BF16   [16]           16     32\n"
                     "  0.weight  F32    [16, 2]        32    128\n"
                     "  empty     F16    [0, 3]          0      0\n"
                     "  ids       I64    [1]             1      8\n";
  EXPECT_EQ(inspect_text(f), want);
}

// A long JSON list of names (a checkpoint's optimizer_state) is listed one name per line; a
// short one, or one that is not all strings, stays a plain value.
TEST(Inspect, LongNameListsOnePerLine) {
  testing::ScratchDir dir;
  std::string p = dir.file("m.safetensors");
  std::string names = "[";
  for (int i = 0; i < 6; ++i)
    names += fmt::format("{}\"optimizer.layer{}.weight.exp_avg\"", i ? "," : "", i);
  names += "]";
  const std::string mixed = "[\"a\", 1, \"" + std::string(100, 'b') + "\"]";
  save_safetensors(p, {tensor_ref("w", Array(DType::f32, Shape{2}))},
                   {{"optimizer_state", names}, {"short", "[\"x\",\"y\"]"}, {"mixed", mixed}});
  SafetensorsFile f = SafetensorsFile::open(p);
  std::string want = p + ": 1 tensors, 2 elements, 8 data bytes, " +
                     std::to_string(f.header_size()) +
                     " header bytes\n"
                     "metadata:\n"
                     "  mixed = " +
                     mixed +
                     "\n"
                     "  optimizer_state = 6 strings:\n"
                     "    optimizer.layer0.weight.exp_avg\n"
                     "    optimizer.layer1.weight.exp_avg\n"
                     "    optimizer.layer2.weight.exp_avg\n"
                     "    optimizer.layer3.weight.exp_avg\n"
                     "    optimizer.layer4.weight.exp_avg\n"
                     "    optimizer.layer5.weight.exp_avg\n"
                     "  short = [\"x\",\"y\"]\n"
                     "tensors:\n"
                     "  name  dtype  shape  elements  bytes\n"
                     "  w     F32    [2]           2      8\n";
  EXPECT_EQ(inspect_text(f), want);
}

}  // namespace
}  // namespace tlaloc::io
