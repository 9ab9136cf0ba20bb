// Constructed CUPTI driver-API callback data for the cupti-fake tests of allocation
// tracking and launch checks (owner: cupti-b).
#ifndef GRAPHCHECK_TESTS_CUPTI_FAKE_CALLBACK_DATA_H_
#define GRAPHCHECK_TESTS_CUPTI_FAKE_CALLBACK_DATA_H_

#include <cuda.h>
#include <cupti.h>

namespace graphcheck::cupti::testing {

/// One driver-API call as CUPTI reports it: the same params struct at ENTER and EXIT, and
/// the return value at EXIT.
template <typename Params>
class DriverCall {
 public:
  explicit DriverCall(const Params& params, CUresult result = CUDA_SUCCESS)
      : params_(params), result_(result) {}

  /// The callback data for `site`, pointing into this object (keep it alive).
  const CUpti_CallbackData* at(CUpti_ApiCallbackSite site) {
    data_ = {};
    data_.callbackSite = site;
    data_.functionParams = &params_;
    data_.functionReturnValue = site == CUPTI_API_EXIT ? &result_ : nullptr;
    return &data_;
  }
  Params& params() { return params_; }

 private:
  Params params_;
  CUresult result_;
  CUpti_CallbackData data_{};
};

/// Sends a driver call through `handler` at ENTER and EXIT, as CUPTI does.
template <typename Handler, typename Params>
void drive(Handler& handler, CUpti_CallbackId cbid, const Params& params,
           CUresult result = CUDA_SUCCESS) {
  DriverCall<Params> call(params, result);
  handler.on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, call.at(CUPTI_API_ENTER));
  handler.on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, call.at(CUPTI_API_EXIT));
}

}  // namespace graphcheck::cupti::testing

#endif  // GRAPHCHECK_TESTS_CUPTI_FAKE_CALLBACK_DATA_H_
