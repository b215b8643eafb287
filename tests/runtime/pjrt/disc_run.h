// The disc demo's Trainer for the pjrt lane tests: on the host lane (client null) or on a fake
// device, a cosine schedule over `schedule_steps` (computed in the step from its index), at most
// `max_in_flight` steps pending, its dots in `precision` (f16: with loss scaling).
#pragma once

#include <memory>

#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::testing {

inline constexpr int64_t kDiscPoints = 64;

struct DiscRun {
  std::shared_ptr<nn::Sequential> model = recipes::disc::make_model();
  std::unique_ptr<train::Trainer> trainer;
  explicit DiscRun(runtime::pjrt::Client* client, int64_t schedule_steps = 10,
                   int max_in_flight = 2, DType precision = DType::f32) {
    namespace disc = recipes::disc;
    auto keys = random::split(random::key(7), 2);
    model->init(keys[1]);
    train::TrainerOptions o;
    o.schedule = optim::parse_schedule("cosine", schedule_steps, 0);
    o.max_in_flight = max_in_flight;
    o.precision = precision;
    if (client) {
      o.lane = train::Lane::pjrt;
      o.client = client;
    }
    trainer = std::make_unique<train::Trainer>(
        *model, disc::mse_loss_fn(), disc::data_inputs(kDiscPoints), optim::Adam{.lr = 0.02}, o);
    disc::Data d = disc::make_data(keys[0], kDiscPoints);
    trainer->set_resident("x", d.x);
    trainer->set_resident("y", d.y);
  }
};

}  // namespace tlaloc::testing
