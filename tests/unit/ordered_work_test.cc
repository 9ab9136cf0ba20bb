// detail/ordered_work.h: items produced on several threads are consumed in order on the
// caller's, each after its own production, never more than the window ahead, each slot on
// one thread at a time; the first exception stops the work and reaches the caller.
#include "graphcheck/detail/ordered_work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace graphcheck::detail {
namespace {

TEST(OrderedWorkTest, ConsumesInOrderAfterEachProductionWithinTheWindow) {
  for (const std::size_t threads : {1U, 2U, 3U, 8U}) {
    SCOPED_TRACE(threads);
    constexpr std::size_t kItems = 500;
    const std::size_t window = 2 * threads;
    std::vector<std::atomic<int>> made(kItems);
    std::vector<std::thread::id> slot_thread(threads);
    std::vector<std::atomic<int>> slot_busy(threads);
    std::mutex mutex;
    std::atomic<std::size_t> ahead{0};
    std::atomic<std::size_t> most_ahead{0};
    std::vector<std::size_t> order;
    bool other_thread = false;
    run_ordered(
        kItems, threads, window,
        [&](std::size_t i, std::size_t slot) {
          ASSERT_LT(slot, threads);
          EXPECT_EQ(slot_busy[slot].fetch_add(1), 0) << "slot " << slot << " used twice at once";
          {
            const std::lock_guard<std::mutex> lock(mutex);
            if (slot_thread[slot] == std::thread::id{}) {
              slot_thread[slot] = std::this_thread::get_id();
            }
            EXPECT_EQ(slot_thread[slot], std::this_thread::get_id()) << "slot " << slot;
            other_thread = other_thread || slot != 0;
          }
          const std::size_t now = ahead.fetch_add(1) + 1;
          std::size_t seen = most_ahead.load();
          while (now > seen && !most_ahead.compare_exchange_weak(seen, now)) {
          }
          if (i % 3 == 0) {
            std::this_thread::yield();  // items finish out of order
          }
          made[i].fetch_add(1);
          slot_busy[slot].fetch_sub(1);
        },
        [&](std::size_t i) {
          EXPECT_EQ(made[i].load(), 1) << "item " << i << " consumed before it was made";
          ahead.fetch_sub(1);
          order.push_back(i);
        });
    ASSERT_EQ(order.size(), kItems);
    for (std::size_t i = 0; i < kItems; ++i) {
      ASSERT_EQ(order[i], i);
      EXPECT_EQ(made[i].load(), 1) << i;
    }
    EXPECT_LE(most_ahead.load(), window);
    EXPECT_EQ(slot_thread[0], std::this_thread::get_id());  // slot 0 is the caller's
    if (threads == 1) {
      EXPECT_FALSE(other_thread);
    }
  }
}

TEST(OrderedWorkTest, TheFirstExceptionOfAProductionReachesTheCaller) {
  std::atomic<std::size_t> consumed{0};
  try {
    run_ordered(
        100, 3, 6,
        [&](std::size_t i, std::size_t /*slot*/) {
          if (i == 37) {
            throw std::runtime_error("item 37 failed");
          }
        },
        [&](std::size_t i) {
          EXPECT_LT(i, 37U);
          ++consumed;
        });
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "item 37 failed");
  }
  EXPECT_LE(consumed.load(), 37U);
}

TEST(OrderedWorkTest, AnExceptionOfAConsumerStopsTheThreadsAndReachesTheCaller) {
  std::atomic<std::size_t> made{0};
  EXPECT_THROW(run_ordered(
                   1000, 4, 8, [&](std::size_t /*i*/, std::size_t /*slot*/) { ++made; },
                   [&](std::size_t i) {
                     if (i == 5) {
                       throw std::logic_error("consumer failed at 5");
                     }
                   }),
               std::logic_error);
  EXPECT_LE(made.load(), 5U + 8U);  // nothing past the window of the failed item
}

TEST(OrderedWorkTest, UsableCoresAreTheAffinitysAndAtLeastOne) {
  const std::size_t cores = usable_cores();
  EXPECT_GE(cores, 1U);
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(cores, static_cast<std::size_t>(CPU_COUNT(&set)));
#endif
}

TEST(OrderedWorkTest, NothingToDoCallsNothing) {
  int calls = 0;
  run_ordered(
      0, 4, 8, [&](std::size_t /*i*/, std::size_t /*slot*/) { ++calls; },
      [&](std::size_t /*i*/) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace graphcheck::detail
