#include "cupti_fake/site_probe.h"

namespace {
volatile int g_calls = 0;  // written after the call, so the call is not a tail call
}  // namespace

extern "C" __attribute__((noinline)) void site_probe_call(void (*function)(void*), void* argument) {
  function(argument);
  g_calls = g_calls + 1;
}
