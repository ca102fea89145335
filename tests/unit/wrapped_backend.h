#pragma once
// A backend that passes everything to another one: test doubles derive from
// it and override only what they observe or break (a failing forward, a spy
// on the options, the memory of a GPU).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"

namespace ts::test {

class WrappedBackend : public Backend {
 public:
  explicit WrappedBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::string device_name() const override { return inner_->device_name(); }
  BackendMemory memory() const override { return inner_->memory(); }
  int64_t kv_budget_bytes() const override { return inner_->kv_budget_bytes(); }
  std::string kv_budget_name() const override { return inner_->kv_budget_name(); }
  HardwareRoofs measure_roofs(int cpu_threads, double working_set_bytes) const override {
    return inner_->measure_roofs(cpu_threads, working_set_bytes);
  }
  double measure_bandwidth(int cpu_threads) const override {
    return inner_->measure_bandwidth(cpu_threads);
  }
  void init_cache(const KvCacheShape& shape) override { inner_->init_cache(shape); }
  void copy_blocks(const std::vector<BlockCopy>& copies) override { inner_->copy_blocks(copies); }
  void move_slots(const std::vector<SlotMove>& moves) override { inner_->move_slots(moves); }
  void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
               std::vector<EntryOutput>& outputs) override {
    inner_->forward(batch, options, outputs);
  }

 protected:
  Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace ts::test
