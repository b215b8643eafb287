// Trainer <-> checkpoint: parameters under their dotted names, the optimizer's state under
// "optimizer.<param>.<exp_avg|exp_avg_sq|max_exp_avg_sq|momentum_buffer>" and "optimizer.step",
// the optimizer kind and hyper-parameters (PyTorch names), the schedule position (step), seed,
// data position and the recipe's own fields.
#pragma once

#include <map>
#include <string>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// A checkpoint of the trainer's current state. `data_position` is recipe-defined (e.g. batches
// consumed); `user` carries recipe fields (model sizes) checked on restore.
io::Checkpoint to_checkpoint(const Trainer& t, uint64_t seed, int64_t data_position,
                             std::map<std::string, std::string> user = {});
// Restores parameters, optimizer state and schedule position. Throws tlaloc::Error listing
// every missing / unexpected / mismatched tensor, or when the optimizer kind differs.
void restore(Trainer& t, const io::Checkpoint& ckpt);
// Loads `path` to resume a run whose checkpoints carry `user` metadata and `seed`. Throws
// tlaloc::Error "--resume <path>: ..." naming the recipe when the file's user.recipe differs
// from user["recipe"] (or is missing while `user` has one), else the first `user` field or the
// seed that differs.
io::Checkpoint load_resume(const std::string& path, const std::map<std::string, std::string>& user,
                           uint64_t seed);
// load_resume's checks of a checkpoint `c` already read from `path` (any format).
void check_resume_fields(const io::Checkpoint& c, const std::string& path,
                         const std::map<std::string, std::string>& user, uint64_t seed);
// Parameters and buffers (e.g. for evaluation): into the model's values, strictly.
void restore_model(nn::Module& m, const io::Checkpoint& ckpt);
// Throws tlaloc::Error "<where>: <kind> '<name>' holds N NaN or inf values of M (a diverged run
// or a damaged file)" for the first floating-point array of `arrays` (f32, f64, bf16, f16)
// holding NaN or inf: such a checkpoint would only sample or train into NaN.
void require_finite(const io::NamedArrays& arrays, const std::string& where,
                    const std::string& kind);
// Checks a checkpoint before a run resumes from it, each failure a tlaloc::Error starting with
// `where` and naming the tensor: every floating-point parameter and state tensor finite
// (require_finite), every "*.exp_avg_sq" / "*.max_exp_avg_sq" >= 0 (Adam's second moments;
// a negative one takes the square root of a negative number), and, with optimizer state, the
// step count agreeing with itself: the tensor "optimizer.step" (updates applied) present and
// equal to the metadata's step minus its skipped_steps (an edited or lost step would replay
// steps or restart the bias correction).
void check_resumable(const io::Checkpoint& c, const std::string& where);

// The optimizer's hyper-parameters as PyTorch names -> exact decimal strings.
std::map<std::string, std::string> hyper_parameters(const optim::Optimizer& opt);

}  // namespace tlaloc::train
