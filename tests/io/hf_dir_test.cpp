// Model directories as tlaloc writes them (HF's layout: config.json text, shard split, index,
// safetensors metadata) and the reader's refusals: one line naming the file, shard or tensor.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/io_test_util.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/json_util.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::ScratchDir;

// 64 + 16 + 80 + 120 + 16 = 296 bytes, in this order.
NamedArrays model() {
  NamedArrays t;
  t.emplace_back("w1", Array::filled(DType::f32, Shape{4, 4}, 1.5));
  t.emplace_back("w2", Array::filled(DType::bf16, Shape{8}, -2));
  t.emplace_back("w3", Array::filled(DType::f16, Shape{40}, 3));
  t.emplace_back("w4", Array::filled(DType::f32, Shape{30}, 4));
  t.emplace_back("w5", Array::filled(DType::f64, Shape{2}, 5));
  return t;
}

const nlohmann::json kConfig = {{"model_type", "llama"}, {"hidden_size", 16}};

std::string save_model(const ScratchDir& tmp, uint64_t max_shard_bytes) {
  HfSaveOptions o;
  o.max_shard_bytes = max_shard_bytes;
  save_hf_dir(tmp.file("m"), kConfig, model(), o);
  return tmp.file("m");
}

std::string shard(const std::string& dir, int i) { return dir + "/" + hf_shard_name(i, 3); }

TEST(HfDir, ConfigTextIsPythonsJsonDumpsSorted) {
  const auto config = nlohmann::json::parse(
      R"({"b": 1, "a": {"y": [1, 2], "x": "\u00e9\u2602"}, "c": 1e-05, "d": 500000.0, "e": [],
          "f": {}, "g": null, "h": true, "i": -0.0, "j": 1e16, "k": 123456789012345678})");
  // json.dumps(config, indent=2, sort_keys=True) + "\n", as Python 3.11 prints it.
  EXPECT_EQ(hf_json_text(config), R"({
  "a": {
    "x": "\u00e9\u2602",
    "y": [
      1,
      2
    ]
  },
  "b": 1,
  "c": 1e-05,
  "d": 500000.0,
  "e": [],
  "f": {},
  "g": null,
  "h": true,
  "i": -0.0,
  "j": 1e+16,
  "k": 123456789012345678
}
)");
}

TEST(HfDir, OneShardIsModelSafetensorsWithFormatPt) {
  ScratchDir tmp;
  const std::string dir = save_model(tmp, kHfMaxShardBytes);
  EXPECT_EQ(testing::listing(dir), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(testing::read_text(dir + "/config.json"), hf_json_text(kConfig));
  const SafetensorsFile f = SafetensorsFile::open(dir + "/model.safetensors");
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(f.tensors().size(), 5u);
  const HfModelDir d = HfModelDir::open(dir + "/");
  EXPECT_EQ(d.path(), dir);
  EXPECT_FALSE(d.sharded());
  EXPECT_EQ(d.config(), kConfig);
  EXPECT_FALSE(d.generation_config().has_value());
  EXPECT_FALSE(d.tokenizer_model().has_value());
  for (const auto& [name, a] : model()) EXPECT_TRUE(to_array(d.at(name)).bitwise_equal(a)) << name;
}

// HF's split: w1 w2 fit in 100 bytes, w3 would pass it and opens a shard, w4 (120 bytes) is
// larger than the limit and gets a shard of its own at once, w5 joins w3.
TEST(HfDir, ShardsFollowHfsSplitAndIndex) {
  ScratchDir tmp;
  const std::string dir = save_model(tmp, 100);
  EXPECT_EQ(testing::listing(dir),
            (std::vector<std::string>{"config.json", hf_shard_name(1, 3), hf_shard_name(2, 3),
                                      hf_shard_name(3, 3), "model.safetensors.index.json"}));
  EXPECT_EQ(hf_shard_name(2, 3), "model-00002-of-00003.safetensors");
  EXPECT_EQ(testing::read_text(dir + "/model.safetensors.index.json"), R"({
  "metadata": {
    "total_size": 296
  },
  "weight_map": {
    "w1": "model-00001-of-00003.safetensors",
    "w2": "model-00001-of-00003.safetensors",
    "w3": "model-00003-of-00003.safetensors",
    "w4": "model-00002-of-00003.safetensors",
    "w5": "model-00003-of-00003.safetensors"
  }
}
)");
  for (int i = 1; i <= 3; ++i)
    EXPECT_EQ(SafetensorsFile::open(shard(dir, i)).metadata().at("format"), "pt");
  const HfModelDir d = HfModelDir::open(dir);
  EXPECT_TRUE(d.sharded());
  EXPECT_EQ(d.weight_files(), (std::vector<std::string>{hf_shard_name(1, 3), hf_shard_name(2, 3),
                                                        hf_shard_name(3, 3)}));
  EXPECT_EQ(d.file_of("w5"), shard(dir, 3));
  ASSERT_EQ(d.tensors().size(), 5u);
  EXPECT_EQ(d.tensors()[3].name, "w4");  // sorted by name across shards
  for (const auto& [name, a] : model()) EXPECT_TRUE(to_array(d.at(name)).bitwise_equal(a)) << name;
  EXPECT_EQ(d.at("w2", StDType::BF16).dtype, StDType::BF16);
  EXPECT_EQ(error_of([&] { d.at("w2", StDType::F32); }),
            dir + ": tensor 'w2' (model-00001-of-00003.safetensors) is BF16, expected F32");
  EXPECT_EQ(error_of([&] { d.at("w9"); }),
            dir + ": no tensor named 'w9' (the model directory holds 5 tensors)");
  EXPECT_EQ(d.find("w9"), nullptr);
}

// Reads `dir` expecting a refusal that starts with `start` and holds `part`; the folder is left
// as it was.
void expect_refused(const std::string& dir, const std::string& start, const std::string& part) {
  const auto before = testing::listing(dir);
  const std::string e = error_of([&] { HfModelDir::open(dir); });
  EXPECT_EQ(e.rfind(start, 0), 0u) << e << "\n  should start with: " << start;
  EXPECT_NE(e.find(part), std::string::npos) << e << "\n  lacks: " << part;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(testing::listing(dir), before);
}

TEST(HfDirRefused, MissingShard) {
  ScratchDir tmp;
  const std::string dir = save_model(tmp, 100);
  fs::remove(shard(dir, 2));
  expect_refused(dir, dir + "/model.safetensors.index.json: shard 'model-00002-of-00003",
                 "is missing (1 tensors, e.g. 'w4')");
}

// A shard rewritten with other contents than the index says.
TEST(HfDirRefused, ShardsDisagreeingWithTheIndex) {
  ScratchDir tmp;
  const std::string index = tmp.file("m") + "/model.safetensors.index.json";
  const NamedArrays m = model();
  NamedArrays extra = {m[3]};
  extra[0].first = "extra";
  struct Case {
    int shard;
    NamedArrays contents;
    std::string start, part;
  } cases[] = {
      {3,
       {m[2], m[4], m[0]},
       index + ": tensor 'w1' is in shard",  // w1 in shards 1 and 3
       "'model-00003-of-00003.safetensors' and in shard 'model-00001-of-00003.safetensors'"},
      {2, {}, index + ": maps tensor 'w4' to shard", "which lacks it"},
      {2,
       {m[3], extra[0]},
       index + ": shard",
       "holds tensor 'extra', which the index does not list"},
  };
  for (const Case& c : cases) {
    const std::string dir = save_model(tmp, 100);
    save_safetensors(shard(dir, c.shard), c.contents, {{"format", "pt"}});
    expect_refused(dir, c.start, c.part);
  }
}

TEST(HfDirRefused, CorruptOrTruncatedWeightFile) {
  ScratchDir tmp;
  std::string dir = save_model(tmp, 100);
  testing::write_bytes(shard(dir, 1), testing::bytes_of("not a safetensors file at all"));
  expect_refused(dir, shard(dir, 1) + ": header length", "not a safetensors file");
  dir = save_model(tmp, kHfMaxShardBytes);
  const std::string f = dir + "/model.safetensors";
  fs::resize_file(f, fs::file_size(f) - 1);
  expect_refused(dir, f + ": tensor 'w5': data_offsets", "run past the data section");
}

TEST(HfDirRefused, BadIndex) {
  ScratchDir tmp;
  const std::string dir = save_model(tmp, 100), index = dir + "/model.safetensors.index.json";
  testing::write_bytes(index, testing::bytes_of(R"({"metadata": {}})"));
  expect_refused(dir, index, "has no \"weight_map\" object");
  testing::write_bytes(index, testing::bytes_of(R"({"weight_map": {"w1": "../m/x"}})"));
  expect_refused(dir, index + ": tensor 'w1' is mapped to \"../m/x\"", "not a file name");
  testing::write_bytes(index, testing::bytes_of(R"({"weight_map": {"w1": "a", "w1": "b"}})"));
  expect_refused(dir, index + ": index has the key 'w1' twice", "");
  testing::write_bytes(index, testing::bytes_of("{\"weight_map\": "));
  expect_refused(dir, index + ": index is not valid JSON", "");
}

TEST(HfDirRefused, BadConfig) {
  ScratchDir tmp;
  const std::string dir = save_model(tmp, kHfMaxShardBytes), config = dir + "/config.json";
  testing::write_bytes(config, testing::bytes_of("[1, 2]"));
  expect_refused(dir, config + ": holds an array, not a JSON object", "");
  testing::write_bytes(config, testing::bytes_of("{\"a\": NaN}"));
  expect_refused(dir, config + ": config is not valid JSON", "");
  testing::write_bytes(dir + "/generation_config.json", testing::bytes_of("3"));
  testing::write_bytes(config, testing::bytes_of("{}"));
  expect_refused(dir, dir + "/generation_config.json: holds an integer, not a JSON object", "");
  fs::remove(dir + "/generation_config.json");
  fs::remove(config);
  expect_refused(dir, config + ": missing", "");
}

TEST(HfDirRefused, WeightsMissingOrTwice) {
  ScratchDir tmp;
  const std::string dir = save_model(tmp, 100);
  testing::write_bytes(dir + "/model.safetensors", {});
  expect_refused(dir, dir + ": holds both model.safetensors and model.safetensors.index.json",
                 "stale");
  fs::remove(dir + "/model.safetensors");
  fs::remove(dir + "/model.safetensors.index.json");
  expect_refused(dir, dir + ": no model.safetensors or model.safetensors.index.json", "");
  testing::write_bytes(dir + "/pytorch_model.bin", {});
  expect_refused(dir, dir + ": no model.safetensors", "pytorch_model.bin weights are not read");
  expect_refused(tmp.file("absent"), tmp.file("absent") + ": cannot open the model directory",
                 "No such file");
  expect_refused(dir + "/config.json", dir + "/config.json: not a folder", "");
}

}  // namespace
}  // namespace tlaloc::io
