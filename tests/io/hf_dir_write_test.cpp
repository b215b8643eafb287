// Writing model directories: a save replaces the whole folder (stale shards gone, tokenizer and
// generation files kept), refuses bad input and occupied or locked targets with one line and
// nothing written, and keeps the training state beside the folder, tied to its weights.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "io/io_test_util.h"
#include "tlaloc/io/hf_dir.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::ScratchDir;

NamedArrays weights(float v) {
  NamedArrays t;
  t.emplace_back("model.embed.weight", Array::filled(DType::bf16, Shape{8, 4}, v));
  t.emplace_back("model.norm.weight", Array::filled(DType::f32, Shape{4}, v + 1));
  t.emplace_back("lm_head.weight", Array::filled(DType::f16, Shape{8, 4}, v + 2));
  return t;
}

const nlohmann::json kConfig = {{"model_type", "llama"}, {"vocab_size", 8}};

HfSaveOptions shards_of(uint64_t max) {
  HfSaveOptions o;
  o.max_shard_bytes = max;
  return o;
}

TEST(HfDirWrite, ASaveReplacesTheFolderAndKeepsTokenizerFiles) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  testing::write_bytes(tmp.file("spm.model"), testing::bytes_of("sentencepiece bytes"));
  HfSaveOptions o = shards_of(64);
  o.files["tokenizer.model"] = tmp.file("spm.model");
  o.generation_config = nlohmann::json{{"temperature", 0.7}};
  save_hf_dir(dir, kConfig, weights(1), o);
  EXPECT_EQ(testing::listing(dir),
            (std::vector<std::string>{"config.json", "generation_config.json", hf_shard_name(1, 3),
                                      hf_shard_name(2, 3), hf_shard_name(3, 3),
                                      "model.safetensors.index.json", "tokenizer.model"}));
  EXPECT_EQ(testing::read_text(dir + "/tokenizer.model"), "sentencepiece bytes");
  EXPECT_EQ(HfModelDir::open(dir).generation_config(), o.generation_config);
  EXPECT_EQ(*HfModelDir::open(dir).tokenizer_model(), dir + "/tokenizer.model");
  // Saved again as one file without those options: the shards and index go, the rest stays.
  save_hf_dir(dir, kConfig, weights(2));
  EXPECT_EQ(testing::listing(dir),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                      "tokenizer.model"}));
  EXPECT_EQ(testing::read_text(dir + "/tokenizer.model"), "sentencepiece bytes");
  EXPECT_EQ(HfModelDir::open(dir).generation_config(), o.generation_config);
  EXPECT_TRUE(to_array(HfModelDir::open(dir).at("model.norm.weight"))
                  .bitwise_equal(Array::filled(DType::f32, Shape{4}, 3)));
  // Beside the folder: only its lock file (no staging folder left).
  EXPECT_EQ(testing::listing(tmp.path()),
            (std::vector<std::string>{".m.lock", "m", "m/config.json", "m/generation_config.json",
                                      "m/model.safetensors", "m/tokenizer.model", "spm.model"}));
}

TEST(HfDirWrite, AnEmptyFolderOrASymbolicLinkToOneIsWritten) {
  ScratchDir tmp;
  fs::create_directory(tmp.file("empty"));
  save_hf_dir(tmp.file("empty"), kConfig, weights(1));
  EXPECT_EQ(HfModelDir::open(tmp.file("empty")).tensors().size(), 3u);
  // A link is replaced by the new folder (as a linked checkpoint file is); its target stays.
  fs::create_directory(tmp.file("target"));
  fs::create_directory_symlink(tmp.file("target"), tmp.file("link"));
  save_hf_dir(tmp.file("link"), kConfig, weights(1));
  EXPECT_FALSE(fs::is_symlink(tmp.file("link")));
  EXPECT_TRUE(fs::is_empty(tmp.file("target")));
}

// Refused with one line starting with `start` and holding `part`; nothing in `tmp` changes.
void expect_refused(const ScratchDir& tmp, const std::function<void()>& save,
                    const std::string& start, const std::string& part = "") {
  const auto before = testing::listing(tmp.path());
  const std::string e = error_of(save);
  EXPECT_EQ(e.rfind(start, 0), 0u) << e << "\n  should start with: " << start;
  EXPECT_NE(e.find(part), std::string::npos) << e << "\n  lacks: " << part;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(testing::listing(tmp.path()), before);
}

TEST(HfDirWriteRefused, BadInput) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  HfSaveOptions o;
  o.what = "train llama: --save";
  auto save = [&](const nlohmann::json& config, const NamedArrays& w) {
    return [&, config, w] { save_hf_dir(dir, config, w, o); };
  };
  expect_refused(tmp, save(nlohmann::json::array({1}), weights(1)),
                 "train llama: --save " + dir + ": the config.json to write is an array");
  NamedArrays twice = weights(1);
  twice.push_back(twice[0]);
  expect_refused(tmp, save(kConfig, twice),
                 "train llama: --save " + dir + ": two tensors are named 'model.embed.weight'");
  NamedArrays reserved = weights(1);
  reserved[0].first = "__metadata__";
  expect_refused(tmp, save(kConfig, reserved), "train llama: --save " + dir + ": safetensors",
                 "'__metadata__'");
  o.max_shard_bytes = 0;
  expect_refused(tmp, save(kConfig, weights(1)),
                 "train llama: --save " + dir + ": max_shard_bytes");
  o.max_shard_bytes = kHfMaxShardBytes;
  o.files["README.md"] = tmp.file("x");
  expect_refused(tmp, save(kConfig, weights(1)), "train llama: --save " + dir + ": 'README.md'");
  o.files = {{"tokenizer.model", tmp.file("absent.model")}};
  expect_refused(tmp, save(kConfig, weights(1)),
                 "train llama: --save " + dir + ": " + tmp.file("absent.model"),
                 "not a readable file");
  o.files = {{"generation_config.json", tmp.file("absent.model")}};
  o.generation_config = nlohmann::json::object();
  expect_refused(tmp, save(kConfig, weights(1)),
                 "train llama: --save " + dir + ": generation_config.json given both");
  for (const std::string bad : {"", ".", "/", "a/.."})
    expect_refused(
        tmp, [&] { save_hf_dir(bad, kConfig, weights(1)); },
        bad.empty() ? "save is empty" : "save " + bad,
        bad.empty() ? "" : "give the folder a name of its own");
}

TEST(HfDirWriteRefused, OccupiedTarget) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  auto save = [&] { save_hf_dir(dir, kConfig, weights(1)); };
  testing::write_bytes(dir, testing::bytes_of("a file"));
  expect_refused(tmp, save, "save " + dir + " exists and is not a folder");
  fs::remove(dir);
  fs::create_directory(dir);
  testing::write_bytes(dir + "/config.json", testing::bytes_of("{}"));
  testing::write_bytes(dir + "/notes.txt", testing::bytes_of("mine"));
  expect_refused(tmp, save, "save " + dir + " holds 'notes.txt', which is not a file of a model");
  fs::remove(dir + "/notes.txt");
  fs::create_directory(dir + "/tokenizer.json");
  expect_refused(tmp, save, "save " + dir + ": 'tokenizer.json' is not a regular file");
  expect_refused(
      tmp, [&] { save_hf_dir(tmp.file("no/m"), kConfig, weights(1)); },
      "save " + tmp.file("no/m") + ": folder " + tmp.file("no") + " does not exist");
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directory(tmp.file("ro"));
    fs::permissions(tmp.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    expect_refused(
        tmp, [&] { save_hf_dir(tmp.file("ro/m"), kConfig, weights(1)); },
        "save " + tmp.file("ro/m") + ": folder " + tmp.file("ro") + " is not writable");
    fs::permissions(tmp.file("ro"), fs::perms::owner_all);
  }
}

TEST(HfDirWriteRefused, TargetLockedByAnotherRun) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  save_hf_dir(dir, kConfig, weights(1));
  testing::Holder other(dir);
  ASSERT_GT(other.pid, 0);
  expect_refused(
      tmp, [&] { save_hf_dir(dir, kConfig, weights(2)); },
      "save " + dir + " is being written by another run");
  EXPECT_TRUE(to_array(HfModelDir::open(dir).at("model.norm.weight"))
                  .bitwise_equal(Array::filled(DType::f32, Shape{4}, 2)));
}

// A signal handler's remove_live_temporaries() during a save takes the staging folder away; the
// previous folder is untouched.
TEST(HfDirWrite, SignalCleanupRemovesTheStagingFolder) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  save_hf_dir(dir, kConfig, weights(1));
  const auto before = testing::listing(tmp.path());
  HfSaveOptions o;
  bool staged = false;
  o.save.progress = [&](SaveStage s, uint64_t) {
    if (s != SaveStage::wrote || staged) return;
    for (const auto& e : fs::directory_iterator(tmp.path()))
      staged |= e.path().filename().string().rfind(".m.saving.", 0) == 0;
    remove_live_temporaries();
  };
  EXPECT_NE(error_of([&] { save_hf_dir(dir, kConfig, weights(2), o); }), "(no error)");
  EXPECT_TRUE(staged);
  EXPECT_EQ(testing::listing(tmp.path()), before);
}

// ---- training state beside the folder ----

Checkpoint training_checkpoint() {
  Checkpoint c;
  c.params = weights(1);
  c.optimizer = "adamw";
  c.hyper_parameters = {{"lr", "0.001"}, {"weight_decay", "0.1"}};
  c.optimizer_state.emplace_back("optimizer.model.norm.weight.exp_avg",
                                 Array::filled(DType::f32, Shape{4}, 0.5));
  c.optimizer_state.emplace_back("optimizer.step", Array::scalar<int32_t>(7));
  c.step = 9;
  c.skipped_steps = 2;
  c.seed = 42;
  c.data_position = 1234;
  c.user = {{"recipe", "llama"}};
  return c;
}

TEST(HfTrainingState, SavedBesideTheFolderAndLoadedWithIt) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  const Checkpoint c = training_checkpoint();
  save_hf_checkpoint(dir + "/", kConfig, c, shards_of(64));
  EXPECT_EQ(training_state_path(dir + "/"), dir + ".training.safetensors");
  EXPECT_EQ(
      testing::listing(tmp.path()),
      (std::vector<std::string>{".m.lock", "m", "m.training.safetensors", "m/config.json",
                                "m/" + hf_shard_name(1, 3), "m/" + hf_shard_name(2, 3),
                                "m/" + hf_shard_name(3, 3), "m/model.safetensors.index.json"}));
  const HfModelDir d = HfModelDir::open(dir);
  const Checkpoint r = load_hf_checkpoint(d);
  EXPECT_EQ(r.source, dir);
  std::vector<TensorSpec> specs;
  for (const auto& [name, a] : c.params) specs.push_back({name, a.dtype(), a.shape()});
  const std::vector<Array> params = restore_params(r, specs);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(params[i].bitwise_equal(c.params[i].second)) << c.params[i].first;
  ASSERT_EQ(r.optimizer_state.size(), 2u);
  EXPECT_TRUE(r.optimizer_state[0].second.bitwise_equal(c.optimizer_state[0].second));
  EXPECT_EQ(r.optimizer, "adamw");
  EXPECT_EQ(r.hyper_parameters, c.hyper_parameters);
  EXPECT_EQ(r.step, 9);
  EXPECT_EQ(r.skipped_steps, 2);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.data_position, 1234);
  EXPECT_EQ(r.user, c.user);
  EXPECT_EQ(r.model_digest, tensors_digest(d.tensor_refs()));
  // Parameters only, when asked.
  const Checkpoint p = load_hf_checkpoint(d, false);
  EXPECT_EQ(p.step, 0);
  EXPECT_FALSE(p.has_optimizer_state());
}

TEST(HfTrainingState, OtherWeightsOrAFileWithParametersAreRefused) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m"), state = training_state_path(dir);
  save_hf_checkpoint(dir, kConfig, training_checkpoint());
  save_hf_dir(dir, kConfig, weights(5));  // the folder alone, as a save stopped between the two
  const HfModelDir d = HfModelDir::open(dir);
  const std::string e = error_of([&] { load_hf_checkpoint(d); });
  EXPECT_EQ(e.rfind(state + ": was saved with other weights than " + dir + " holds", 0), 0u) << e;
  EXPECT_EQ(load_hf_checkpoint(d, false).params.size(), 3u);
  save_checkpoint(state, training_checkpoint());  // a whole checkpoint in its place
  EXPECT_EQ(error_of([&] { load_hf_checkpoint(d); }),
            state +
                ": holds tensors that are not optimizer state (e.g. 'lm_head.weight'): not a "
                "training state file");
  fs::remove(state);
  EXPECT_EQ(load_hf_checkpoint(d).step, 0);  // no file: parameters only
  // The digest is of names, dtypes, shapes and bytes, in any order.
  NamedArrays w = weights(5);
  std::vector<TensorRef> refs;
  for (const auto& [n, a] : w) refs.push_back(tensor_ref(n, a));
  EXPECT_EQ(tensors_digest(refs), tensors_digest(d.tensor_refs()));
  std::swap(refs[0], refs[2]);
  EXPECT_EQ(tensors_digest(refs), tensors_digest(d.tensor_refs()));
  refs[0].shape = {4, 8};
  EXPECT_NE(tensors_digest(refs), tensors_digest(d.tensor_refs()));
}

TEST(HfTrainingState, DtypesTlalocLacksAreNamed) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  const std::vector<std::byte> bytes(8);
  save_hf_dir(dir, kConfig, {TensorRef{"ids", StDType::I64, {1}, bytes}});
  const HfModelDir d = HfModelDir::open(dir);
  EXPECT_EQ(error_of([&] { load_hf_checkpoint(d); }),
            dir + ": tensors of dtypes tlaloc lacks: 'ids' (I64)");
}

}  // namespace
}  // namespace tlaloc::io
