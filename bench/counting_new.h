// The memory benchmarks' counting allocator (counting_new.cc replaces the global operator new
// and delete of the program it is linked into): the bytes a thread allocates while it counts,
// as malloc_usable_size reports them, with their high-water mark. Other threads, and a thread
// that does not count, pay one thread-local test per allocation.
#ifndef GRAPHCHECK_BENCH_COUNTING_NEW_H_
#define GRAPHCHECK_BENCH_COUNTING_NEW_H_

#include <cstdint>

namespace graphcheck::bench {

/// Starts counting on this thread from zero (live and peak bytes).
void start_counting();
/// Stops counting on this thread; the peak of live bytes since `start_counting`.
std::int64_t stop_counting();
/// Bytes allocated and not freed on this thread since `start_counting`.
std::int64_t live_bytes();
/// The high-water mark of `live_bytes` since `start_counting`.
std::int64_t peak_bytes();

}  // namespace graphcheck::bench

#endif  // GRAPHCHECK_BENCH_COUNTING_NEW_H_
