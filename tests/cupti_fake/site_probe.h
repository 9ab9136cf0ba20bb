// A caller in a shared library of its own (libsite_probe.so), so that a test's allocation has
// a frame outside the CUDA, CUPTI and graphcheck code, which the test binary links in.
#ifndef GRAPHCHECK_TESTS_CUPTI_FAKE_SITE_PROBE_H_
#define GRAPHCHECK_TESTS_CUPTI_FAKE_SITE_PROBE_H_

extern "C" {
/// Calls `function(argument)` from libsite_probe.so's `site_probe_call` frame (kept on the
/// stack: not a tail call).
void site_probe_call(void (*function)(void*), void* argument);
}

#endif  // GRAPHCHECK_TESTS_CUPTI_FAKE_SITE_PROBE_H_
