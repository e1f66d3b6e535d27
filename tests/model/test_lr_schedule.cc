// LrSchedule against hand-computed values of Megatron-LM's OptimizerParamScheduler.get_lr.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "model/lr_schedule.h"

namespace infinipipe {
namespace {

LrSchedule make(LrDecayStyle style, int64_t warmup, int64_t decay) {
  LrSchedule s;
  s.max_lr = 1e-3;
  s.min_lr = 1e-4;
  s.warmup_iters = warmup;
  s.decay_iters = decay;
  s.style = style;
  s.validate();
  return s;
}

TEST(LrSchedule, WarmupIsLinearFromZero) {
  const LrSchedule s = make(LrDecayStyle::cosine, 10, 110);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1e-3);  // Megatron: num_steps <= warmup is still warm-up
}

TEST(LrSchedule, CosineDecayHandValues) {
  const LrSchedule s = make(LrDecayStyle::cosine, 10, 110);
  // ratio 0.25: coeff = (cos(pi/4) + 1) / 2 = 0.8535533905932737
  EXPECT_NEAR(s.lr_at(35), 1e-4 + 0.8535533905932737 * 9e-4, 1e-15);
  EXPECT_NEAR(s.lr_at(60), 5.5e-4, 1e-15);  // ratio 0.5
  EXPECT_NEAR(s.lr_at(110), 1e-4, 1e-15);   // end of decay
  EXPECT_DOUBLE_EQ(s.lr_at(111), 1e-4);     // min_lr afterwards
  EXPECT_DOUBLE_EQ(s.lr_at(100000), 1e-4);
  // Just after warm-up the decay starts at max_lr and never rises.
  double prev = s.lr_at(10);
  for (int64_t i = 11; i <= 120; i++) {
    EXPECT_LE(s.lr_at(i), prev) << i;
    prev = s.lr_at(i);
  }
}

TEST(LrSchedule, LinearDecayHandValues) {
  const LrSchedule s = make(LrDecayStyle::linear, 10, 110);
  EXPECT_NEAR(s.lr_at(35), 7.75e-4, 1e-15);
  EXPECT_NEAR(s.lr_at(60), 5.5e-4, 1e-15);
  EXPECT_NEAR(s.lr_at(85), 3.25e-4, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr_at(200), 1e-4);
}

TEST(LrSchedule, ConstantKeepsMaxAfterWarmup) {
  const LrSchedule s = make(LrDecayStyle::constant, 4, 8);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(5), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(1000), 1e-3);  // constant ignores the decay horizon, as Megatron
}

TEST(LrSchedule, NoWarmupStartsAtMax) {
  const LrSchedule s = make(LrDecayStyle::cosine, 0, 100);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-3);
  EXPECT_NEAR(s.lr_at(50), 5.5e-4, 1e-15);
}

TEST(LrSchedule, FromConfigUsesTrainItersAsDefaultDecay) {
  TrainingConfig cfg;
  cfg.lr = 2e-3;
  cfg.min_lr = 2e-4;
  cfg.train_iters = 40;
  cfg.lr_warmup_iters = 0;
  cfg.lr_decay_iters = 0;
  cfg.lr_decay_style = LrDecayStyle::linear;
  const LrSchedule s = LrSchedule::from_config(cfg);
  EXPECT_EQ(s.decay_iters, 40);
  EXPECT_NEAR(s.lr_at(20), 1.1e-3, 1e-15);
}

TEST(LrSchedule, RejectsWarmupNotShorterThanDecay) {
  LrSchedule s = make(LrDecayStyle::cosine, 0, 10);
  s.warmup_iters = 10;
  try {
    s.validate();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--lr-warmup-iters"), std::string::npos) << e.what();
  }
  s.warmup_iters = 2;
  s.min_lr = 2e-3;  // above max
  EXPECT_THROW(s.validate(), ConfigError);
}

}  // namespace
}  // namespace infinipipe
