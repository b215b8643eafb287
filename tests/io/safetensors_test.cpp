// safetensors write/read: byte layout checked against a hand-assembled file, round trips of
// every dtype, zero-element tensors, views and conversion to Array.
#include "tlaloc/io/safetensors.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"

namespace tlaloc::io {
namespace {

using testing::bytes_of;
using testing::raw_file;
using testing::read_bytes;
using testing::ScratchDir;
using testing::write_bytes;

std::vector<std::byte> le_bytes(std::initializer_list<int> v) {
  std::vector<std::byte> b;
  for (int x : v) b.push_back(std::byte(x));
  return b;
}

TEST(Safetensors, WriterProducesTheHandAssembledFile) {
  // a: F32 [1.0, -2.0] = 0x3f800000, 0xc0000000; b: BF16 scalar 1.5 = 0x3fc0. Sorted by
  // name, __metadata__ first, header padded with spaces from 133 to 136 bytes.
  Array a = Array::from<float>(Shape{2}, {1.0f, -2.0f});
  Array b(DType::bf16, Shape{});
  b.data<uint16_t>()[0] = 0x3fc0;
  std::vector<TensorRef> refs{tensor_ref("b", b), tensor_ref("a", a)};
  auto got = serialize(refs, {{"k", "v"}});
  std::string header =
      "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":["
      "0,8]},\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[8,10]}}   ";
  ASSERT_EQ(header.size(), 136u);
  auto want = raw_file(136, header, le_bytes({0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0xc0, 0x3f}));
  EXPECT_EQ(got, want);
}

TEST(Safetensors, ReadsAHandAssembledFileZeroCopy) {
  ScratchDir dir;
  std::string header =
      "{\"x\":{\"dtype\":\"I16\",\"shape\":[2,1],\"data_offsets\":[0,4]},\"__metadata__\":{"
      "\"format\":\"pt\"}}";
  write_bytes(dir.file("x.safetensors"), raw_file(header, le_bytes({0x01, 0x02, 0xff, 0xff})));
  SafetensorsFile f = SafetensorsFile::open(dir.file("x.safetensors"));
  ASSERT_EQ(f.tensors().size(), 1u);
  const TensorView& v = f.at("x");
  EXPECT_EQ(v.dtype, StDType::I16);
  EXPECT_EQ(v.dtype_name(), "I16");
  EXPECT_EQ(v.shape, (std::vector<int64_t>{2, 1}));
  ASSERT_EQ(v.data.size(), 4u);
  int16_t vals[2];
  std::memcpy(vals, v.data.data(), 4);
  EXPECT_EQ(vals[0], 0x0201);
  EXPECT_EQ(vals[1], -1);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.header_size(), header.size());
  // The view points into the mapping: 8 + header bytes past the file's first byte.
  EXPECT_EQ(v.data.data(), f.at("x").data.data());
  EXPECT_EQ(f.find("y"), nullptr);
  EXPECT_THROW(f.at("y"), Error);
  EXPECT_THROW(to_array(v), Error);  // I16 has no tlaloc dtype
}

TEST(Safetensors, EveryDTypeRoundTripsAsRawBytes) {
  ScratchDir dir;
  const StDType all[] = {StDType::BOOL,    StDType::U8,      StDType::I8,      StDType::I16,
                         StDType::U16,     StDType::I32,     StDType::U32,     StDType::I64,
                         StDType::U64,     StDType::F16,     StDType::BF16,    StDType::F32,
                         StDType::F64,     StDType::C64,     StDType::F8_E4M3, StDType::F8_E5M2,
                         StDType::F8_E8M0, StDType::F6_E2M3, StDType::F6_E3M2, StDType::F4};
  std::vector<std::vector<std::byte>> store;
  std::vector<TensorRef> refs;
  for (StDType t : all) {
    // 8 elements: whole bytes for every width (F4: 4 bytes, F6: 6 bytes).
    size_t n = size_t(st_bits(t));
    std::vector<std::byte> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = std::byte(i * 37 + size_t(t));
    if (t == StDType::BOOL)
      for (size_t i = 0; i < n; ++i) b[i] = std::byte(i % 2);
    store.push_back(b);
  }
  for (size_t i = 0; i < std::size(all); ++i)
    refs.push_back({std::string("t_") + std::string(st_name(all[i])), all[i], {2, 4}, store[i]});
  save_safetensors(dir.file("all.safetensors"), refs, {{"note", "all dtypes"}});
  SafetensorsFile f = SafetensorsFile::open(dir.file("all.safetensors"));
  ASSERT_EQ(f.tensors().size(), std::size(all));
  for (size_t i = 0; i < std::size(all); ++i) {
    const TensorView& v = f.at(std::string("t_") + std::string(st_name(all[i])));
    EXPECT_EQ(v.dtype, all[i]);
    EXPECT_EQ(st_dtype_from_name(st_name(all[i])), all[i]);
    EXPECT_EQ(v.shape, (std::vector<int64_t>{2, 4}));
    EXPECT_TRUE(std::equal(v.data.begin(), v.data.end(), store[i].begin(), store[i].end()))
        << v.name;
  }
  // Sorted by name, data laid out in that order.
  for (size_t i = 1; i < f.tensors().size(); ++i) {
    EXPECT_LT(f.tensors()[i - 1].name, f.tensors()[i].name);
    EXPECT_LT(f.tensors()[i - 1].data.data(), f.tensors()[i].data.data());
  }
  EXPECT_EQ(f.header_size() % 8, 0u);
}

TEST(Safetensors, TlalocDTypesConvertToArrays) {
  ScratchDir dir;
  std::vector<std::pair<std::string, Array>> t;
  t.emplace_back("f32", Array::from<float>(Shape{2, 2}, {1.5f, -2.0f, 0.0f, 3.25f}));
  t.emplace_back("f64", Array::from<double>(Shape{3}, {0.1, -1e300, 5.0}));
  t.emplace_back("s32", Array::from<int32_t>(Shape{2}, {-7, 2147483647}));
  t.emplace_back("u32", Array::from<uint32_t>(Shape{1}, {4294967295u}));
  t.emplace_back("i1", Array::from<bool>(Shape{3}, {true, false, true}));
  Array bf(DType::bf16, Shape{2}), hf(DType::f16, Shape{2});
  bf.data<uint16_t>()[0] = 0x3f80;  // 1.0
  bf.data<uint16_t>()[1] = 0xc000;  // -2.0
  hf.data<uint16_t>()[0] = 0x3c00;  // 1.0
  hf.data<uint16_t>()[1] = 0x3555;  // 0.333251953125
  t.emplace_back("bf16", bf);
  t.emplace_back("f16", hf);
  save_safetensors(dir.file("t.safetensors"), t);
  SafetensorsFile f = SafetensorsFile::open(dir.file("t.safetensors"));
  EXPECT_EQ(f.at("s32").dtype_name(), "I32");
  EXPECT_EQ(f.at("i1").dtype_name(), "BOOL");
  for (const auto& [name, a] : t) {
    Array back = to_array(f.at(name));
    EXPECT_TRUE(back.bitwise_equal(a)) << name;
  }
  EXPECT_DOUBLE_EQ(to_array(f.at("f16")).at(1), 0.333251953125);
  EXPECT_DOUBLE_EQ(to_array(f.at("bf16")).at(1), -2.0);
}

TEST(Safetensors, ZeroElementTensorsShareOneEmptyRange) {
  // Hand-made: two empty tensors at offset 0 and one at offset 4, between real tensors.
  std::string header =
      "{\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
      "\"e2\":{\"dtype\":\"BF16\",\"shape\":[3,0,2],\"data_offsets\":[0,0]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
      "\"e3\":{\"dtype\":\"F64\",\"shape\":[0,9223372036854775807],\"data_offsets\":[4,4]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[4,5]}}";
  auto file = raw_file(header, le_bytes({1, 2, 3, 4, 5}));
  SafetensorsFile f = SafetensorsFile::parse(file, "mem");
  EXPECT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.at("e2").numel(), 0);
  EXPECT_TRUE(f.at("e3").data.empty());
  EXPECT_EQ(int(f.at("b").data[0]), 5);
  Array e1 = to_array(f.at("e1"));
  EXPECT_EQ(e1.numel(), 0);
  EXPECT_EQ(e1.shape(), Shape{0});

  // Written by tlaloc: empty tensors take no bytes; the file reads back.
  std::vector<std::pair<std::string, Array>> t;
  t.emplace_back("z0", Array(DType::f32, Shape{0, 3}));
  t.emplace_back("m", Array::from<float>(Shape{1}, {2.0f}));
  t.emplace_back("z1", Array(DType::bf16, Shape{0}));
  std::vector<TensorRef> refs;
  for (auto& [n, a] : t) refs.push_back(tensor_ref(n, a));
  auto bytes = serialize(refs, {});
  SafetensorsFile g = SafetensorsFile::parse(bytes, "mem2");
  EXPECT_EQ(g.at("z0").shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(g.at("z1").data.size(), 0u);
  EXPECT_EQ(to_array(g.at("m")).at(0), 2.0);
  EXPECT_EQ(bytes.size(), 8 + g.header_size() + 4);
}

TEST(Safetensors, EmptyFileOfTensorsIsLegal) {
  auto bytes = serialize({}, {});
  EXPECT_EQ(bytes, raw_file("{}      "));
  SafetensorsFile f = SafetensorsFile::parse(bytes, "mem");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, SaveReplacesAFileAndLeavesNoTemporary) {
  ScratchDir dir;
  std::string p = dir.file("w.safetensors");
  save_safetensors(p, {{"a", Array::from<float>(Shape{1}, {1.0f})}});
  save_safetensors(p, {{"b", Array::from<float>(Shape{1}, {2.0f})}});
  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.find("a"), nullptr);
  EXPECT_EQ(to_array(f.at("b")).at(0), 2.0);
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_EQ(read_bytes(p).size(), f.file_size());
}

TEST(Safetensors, Utf8Validation) {
  EXPECT_TRUE(is_utf8("plain ascii"));
  EXPECT_TRUE(is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(is_utf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(is_utf8("\xff"));
}

}  // namespace
}  // namespace tlaloc::io
