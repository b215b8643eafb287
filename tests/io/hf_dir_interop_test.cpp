// The round trip HF directory -> tlaloc -> HF directory against an independent writer and reader
// (tests/io/hf_dir_interop.py: torch 1.13 and json, the safetensors format written from its
// spec, HF's sharding rule; the stand-in for transformers' save_pretrained / from_pretrained).
// Python writes single-file and sharded directories of F32 BF16 F16 F64 I64 U8 tensors (NaN
// payloads, -0, inf, subnormals, an empty tensor, a scalar); tlaloc reads and writes them back;
// every tensor must be bitwise identical, config.json must keep every key with its value and
// type, and the directory must be laid out as save_pretrained lays it out. Checked by both
// sides: Python's `compare` and tlaloc's own reader.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/io_test_util.h"
#include "tlaloc/io/hf_dir.h"

namespace tlaloc::io {
namespace {

using testing::ScratchDir;

int python(const std::string& mode, const std::string& a, const std::string& b) {
  return testing::run_python("hf_dir_interop.py", {mode, a, b});
}

// tlaloc's side of the comparison: the same tensors (names, dtypes, shapes, bytes) and json.
void expect_same(const std::string& a, const std::string& b) {
  const HfModelDir da = HfModelDir::open(a), db = HfModelDir::open(b);
  ASSERT_EQ(da.tensors().size(), db.tensors().size());
  for (const TensorView& v : da.tensors()) {
    const TensorView* w = db.find(v.name);
    ASSERT_NE(w, nullptr) << v.name;
    EXPECT_EQ(v.dtype, w->dtype) << v.name;
    EXPECT_EQ(v.shape, w->shape) << v.name;
    EXPECT_TRUE(std::equal(v.data.begin(), v.data.end(), w->data.begin(), w->data.end())) << v.name;
  }
  EXPECT_EQ(da.config().dump(), db.config().dump());  // sorted keys: canonical text
  ASSERT_TRUE(db.generation_config().has_value());
  EXPECT_EQ(da.generation_config()->dump(), db.generation_config()->dump());
  ASSERT_TRUE(db.tokenizer_model().has_value());
  EXPECT_EQ(testing::read_bytes(*da.tokenizer_model()), testing::read_bytes(*db.tokenizer_model()));
}

// Reads `from` and writes it as `to` with tensors as stored (nothing converted).
void round_trip(const std::string& from, const std::string& to, uint64_t max_shard_bytes) {
  const HfModelDir d = HfModelDir::open(from);
  HfSaveOptions o;
  o.max_shard_bytes = max_shard_bytes;
  o.files = d.other_files();  // tokenizer files, generation_config.json: copied as they are
  save_hf_dir(to, d.config(), d.tensor_refs(), o);
}

// The dtypes the Python directory holds, as tlaloc reads them.
void expect_dtypes(const std::string& dir) {
  const HfModelDir d = HfModelDir::open(dir);
  EXPECT_EQ(d.at("model.embed_tokens.weight").dtype, StDType::BF16);
  EXPECT_EQ(d.at("model.layers.0.self_attn.q_proj.weight").dtype, StDType::F32);
  EXPECT_EQ(d.at("model.layers.1.mlp.up_proj.weight").dtype, StDType::F16);
  EXPECT_EQ(d.at("model.norm.weight").dtype, StDType::F64);
  EXPECT_EQ(d.at("model.position_ids").dtype, StDType::I64);
  EXPECT_EQ(d.at("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(d.at("empty").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(d.tensors().size(), 28u);
  EXPECT_EQ(d.config().at("rope_theta").get<double>(), 500000.0);
}

TEST(HfDirInterop, SingleFileRoundTripIsBitwise) {
  ScratchDir tmp;
  const std::string py = tmp.file("py"), out = tmp.file("out");
  ASSERT_EQ(python("write", py, "single"), 0);
  expect_dtypes(py);
  EXPECT_FALSE(HfModelDir::open(py).sharded());
  round_trip(py, out, kHfMaxShardBytes);
  EXPECT_EQ(python("compare", py, out), 0);
  expect_same(py, out);
  EXPECT_EQ(HfModelDir::open(out).weight_files(), std::vector<std::string>{"model.safetensors"});
}

TEST(HfDirInterop, ShardedRoundTripIsBitwise) {
  ScratchDir tmp;
  const std::string py = tmp.file("py"), out = tmp.file("out");
  ASSERT_EQ(python("write", py, "sharded"), 0);
  expect_dtypes(py);
  const HfModelDir d = HfModelDir::open(py);
  EXPECT_TRUE(d.sharded());
  EXPECT_EQ(d.weight_files().size(), 5u);
  round_trip(py, out, 3000);
  EXPECT_EQ(python("compare", py, out), 0);
  expect_same(py, out);
  const HfModelDir o = HfModelDir::open(out);
  EXPECT_TRUE(o.sharded());
  EXPECT_GE(o.weight_files().size(), 5u);
}

// Single -> sharded -> single, and a directory rewritten in place from its own mmapped weights.
TEST(HfDirInterop, ReshardedAndInPlaceRoundTripsAreBitwise) {
  ScratchDir tmp;
  const std::string py = tmp.file("py"), a = tmp.file("a"), b = tmp.file("b");
  ASSERT_EQ(python("write", py, "single"), 0);
  round_trip(py, a, 1000);
  EXPECT_GT(HfModelDir::open(a).weight_files().size(), 10u);
  EXPECT_EQ(python("compare", py, a), 0);
  round_trip(a, b, kHfMaxShardBytes);
  EXPECT_FALSE(HfModelDir::open(b).sharded());
  EXPECT_EQ(python("compare", py, b), 0);
  round_trip(a, a, 5000);  // in place: reads the views of the folder it replaces
  EXPECT_EQ(python("compare", py, a), 0);
  round_trip(a, a, kHfMaxShardBytes);  // sharded -> single in place: the shards are gone
  EXPECT_EQ(python("compare", py, a), 0);
  EXPECT_EQ(testing::listing(a),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                      "tokenizer.model", "tokenizer_config.json"}));
  expect_same(py, a);
}

// A directory tlaloc writes from its own arrays is read by the Python reader with the same bytes:
// Python copies it with its own writer, and tlaloc finds its arrays in the copy.
TEST(HfDirInterop, PythonReadsTlalocDirectories) {
  ScratchDir tmp;
  NamedArrays arrays;
  arrays.emplace_back("a.f32", Array::from<float>(Shape{2, 3}, {1, -2, 3.5f, 0, -0.0f, 1e-40f}));
  arrays.emplace_back("b.f64", Array::from<double>(Shape{2}, {0.1, -1e300}));
  arrays.emplace_back("c.bf16", Array::from_doubles(DType::bf16, Shape{3}, {1.0, -2.5, 3.140625}));
  arrays.emplace_back("d.f16",
                      Array::from_doubles(DType::f16, Shape{2, 2}, {1, 1.0 / 3, -65504, 0}));
  arrays.emplace_back("e.big", Array::filled(DType::f32, Shape{300}, 0.25));
  nlohmann::json config = {{"model_type", "llama"}, {"hidden_size", 16}, {"rms_norm_eps", 1e-6}};
  for (uint64_t max : {kHfMaxShardBytes, uint64_t(64)}) {
    const std::string dir = tmp.file("t" + std::to_string(max)), copy = dir + ".copy";
    HfSaveOptions o;
    o.max_shard_bytes = max;
    save_hf_dir(dir, config, arrays, o);
    ASSERT_EQ(python("copy", dir, copy), 0);
    const HfModelDir d = HfModelDir::open(copy);
    ASSERT_EQ(d.tensors().size(), arrays.size());
    for (const auto& [name, want] : arrays)
      EXPECT_TRUE(to_array(d.at(name, from_tlaloc(want.dtype()))).bitwise_equal(want)) << name;
    EXPECT_EQ(d.config(), config);
  }
  // The comparison is not vacuous: one changed byte fails it.
  const std::string dir = tmp.file("t64"), changed = tmp.file("changed");
  arrays[2].second.data<uint16_t>()[1] ^= 1;
  HfSaveOptions o;
  o.max_shard_bytes = 64;
  save_hf_dir(changed, config, arrays, o);
  EXPECT_EQ(python("compare", dir, dir), 0);
  EXPECT_EQ(python("compare", dir, changed), 1);
}

}  // namespace
}  // namespace tlaloc::io
