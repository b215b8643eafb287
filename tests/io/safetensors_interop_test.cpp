// Interop with an independent Python reader/writer (tests/io/safetensors_interop.py: json,
// struct and numpy only, run by Debian's /usr/bin/python3): it checks files tlaloc writes,
// and tlaloc reads the files it writes. Both sides spell out the same reference tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "io/io_test_util.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {
namespace {

using testing::ScratchDir;

int run_python(const std::string& mode, const std::string& file) {
  return testing::run_python("safetensors_interop.py", {mode, file});
}

Array bits16(DType t, Shape s, std::vector<uint16_t> v) {
  Array a(t, std::move(s));
  std::copy(v.begin(), v.end(), a.data<uint16_t>());
  return a;
}

// The reference tensors of safetensors_interop.py, written out by hand.
struct Reference {
  std::vector<std::pair<std::string, Array>> arrays;
  std::vector<std::byte> i64 = std::vector<std::byte>(8), u8;
  Reference() {
    arrays.emplace_back(
        "f32", Array::from<float>(Shape{2, 3}, {-1.25f, -0.75f, -0.25f, 0.25f, 0.75f, 1.25f}));
    arrays.emplace_back(
        "f64",
        Array::from<double>(Shape{3}, {0.1, -1e300, std::numeric_limits<double>::denorm_min()}));
    // bf16(1.0), bf16(-2.5), bf16(3.140625), bf16(float(1/3) = 0x3eaaaaab) rounds up to 0x3eab.
    arrays.emplace_back("bf16", bits16(DType::bf16, Shape{4}, {0x3f80, 0xc020, 0x4049, 0x3eab}));
    // f16(1.0), f16(1/3) = 0x3555, f16(-65504) = 0xfbff.
    arrays.emplace_back("f16", bits16(DType::f16, Shape{3}, {0x3c00, 0x3555, 0xfbff}));
    arrays.emplace_back("i32", Array::from<int32_t>(Shape{2}, {-7, 2147483647}));
    arrays.emplace_back("u32", Array::from<uint32_t>(Shape{1}, {4294967295u}));
    arrays.emplace_back("bool", Array::from<bool>(Shape{2, 2}, {true, false, false, true}));
    arrays.emplace_back("empty_f32", Array(DType::f32, Shape{0, 4}));
    arrays.emplace_back("empty_bf16", Array(DType::bf16, Shape{0}));
    arrays.emplace_back("empty_f16", Array(DType::f16, Shape{2, 0}));
    i64[7] = std::byte(0x80);  // INT64_MIN, little-endian
    u8 = {std::byte(0), std::byte(128), std::byte(255)};
  }
  std::vector<TensorRef> refs() const {
    std::vector<TensorRef> r;
    for (const auto& [n, a] : arrays) r.push_back(tensor_ref(n, a));
    r.push_back({"i64", StDType::I64, {1}, i64});
    r.push_back({"u8", StDType::U8, {3}, u8});
    return r;
  }
};

const std::map<std::string, std::string> kMetadata = {{"source", "numpy"},
                                                      {"step", "12345678901234567"}};

TEST(SafetensorsInterop, PythonReadsTlalocFiles) {
  ScratchDir dir;
  Reference ref;
  save_safetensors(dir.file("tlaloc.safetensors"), ref.refs(), kMetadata);
  EXPECT_EQ(run_python("check", dir.file("tlaloc.safetensors")), 0);
  // The checker is not vacuous: a wrong value makes it fail.
  ref.arrays[0].second.data<float>()[0] = -1.0f;
  save_safetensors(dir.file("wrong.safetensors"), ref.refs(), kMetadata);
  EXPECT_EQ(run_python("check", dir.file("wrong.safetensors")), 1);
}

TEST(SafetensorsInterop, TlalocReadsPythonFiles) {
  ScratchDir dir;
  ASSERT_EQ(run_python("write", dir.file("py.safetensors")), 0);
  SafetensorsFile f = SafetensorsFile::open(dir.file("py.safetensors"));
  Reference ref;
  EXPECT_EQ(f.metadata(), kMetadata);
  EXPECT_EQ(f.tensors().size(), ref.arrays.size() + 2);
  for (const auto& [name, want] : ref.arrays) {
    const TensorView* v = f.find(name);
    ASSERT_NE(v, nullptr) << name;
    Array got = to_array(*v);
    EXPECT_TRUE(got.bitwise_equal(want)) << name << ": " << describe(got);
  }
  const TensorView& i64 = f.at("i64");
  EXPECT_EQ(i64.dtype, StDType::I64);
  EXPECT_TRUE(std::equal(i64.data.begin(), i64.data.end(), ref.i64.begin(), ref.i64.end()));
  const TensorView& u8 = f.at("u8");
  EXPECT_TRUE(std::equal(u8.data.begin(), u8.data.end(), ref.u8.begin(), ref.u8.end()));
  // Decoded values, for the 16-bit floats.
  EXPECT_DOUBLE_EQ(to_array(f.at("bf16")).at(2), 3.140625);
  EXPECT_DOUBLE_EQ(to_array(f.at("f16")).at(2), -65504.0);
}

}  // namespace
}  // namespace tlaloc::io
