// Files that are not regular files where the loaders expect one: a FIFO
// must be refused at once with one line (open() on a FIFO waits for a writer
// forever), devices likewise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include "model/config_json.h"
#include "model/mapped_file.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"
#include "session/model_setup.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

// A copy of the tiny fixture in a fresh directory, with `fifo_name` replaced
// by a FIFO.
class FifoModel {
 public:
  explicit FifoModel(const std::string& fifo_name) {
    dir_ = fs::temp_directory_path() /
           ("ts_fifo_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
      if (fifo_name != f) fs::copy_file(test::tiny_model_dir() / f, dir_ / f);
    fifo_ = dir_ / fifo_name;
    if (::mkfifo(fifo_.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
  }
  ~FifoModel() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }
  const fs::path& fifo() const { return fifo_; }

 private:
  static inline int counter_ = 0;
  fs::path dir_, fifo_;
};

// The error `fn` throws, or a failure when it blocks (then a writer opens
// and closes the FIFO so that the blocked reader returns and the test ends).
template <class Fn>
std::string error_of(const fs::path& fifo, Fn fn) {
  auto result = std::async(std::launch::async, [fn]() -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo;
    while (result.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  return result.get();
}

void expect_refused(const std::string& message, const std::string& file) {
  EXPECT_NE(message.find(file), std::string::npos) << message;
  EXPECT_NE(message.find("not a regular file (a FIFO)"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

ModelSetupOptions setup_for(const fs::path& dir) {
  ModelSetupOptions o;
  o.model = dir;
  o.device = "cpu";
  o.cpu_threads = 1;
  return o;
}

TEST(SpecialFiles, FifoAsConfigJsonIsRefusedWithoutBlocking) {
  FifoModel m("config.json");
  expect_refused(error_of(m.fifo(), [&] { load_config_json(m.fifo()); }), "config.json");
  expect_refused(error_of(m.fifo(), [&] { load_model_setup(setup_for(m.dir())); }), "config.json");
}

TEST(SpecialFiles, FifoAsModelSafetensorsIsRefusedWithoutBlocking) {
  FifoModel m("model.safetensors");
  expect_refused(error_of(m.fifo(), [&] { MappedFile f(m.fifo()); }), "model.safetensors");
  expect_refused(error_of(m.fifo(), [&] { load_model_setup(setup_for(m.dir())); }),
                 "model.safetensors");
  // Named directly, as --model DIR/model.safetensors.
  const std::string direct = error_of(m.fifo(), [&] { load_model(m.fifo()); });
  EXPECT_NE(direct.find("model.safetensors: not a regular file"), std::string::npos) << direct;
}

TEST(SpecialFiles, FifoAsTokenizerFileIsRefusedWithoutBlocking) {
  for (const char* name : {"vocab.json", "merges.txt"}) {
    FifoModel m(name);
    expect_refused(error_of(m.fifo(), [&] { Tokenizer::load(m.dir()); }), name);
  }
}

TEST(SpecialFiles, CharacterDeviceIsRefused) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  try {
    MappedFile f("/dev/zero");
    ADD_FAILURE() << "mapped /dev/zero";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file (a character device)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_config_json("/dev/zero"), Error);
}

}  // namespace
}  // namespace ts
