#pragma once
// One comparison of two KV cache occupancies, field by field: every field of
// KvOccupancy and of each SequenceOccupancy. Shared so that every test that
// says "the cache is as it was" (a rolled-back append, a re-opened session)
// checks the same fields, and a field added to the struct is added here once.
#include <gtest/gtest.h>

#include <string>

#include "engine/kv_cache.h"

namespace ts::test {

inline void expect_same_kv_occupancy(const KvOccupancy& a, const KvOccupancy& b) {
  EXPECT_EQ(a.blocks_total, b.blocks_total);
  EXPECT_EQ(a.blocks_used, b.blocks_used);
  EXPECT_EQ(a.blocks_shared, b.blocks_shared);
  EXPECT_EQ(a.blocks_free, b.blocks_free);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.bytes_per_layer_used, b.bytes_per_layer_used);
  EXPECT_EQ(a.bytes_per_layer_capacity, b.bytes_per_layer_capacity);
  EXPECT_EQ(a.wasted_slots, b.wasted_slots);
  EXPECT_EQ(a.ref_counts, b.ref_counts);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    EXPECT_EQ(a.sequences[i].id, b.sequences[i].id);
    EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens);
    EXPECT_EQ(a.sequences[i].block_table, b.sequences[i].block_table);
    EXPECT_EQ(a.sequences[i].wasted_slots, b.sequences[i].wasted_slots);
  }
}

}  // namespace ts::test
