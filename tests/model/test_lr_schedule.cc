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
  s.warmup_steps = static_cast<double>(warmup);
  s.decay_steps = decay;
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
  cfg.global_batch_size = 16;
  const LrSchedule s = LrSchedule::from_config(cfg);
  EXPECT_EQ(s.decay_steps, 40 * 16);  // counted in samples, as Megatron's scheduler
  EXPECT_NEAR(s.lr_at(20 * 16), 1.1e-3, 1e-15);
}

// Megatron's two ways to give one schedule: iterations (× global batch inside the scheduler) and
// samples. Where they describe the same run the lr of every iteration is the same number.
TEST(LrSchedule, SampleBasedEqualsIterationBasedWhereTheyCoincide) {
  for (LrDecayStyle style : {LrDecayStyle::cosine, LrDecayStyle::linear, LrDecayStyle::constant}) {
    TrainingConfig by_iter;
    by_iter.global_batch_size = 6;
    by_iter.train_iters = 50;
    by_iter.lr_warmup_iters = 7;
    by_iter.lr_decay_iters = 40;
    by_iter.min_lr = 1e-5;
    by_iter.lr_decay_style = style;
    TrainingConfig by_samples = by_iter;
    by_samples.train_iters = 0;
    by_samples.lr_warmup_iters = 0;
    by_samples.lr_decay_iters = 0;
    by_samples.train_samples = 50 * 6;
    by_samples.lr_warmup_samples = 7 * 6;
    by_samples.lr_decay_samples = 40 * 6;
    by_samples.resolve_train_iters();
    by_iter.validate();
    by_samples.validate();
    EXPECT_EQ(by_samples.train_iters, 50);
    const LrSchedule a = LrSchedule::from_config(by_iter);
    const LrSchedule b = LrSchedule::from_config(by_samples);
    for (int64_t it = 0; it <= 55; ++it) {
      EXPECT_EQ(a.lr_at(it * 6), b.lr_at(it * 6)) << "iteration " << it;
    }
    EXPECT_GT(a.lr_at(20 * 6), a.min_lr);
    EXPECT_LT(a.lr_at(3 * 6), a.max_lr);  // inside the warm-up: the unit matters
    // A warm-up fraction of the decay is the same share in either unit.
    by_iter.lr_warmup_iters = 0;
    by_iter.lr_warmup_fraction = 0.25;
    by_samples.lr_warmup_samples = 0;
    by_samples.lr_warmup_fraction = 0.25;
    const LrSchedule fa = LrSchedule::from_config(by_iter);
    const LrSchedule fb = LrSchedule::from_config(by_samples);
    EXPECT_DOUBLE_EQ(fa.warmup_steps, 60.0);
    for (int64_t it = 0; it <= 55; ++it) EXPECT_EQ(fa.lr_at(it * 6), fb.lr_at(it * 6)) << it;
  }
}

// Megatron's exclusivity: a run counts in iterations or in samples; mixing is one clear error.
TEST(LrSchedule, MixingIterationAndSampleUnitsIsAClearError) {
  auto message = [](const TrainingConfig& c) {
    try {
      c.validate();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TrainingConfig iters;
  iters.lr_warmup_samples = 64;
  EXPECT_NE(message(iters).find("--lr-warmup-iters"), std::string::npos) << message(iters);
  TrainingConfig samples;
  samples.train_samples = 1600;
  samples.lr_warmup_iters = 5;
  samples.resolve_train_iters();
  EXPECT_NE(message(samples).find("--lr-warmup-samples"), std::string::npos) << message(samples);
  samples.lr_warmup_iters = 0;
  samples.lr_decay_iters = 50;
  EXPECT_NE(message(samples).find("counts samples"), std::string::npos) << message(samples);
  samples.lr_decay_iters = 0;
  samples.lr_warmup_samples = 10;
  samples.lr_warmup_fraction = 0.1;
  EXPECT_NE(message(samples).find("only one of --lr-warmup-fraction"), std::string::npos);
  samples.lr_warmup_fraction = -1;
  EXPECT_EQ(message(samples), "");
}

TEST(LrSchedule, RejectsWarmupNotShorterThanDecay) {
  LrSchedule s = make(LrDecayStyle::cosine, 0, 10);
  s.warmup_steps = 10;
  try {
    s.validate();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--lr-warmup-iters"), std::string::npos) << e.what();
  }
  s.warmup_steps = 2;
  s.min_lr = 2e-3;  // above max
  EXPECT_THROW(s.validate(), ConfigError);
}

}  // namespace
}  // namespace infinipipe
