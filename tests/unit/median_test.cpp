// The one median rule every reported timing uses.
#include <gtest/gtest.h>

#include "util/median.h"

namespace ts {
namespace {

TEST(Median, OddCountIsTheMiddleEvenCountTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({7.0}), 7.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({5.0, 5.0, 1.0, 9.0}), 5.0);
  EXPECT_EQ(median({10.0, 0.5, 2.0, 8.0, 1.0, 30.0}), 5.0);
}

}  // namespace
}  // namespace ts
