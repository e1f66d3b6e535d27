// The message of the Error a call throws, for tests that check what a person is told.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/error.h"

namespace infinipipe::testing {

// fn's Error message, or "" when fn throws none.
inline std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// fn's ConfigError message, or "" when it throws none; any other Error fails the test.
inline std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "not a ConfigError: " << e.what();
    return e.what();
  }
  return "";
}

// What cfg.validate() says, or "" when the configuration is valid.
inline std::string validate_error(Config cfg) {
  return error_text([&] { cfg.validate(); });
}

}  // namespace infinipipe::testing
