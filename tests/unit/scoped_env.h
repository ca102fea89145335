#pragma once
// An environment variable set for one scope and restored (or unset) when the
// scope is left, however it is left: a test that throws leaves no variable
// behind for the next one.
#include <cstdlib>
#include <optional>
#include <string>

namespace ts::test {

class ScopedEnv {
 public:
  // value nullopt: the variable is unset for the scope.
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace ts::test
