// The driver/CUPTI seam: checked-call messages, run-time loading and its error paths, and
// the first-error slot.
#include "cupti/driver_api.h"

#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "common/thrown_message.h"
#include "cupti/status.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using ::testing::HasSubstr;
using ::testing::Not;

using test_support::thrown_message;

TEST(CApiName, MapsMethodCallsToTheirCFunctionNames) {
  EXPECT_EQ(detail::c_api_name("cu_graph_get_nodes(graph, nullptr, &count)"), "cuGraphGetNodes");
  EXPECT_EQ(detail::c_api_name("cupti_subscribe_v2(&h, cb, d, &p)"), "cuptiSubscribe_v2");
  EXPECT_EQ(detail::c_api_name("cu_graph_kernel_node_get_params(node, &params)"),
            "cuGraphKernelNodeGetParams");
  EXPECT_EQ(detail::c_api_name("api_.cu_func_get_name(&name, func)"), "cuFuncGetName");
}

TEST(CheckedCall, ThrowsWithCallErrorNameStringAndLocation) {
  FakeDriver api;
  api.fail["cu_graph_get_nodes"] = CUDA_ERROR_INVALID_HANDLE;
  std::size_t count = 0;
  const std::string message = thrown_message(
      [&] { GRAPHCHECK_CU_CHECK(api, cu_graph_get_nodes(nullptr, nullptr, &count)); });
  EXPECT_THAT(message, HasSubstr("cuGraphGetNodes failed with CUDA_ERROR_INVALID_HANDLE "
                                 "(invalid resource handle)"));
  EXPECT_THAT(message, HasSubstr("[cu_graph_get_nodes(nullptr, nullptr, &count) at "
                                 "cupti_fake/driver_api_test.cc:"));
}

TEST(CheckedCall, UnknownErrorCodesAreShownAsNumbers) {
  FakeDriver api;
  api.fail["cu_ctx_get_current"] = CUDA_ERROR_UNKNOWN;
  CUcontext context = nullptr;
  const std::string message =
      thrown_message([&] { GRAPHCHECK_CU_CHECK(api, cu_ctx_get_current(&context)); });
  EXPECT_THAT(message, HasSubstr("cuCtxGetCurrent failed with CUresult 999 ["));
}

TEST(CheckedCall, CuptiFormNamesTheCuptiResult) {
  FakeDriver api;
  api.fail_cupti["cupti_get_graph_id"] = CUPTI_ERROR_NOT_INITIALIZED;
  std::uint32_t id = 0;
  const std::string message =
      thrown_message([&] { GRAPHCHECK_CUPTI_CHECK(api, cupti_get_graph_id(nullptr, &id)); });
  EXPECT_THAT(message, HasSubstr("cuptiGetGraphId failed with CUPTI_ERROR_NOT_INITIALIZED ["));
}

TEST(CheckedCall, StatusFormDoesNotThrowAndCarriesTheSameMessage) {
  FakeDriver api;
  int version = 0;
  EXPECT_TRUE(GRAPHCHECK_CU_STATUS(api, cu_driver_get_version(&version)).ok());
  EXPECT_EQ(version, 13000);
  api.fail["cu_driver_get_version"] = CUDA_ERROR_NOT_SUPPORTED;
  const Status status = GRAPHCHECK_CU_STATUS(api, cu_driver_get_version(&version));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cuDriverGetVersion failed with "
                                          "CUDA_ERROR_NOT_SUPPORTED (operation not supported)"));
  EXPECT_EQ(thrown_message([&] { status.throw_if_error(); }), status.message());
}

// A loader that "has" the libraries and symbols it is told about.
CUresult fake_driver_version(int* version) {
  *version = 12020;
  return CUDA_SUCCESS;
}
void stub_function() {}

class FakeLoader : public LibraryLoader {
 public:
  std::set<std::string> libraries;
  std::set<std::string> missing_symbols;
  std::map<std::string, std::string> loaded;
  std::vector<std::string> opened;

  void* open(const std::string& path) override {
    opened.push_back(path);
    return libraries.contains(path) ? static_cast<void*>(this) : nullptr;
  }
  void* symbol(void* /*library*/, const char* name) override {
    const std::string symbol(name);
    if (missing_symbols.contains(symbol) || symbol == "cuGetProcAddress_v2") {
      return nullptr;  // no cuGetProcAddress: every symbol goes through symbol()
    }
    if (symbol == "cuDriverGetVersion") {
      return reinterpret_cast<void*>(&fake_driver_version);
    }
    return reinterpret_cast<void*>(&stub_function);
  }
  std::string last_error() override { return "file not found"; }
  std::string loaded_path(const std::string& soname) override {
    const auto found = loaded.find(soname);
    return found == loaded.end() ? std::string() : found->second;
  }
};

LoadOptions options_for(LibraryLoader& loader, std::vector<std::string> candidates) {
  LoadOptions options;
  options.loader = &loader;
  options.cupti_candidates = std::move(candidates);
  return options;
}

TEST(LoadDriverApi, WithoutADriverSaysSoAndSuggestsTheCpuPaths) {
  FakeLoader loader;
  const DriverApiLoad load = load_driver_api(options_for(loader, {}));
  EXPECT_EQ(load.api, nullptr);
  EXPECT_THAT(load.status.message(),
              HasSubstr("no CUDA driver: could not load libcuda.so.1 (file not found)"));
  EXPECT_THAT(load.status.message(), HasSubstr("ATen backend"));
}

TEST(LoadDriverApi, WithoutCuptiListsWhereItLookedAndTheFix) {
  FakeLoader loader;
  loader.libraries = {"libcuda.so.1"};
  const DriverApiLoad load = load_driver_api(options_for(loader, {"/a/libcupti.so.13", "b.so"}));
  EXPECT_EQ(load.api, nullptr);
  EXPECT_THAT(load.status.message(), HasSubstr("no CUPTI: tried /a/libcupti.so.13, b.so"));
  EXPECT_THAT(load.status.message(), HasSubstr("GRAPHCHECK_CUPTI_LIBRARY"));
}

TEST(LoadDriverApi, NamesMissingDriverSymbolsAndTheDriverVersion) {
  FakeLoader loader;
  loader.libraries = {"libcuda.so.1", "libcupti.so.13"};
  loader.missing_symbols = {"cuFuncGetParamInfo", "cuKernelGetParamInfo"};
  const DriverApiLoad load = load_driver_api(options_for(loader, {"libcupti.so.13"}));
  EXPECT_EQ(load.api, nullptr);
  EXPECT_THAT(load.status.message(),
              HasSubstr("reports CUDA 12.2) lacks cuFuncGetParamInfo, cuKernelGetParamInfo"));
  EXPECT_THAT(load.status.message(), HasSubstr("CUDA 12.4 or newer"));
}

TEST(LoadDriverApi, NamesMissingCuptiSymbols) {
  FakeLoader loader;
  loader.libraries = {"libcuda.so.1", "libcupti.so.13"};
  loader.missing_symbols = {"cuptiSubscribe_v2"};
  const DriverApiLoad load = load_driver_api(options_for(loader, {"libcupti.so.13"}));
  EXPECT_THAT(load.status.message(), HasSubstr("libcupti.so.13 lacks cuptiSubscribe_v2"));
  EXPECT_THAT(load.status.message(), Not(HasSubstr("CUDA driver")));
}

TEST(LoadDriverApi, ReturnsATableForwardingToTheResolvedFunctions) {
  FakeLoader loader;
  loader.libraries = {"libcuda.so.1", "/x/libcupti.so.13"};
  const DriverApiLoad load = load_driver_api(options_for(loader, {"nope.so", "/x/libcupti.so.13"}));
  ASSERT_TRUE(load.status.ok()) << load.status.message();
  ASSERT_NE(load.api, nullptr);
  int version = 0;
  EXPECT_EQ(load.api->cu_driver_get_version(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 12020);
}

TEST(LoadDriverApi, DefaultCandidatesLookNextToALoadedCudartAndHonourTheEnvironment) {
  FakeLoader loader;
  loader.loaded["libcudart.so.13"] = "/venv/nvidia/cu13/lib/libcudart.so.13";
  ::setenv("GRAPHCHECK_CUPTI_LIBRARY", "/explicit/libcupti.so.13", 1);
  const std::vector<std::string> candidates = default_cupti_candidates(loader);
  ::unsetenv("GRAPHCHECK_CUPTI_LIBRARY");
  ASSERT_GE(candidates.size(), 4U);
  EXPECT_EQ(candidates[0], "/explicit/libcupti.so.13");
  EXPECT_EQ(candidates[1], "libcupti.so.13");
  EXPECT_THAT(candidates, ::testing::Contains("/venv/nvidia/cu13/lib/libcupti.so.13"));
  EXPECT_THAT(candidates, ::testing::Contains("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"));
}

TEST(LoadDriverApi, OnThisMachineEitherLoadsOrExplainsWhy) {
  // The development machines have no driver; a GPU machine loads. Either way: no crash, and
  // a failure is a message, not an exception.
  const DriverApiLoad load = load_driver_api();
  if (load.status.ok()) {
    EXPECT_NE(load.api, nullptr);
  } else {
    EXPECT_EQ(load.api, nullptr);
    EXPECT_THAT(load.status.message(), HasSubstr("graphcheck: "));
  }
}

TEST(FirstError, KeepsTheFirstMessageUntilTaken) {
  FirstError slot;
  EXPECT_FALSE(slot.pending());
  EXPECT_TRUE(slot.take().ok());
  EXPECT_TRUE(slot.record("first"));
  EXPECT_FALSE(slot.record("second"));
  EXPECT_TRUE(slot.pending());
  EXPECT_EQ(slot.take().message(), "first");
  EXPECT_FALSE(slot.pending());
  EXPECT_TRUE(slot.record("third"));
  EXPECT_EQ(slot.take().message(), "third");
}

TEST(FirstError, TruncatesLongMessagesWithoutOverflow) {
  FirstError slot;
  const std::string long_message(5000, 'x');
  EXPECT_TRUE(slot.record(long_message));
  EXPECT_EQ(slot.take().message().size(), FirstError::kCapacity - 1);
}

}  // namespace
}  // namespace graphcheck::cupti
