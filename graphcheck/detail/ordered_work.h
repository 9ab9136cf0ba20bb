// Work on several threads whose results are used in order: the check engine reads the
// graphs of a check point on several threads (their passes share nothing) and decides their
// references on the caller's thread, graph after graph, so that the report is the same
// whatever the thread count (docs/verdicts.md, "Performance").
#ifndef GRAPHCHECK_DETAIL_ORDERED_WORK_H_
#define GRAPHCHECK_DETAIL_ORDERED_WORK_H_

#if defined(__linux__)
#include <sched.h>
#endif

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace graphcheck::detail {

/// The cores this process may run on: its CPU affinity where the system says (a container
/// or `taskset` limits it; `std::thread::hardware_concurrency` counts the machine's), else
/// the machine's; at least 1.
inline std::size_t usable_cores() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    return static_cast<std::size_t>(CPU_COUNT(&set));
  }
#endif
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : cores;
}

/// Runs `produce(i, slot)` for every i in [0, n) on up to `threads` threads (the caller's
/// among them, as slot 0; the others are slots 1 to threads - 1, one thread each, so that a
/// slot's scratch state is never shared), and `consume(i)` on the caller's thread in
/// increasing i, each after its `produce`. At most `window` items are produced ahead of the
/// last consumed one, which bounds the memory their results hold. While its next item is
/// still being produced elsewhere, the caller produces a later one.
/// The first exception from either function stops the work (items already claimed finish);
/// it is rethrown on the caller's thread once every thread has ended.
/// Thread safety: `produce` must touch only item i's result and slot's scratch state.
template <typename Produce, typename Consume>
void run_ordered(std::size_t n, std::size_t threads, std::size_t window, Produce&& produce,
                 Consume&& consume) {
  if (threads <= 1 || n <= 1) {
    for (std::size_t i = 0; i < n; ++i) {
      produce(i, std::size_t{0});
      consume(i);
    }
    return;
  }
  window = window < threads ? threads : window;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> done(n, 0);
  std::size_t claimed = 0;   // items [0, claimed) are taken by some thread
  std::size_t consumed = 0;  // items [0, consumed) are consumed
  bool stop = false;
  std::exception_ptr error;
  // Takes the next item when one is within the window; under the lock.
  const auto claim = [&](std::size_t* item) {
    if (stop || claimed >= n || claimed >= consumed + window) {
      return false;
    }
    *item = claimed++;
    return true;
  };
  // Produces `item` outside the lock and reports it; under the lock on entry and on return.
  const auto make = [&](std::unique_lock<std::mutex>& lock, std::size_t item, std::size_t slot) {
    lock.unlock();
    try {
      produce(item, slot);
    } catch (...) {
      lock.lock();
      if (!error) {
        error = std::current_exception();
      }
      stop = true;
      changed.notify_all();
      return;
    }
    lock.lock();
    done[item] = 1;
    changed.notify_all();
  };
  const auto work = [&](std::size_t slot) {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      std::size_t item = 0;
      changed.wait(lock, [&] { return stop || claimed >= n || claimed < consumed + window; });
      if (!claim(&item)) {
        return;
      }
      make(lock, item, slot);
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  const auto finish = [&] {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      stop = true;
      changed.notify_all();
    }
    for (std::thread& helper : helpers) {
      helper.join();
    }
  };
  try {
    for (std::size_t slot = 1; slot < threads; ++slot) {
      try {
        helpers.emplace_back(work, slot);
      } catch (const std::system_error&) {
        break;  // no more threads to be had: those running (the caller's at least) do it all
      }
    }
    std::unique_lock<std::mutex> lock(mutex);
    for (std::size_t i = 0; i < n && !stop; ++i) {
      while (done[i] == 0 && !stop) {
        std::size_t item = 0;
        if (claim(&item)) {
          make(lock, item, 0);
        } else {
          changed.wait(lock, [&] { return stop || done[i] != 0; });
        }
      }
      if (stop) {
        break;
      }
      lock.unlock();
      consume(i);
      lock.lock();
      ++consumed;
      changed.notify_all();
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  if (error) {
    std::rethrow_exception(error);
  }
}

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_ORDERED_WORK_H_
