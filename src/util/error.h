#pragma once
// One error type for everything a user can cause (bad file, bad parameter,
// full cache). Its message is a single line that names the file / field /
// parameter at fault; front ends print it and keep their previous state.
#include <stdexcept>
#include <string>

namespace ts {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ts
