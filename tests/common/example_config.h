// One of examples/*.yaml read as `infinipipe --config` reads it, validated.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "common/build_paths.h"
#include "options/options.h"
#include "core/config.h"

namespace infinipipe::testing {

inline Config example_config(const std::string& name) {
  const std::string path = std::string(INFINIPIPE_SOURCE_DIR) + "/examples/" + name + ".yaml";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  Config cfg;
  options::apply_yaml(cfg, text.str(), path);
  cfg.validate();
  return cfg;
}

}  // namespace infinipipe::testing
