// Counting allocator for the memory benchmarks (counting_new.h): operator new and delete of a
// thread that turned counting on are counted, with a high-water mark.
#include "bench/counting_new.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace {
thread_local bool counting = false;
thread_local std::int64_t live = 0;
thread_local std::int64_t peak = 0;

void* counted_new(std::size_t size) {
  void* pointer = std::malloc(size == 0 ? 1 : size);
  if (pointer == nullptr) {
    throw std::bad_alloc();
  }
  if (counting) {
    live += static_cast<std::int64_t>(malloc_usable_size(pointer));
    peak = std::max(peak, live);
  }
  return pointer;
}

void counted_delete(void* pointer) noexcept {
  if (pointer != nullptr) {
    if (counting) {
      live -= static_cast<std::int64_t>(malloc_usable_size(pointer));
    }
    std::free(pointer);
  }
}
}  // namespace

// NOLINTBEGIN(misc-new-delete-overloads): the replaceable global forms, for counting
void* operator new(std::size_t size) { return counted_new(size); }
void* operator new[](std::size_t size) { return counted_new(size); }
void operator delete(void* pointer) noexcept { counted_delete(pointer); }
void operator delete[](void* pointer) noexcept { counted_delete(pointer); }
void operator delete(void* pointer, std::size_t /*size*/) noexcept { counted_delete(pointer); }
void operator delete[](void* pointer, std::size_t /*size*/) noexcept { counted_delete(pointer); }
// NOLINTEND(misc-new-delete-overloads)

namespace graphcheck::bench {

void start_counting() {
  live = 0;
  peak = 0;
  counting = true;
}

std::int64_t stop_counting() {
  counting = false;
  return peak;
}

std::int64_t live_bytes() { return live; }
std::int64_t peak_bytes() { return peak; }

}  // namespace graphcheck::bench
